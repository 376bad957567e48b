"""Prompt injection through shared state: the attack corpus, the models and the harness.

``run_corpus(seeds=[0, 1, 2])`` plants every attack of the corpus in a team's shared state,
lets the assistant agent (a FakeLLM that follows instructions it sees, with explicit
obedience rates; or a real OpenAI-compatible endpoint when ``SUREFOOT_LLM_BASE_URL`` is set)
do a benign task, and reports attack success and task success under each mitigation.
"""

from __future__ import annotations

from ._corpus import ATTACKS, MISSES, TASKS, Attack, Goal, Plant, Task
from ._harness import (
    MITIGATIONS,
    CaseResult,
    FakeTools,
    InjectionReport,
    Mitigation,
    MitigationSummary,
    run_case,
    run_corpus,
)
from ._model import (
    ObedientModel,
    OpenAICompatible,
    VisibleEntry,
    find_instructions,
    model_from_env,
    parse_calls,
    visible_entries,
)

__all__ = [
    "ATTACKS",
    "MISSES",
    "MITIGATIONS",
    "TASKS",
    "Attack",
    "CaseResult",
    "FakeTools",
    "Goal",
    "InjectionReport",
    "Mitigation",
    "MitigationSummary",
    "ObedientModel",
    "OpenAICompatible",
    "Plant",
    "Task",
    "VisibleEntry",
    "find_instructions",
    "model_from_env",
    "parse_calls",
    "run_case",
    "run_corpus",
    "visible_entries",
]
