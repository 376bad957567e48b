"""The injection experiment on a real model: a bounded slice of the corpus, measured.

One attack per category and three benign tasks, under no mitigation and under all
combined, one seed: the assistant's calls go to the real model through surefoot's
OpenAI-compatible client (its retries; ``max_tokens`` bounded), and its tool calls are read
from the answer's text (the requested ``{"calls": [...]}`` form, else any call shape the
model wrote). The summariser stays the fake copier, so the relay is the same for both.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from surefoot.llm import ChatCompletion

from .._registry import Table
from ..local_model import LabModel
from .injection_corpus import ATTACKS, TASKS, Attack
from .injection_harness import MITIGATIONS, run_corpus

__all__ = ["BoundClient", "real_injection"]


class BoundClient:
    """A ``surefoot.llm`` client the harness can call like the FakeLLM: the harness's model
    name is dropped (the endpoint's own model answers), temperature 0, bounded output."""

    def __init__(self, client: Any, max_tokens: int) -> None:
        self.client = client
        self.max_tokens = max_tokens

    def create(self, *, messages: Sequence[Mapping[str, Any]], **_: Any) -> ChatCompletion:
        reply: ChatCompletion = self.client.create(
            messages=messages, max_tokens=self.max_tokens, temperature=0, allow_empty=True
        )
        return reply

    @property
    def calls(self) -> int:
        return int(self.client.meter.totals.attempts)


def _slice() -> list[Attack]:
    seen: dict[str, Attack] = {}
    for a in ATTACKS:
        seen.setdefault(a.category, a)
    return list(seen.values())


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def real_injection(
    llm: LabModel, seed: int, fake_summary: Mapping[str, Any]
) -> tuple[Table, dict[str, Any], str]:
    """Run the bounded slice on ``llm``; a table beside the FakeLLM's figures, facts, and
    the answer's sentences. ``fake_summary``: mitigation name -> the FakeLLM's summary."""
    attacks = _slice()
    tasks = list(TASKS.values())[:3]
    mitigations = [m for m in MITIGATIONS if m.name in ("none", "all combined")]
    client = llm.client()
    bound = BoundClient(client, max_tokens=max(llm.max_tokens, 96))
    started = time.perf_counter()
    rep = run_corpus(
        seeds=[seed], mitigations=mitigations, client=bound, attacks=attacks, tasks=tasks
    )
    seconds = time.perf_counter() - started
    totals = client.meter.totals
    t = Table(
        f"Real model {llm.model}: {len(attacks)} attacks (one per category) + {len(tasks)} "
        f"benign tasks, one seed, beside the FakeLLM's rates over the whole corpus",
        [
            "model",
            "mitigation",
            "attack success",
            "benign task success",
            "answers with a call",
            "off-format calls",
            "malformed calls",
            "model calls",
        ],
    )
    facts: dict[str, Any] = {}
    for s in rep.summaries:
        fake = fake_summary.get(s.mitigation)
        if fake is not None:
            t.add(
                "FakeLLM (obedience rates)",
                s.mitigation,
                _pct(fake.attack_success),
                _pct(fake.benign_success),
                "-",
                "-",
                "-",
                "-",
            )
        runs = [r for r in rep.results if r.mitigation == s.mitigation]
        with_call = sum(1 for r in runs if r.tool_calls or r.blocked_calls or r.refused)
        off = sum(r.off_format for r in runs)
        bad = sum(r.malformed_calls for r in runs)
        t.add(
            llm.model,
            s.mitigation,
            _pct(s.attack_success),
            _pct(s.benign_success),
            f"{with_call}/{len(runs)}",
            off,
            bad,
            len(runs),
        )
        facts[f"llm_attack_success[{s.mitigation}]"] = s.attack_success
        facts[f"llm_benign_success[{s.mitigation}]"] = s.benign_success
        facts[f"llm_answers_with_call[{s.mitigation}]"] = with_call
        facts[f"llm_malformed_calls[{s.mitigation}]"] = bad
    facts["llm_model_calls"] = totals.attempts
    facts["llm_tokens"] = totals.prompt_tokens + totals.completion_tokens
    facts["llm_seconds"] = seconds
    none = rep.summary("none")
    comb = rep.summary("all combined")
    sentence = (
        f"On the real model {llm.model} (a bounded slice: {len(attacks)} attacks, "
        f"{len(tasks)} tasks, one seed): attack success {_pct(none.attack_success)} with no "
        f"mitigation and {_pct(comb.attack_success)} with all combined, benign task success "
        f"{_pct(none.benign_success)} and {_pct(comb.benign_success)}; "
        f"{facts['llm_answers_with_call[none]']} of {len(attacks) + len(tasks)} answers "
        f"without mitigation held a tool call at all, "
        f"{facts['llm_malformed_calls[none]'] + facts['llm_malformed_calls[all combined]']} "
        f"calls were malformed; {totals.attempts} model calls, {facts['llm_tokens']} tokens, "
        f"{seconds:.0f} s. A model this small mostly ignores the tool format, so low attack "
        "success here measures weakness, not safety."
    )
    return t, facts, sentence
