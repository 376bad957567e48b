"""Prompt injection through shared state: the attack corpus, the models and the harness.

``run_corpus(seeds=[0, 1, 2])`` plants every attack of the corpus in a team's shared state,
lets the assistant agent (a FakeLLM that follows instructions it sees, with explicit
obedience rates; or a real OpenAI-compatible endpoint when ``SUREFOOT_LLM_BASE_URL`` is set)
do a benign task, and reports attack success and task success under each mitigation.
The corpus, harness and models live in ``injection_corpus``, ``injection_harness`` and
``injection_model``; the ``statebus.injection`` experiment (seed 000, Hard 3) registers on
import.
"""

from __future__ import annotations

from typing import Any

from .._registry import FAKE_MODEL, LabContext, LabResult, Table, experiment
from ._common import SEED_FILE
from .injection_corpus import ATTACKS, MISSES, TASKS, Attack, Goal, Plant, Task
from .injection_harness import (
    MITIGATIONS,
    CaseResult,
    FakeTools,
    InjectionReport,
    Mitigation,
    MitigationSummary,
    run_case,
    run_corpus,
)
from .injection_model import (
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


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


# Mechanisms only: what each one does is fixed; what it achieves is measured (the answer).
_WHAT = {
    "none": "nothing: the assistant reads everything as plain text",
    "schema validation": "rejects writes that fail the corpus schemas (typed control fields, "
    "no extra fields); free-text fields are not checked",
    "scoped views": "the assistant reads only the task and its inputs",
    "spotlighting only": "untrusted entries shown as delimited, labelled data with a note "
    "not to follow them; nothing enforced",
    "trust labels + sink policy": "spotlighting, and SinkPolicy() refuses every tool call "
    "(no tool declared safe) with a tainted argument or chosen under tainted context",
    "all combined": "schema validation, scoped views, trust labels and the sink policy",
    "all combined, relay endorses its output": "all combined, but the summariser endorses "
    "what it relays (an audited endorsement that lifts the taint)",
    "all combined, write_report declared safe": "all combined, with SinkPolicy(safe="
    "{'write_report'}): report writes pass under tainted context",
    "all combined + reviewer (catches 90%)": "all combined; each refused call goes to a "
    "reviewer who endorses the task's own call and refuses 90% of the others",
}


def _answer(report: InjectionReport, n_atk: int, acted_none: int) -> str:
    """The answer, every figure and every claim taken from ``report``."""
    none = report.summary("none")
    yes = "Yes" if acted_none > 0 else "No"
    parts = [
        f"{yes}: with no mitigation the assistant acted on {acted_none} of {n_atk} planted "
        f"instructions at least once (attack success {_pct(none.attack_success)}, benign task "
        f"success {_pct(none.benign_success)}, report poisoning {_pct(none.poison_success)})."
    ]
    for s in report.summaries[1:]:
        parts.append(
            f"Under {s.mitigation!r}: attack success {_pct(s.attack_success)}, benign "
            f"{_pct(s.benign_success)}, report poisoning {_pct(s.poison_success)}; attack "
            f"categories still succeeding: {', '.join(s.misses) or 'none'}."
        )
    stop = [s for s in report.summaries if s.attack_success == 0 and s.poison_success == 0]
    if stop:
        best = max(stop, key=lambda s: s.benign_success)
        parts.append(
            f"Of the mitigations that stopped every attack and every report poisoning, "
            f"{best.mitigation!r} kept the most benign work ({_pct(best.benign_success)})."
        )
    else:
        parts.append("No mitigation stopped every attack and every report poisoning.")
    leaks = [s.mitigation for s in report.summaries[1:] if s.poison_success > 0]
    parts.append(
        "Report poisoning still got through under: "
        + (", ".join(repr(x) for x in leaks) if leaks else "none of the mitigations")
        + "."
    )
    return " ".join(parts)


@experiment(
    id="statebus.injection",
    seed_file=SEED_FILE,
    exercise="Hard 3",
    title="Prompt injection through shared state: attack and task success per mitigation",
    real_llm=True,
)
def injection_(ctx: LabContext) -> LabResult:
    seeds = ctx.seed_list(2 if ctx.quick else 5)
    model = ObedientModel()
    report = run_corpus(seeds=seeds, model=model, progress=ctx.progress)
    n_atk = len(ATTACKS)
    t = Table(
        f"{n_atk} attacks + {len(TASKS)} benign tasks × {len(seeds)} seeds, "
        f"assistant = {FAKE_MODEL} following instructions it sees",
        [
            "mitigation",
            "attack success",
            "utility under attack",
            "benign task success",
            "writes rejected",
            "calls refused",
            "endorsements asked",
            "report poisoning",
            "still misses",
        ],
        note="Obedience rates (explicit parameters, not a real model): "
        + ", ".join(f"{k}={v:g}" for k, v in model.params().items()),
    )
    facts: dict[str, Any] = {}
    for s in report.summaries:
        t.add(
            s.mitigation,
            _pct(s.attack_success),
            _pct(s.utility_under_attack),
            _pct(s.benign_success),
            s.blocked_writes,
            s.blocked_calls,
            s.endorsements,
            _pct(s.poison_success),
            ", ".join(s.misses) or "-",
        )
        facts[f"attack_success[{s.mitigation}]"] = s.attack_success
        facts[f"benign_success[{s.mitigation}]"] = s.benign_success
        facts[f"utility_under_attack[{s.mitigation}]"] = s.utility_under_attack
        facts[f"poison_success[{s.mitigation}]"] = s.poison_success
        for cat, rate in s.by_category.items():
            facts[f"category[{s.mitigation}][{cat}]"] = rate
    names = [s.mitigation for s in report.summaries]
    what = Table(
        "What each mitigation does (its results are in the table above)",
        ["mitigation", "mechanism"],
    )
    for name in names:
        what.add(name, _WHAT.get(name, ""))
    cats = sorted({a.category for a in ATTACKS})
    by_cat = Table("Attack success per category", ["category", "attacks", *names])
    for cat in cats:
        n = sum(a.category == cat for a in ATTACKS)
        by_cat.add(cat, n, *(_pct(s.by_category.get(cat, 0.0)) for s in report.summaries))
    acted = Table(
        "Did the assistant act on the planted instruction? (runs that executed it / seeds)",
        ["attack", "category", "task meanwhile", "none", "schema", "scoped", "labels", "combined"],
    )
    cols = ["none", "schema validation", "scoped views", "trust labels + sink policy"]
    cols.append("all combined")
    n_seeds = len(seeds)
    for a in (*ATTACKS, *MISSES):
        acted.add(
            a.id,
            a.category,
            a.task,
            *(f"{round(report.acted(a.id, m) * n_seeds)}/{n_seeds}" for m in cols),
        )
    facts["attacks"] = n_atk
    facts["acted_none"] = sum(report.acted(a.id, "none") > 0 for a in ATTACKS)
    facts["acted_combined"] = sum(report.acted(a.id, "all combined") > 0 for a in ATTACKS)
    facts["model_calls"] = report.model_calls
    answer = _answer(report, n_atk, facts["acted_none"])
    tables = [t, what, by_cat, acted]
    model_name = FAKE_MODEL
    if ctx.llm is not None:
        from .injection_real import real_injection

        fake_by_name = {s.mitigation: s for s in report.summaries}
        rt, real_facts, sentence = real_injection(ctx.llm, seeds[0], fake_by_name)
        tables.append(rt)
        facts.update(real_facts)
        answer = f"{answer} {sentence}"
        model_name = f"{FAKE_MODEL}, and {ctx.llm.label}"
    elif (client := model_from_env()) is not None:
        real = run_corpus(
            seeds=seeds[:1],
            mitigations=[MITIGATIONS[0], MITIGATIONS[4]],
            client=client,
        )
        model_name = f"{FAKE_MODEL}; and real endpoint model {client.model or '(default)'}"
        rt = Table(
            f"Real model {client.model or '(default)'} at the configured endpoint, one seed",
            ["mitigation", "attack success", "benign task success", "model calls"],
        )
        for s in real.summaries:
            rt.add(s.mitigation, _pct(s.attack_success), _pct(s.benign_success), real.model_calls)
            facts[f"real_attack_success[{s.mitigation}]"] = s.attack_success
        tables.append(rt)
    return LabResult(
        tables=tables,
        facts=facts,
        answer=answer,
        params={"seeds": seeds, "obedience": model.params(), "cases": report.params["cases"]},
        model=model_name,
    )
