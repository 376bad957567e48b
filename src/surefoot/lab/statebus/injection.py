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


_WHAT = {
    "none": "nothing: the assistant reads everything as plain text",
    "schema validation": "rejects instructions in typed control fields (enums, patterns, "
    "no extra fields); free-text fields pass",
    "scoped views": "the assistant reads only its task's inputs; planted text inside those "
    "inputs (the page it must summarise, the mail it must forward, the relayed summary) "
    "still reaches it",
    "spotlighting only": "untrusted entries shown as delimited, labelled data with a note "
    "not to follow them; nothing enforced, so it only lowers how often the model obeys",
    "trust labels + sink policy": "refuses any consequential call chosen under untrusted "
    "context; with a broad view that is most of the legitimate work too",
    "all combined": "no planted consequential call runs; tasks that need an untrusted value "
    "at a consequential tool are refused until endorsed",
    "all combined, labels not propagated": "a trusted summariser relays planted text and "
    "launders its label: relayed attacks succeed",
    "all combined + reviewer (catches 90%)": "refused calls go to a reviewer: utility comes "
    "back, and the attacks the reviewer misses come back with it",
}


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
    what = Table("What each mitigation does, and what it leaves", ["mitigation", "mechanism"])
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
    none, comb = report.summary("none"), report.summary("all combined")
    lab = report.summary("trust labels + sink policy")
    spot = report.summary("spotlighting only")
    nop = report.summary("all combined, labels not propagated")
    yes = "Yes" if facts["acted_none"] > 0 else "No"
    answer = (
        f"{yes}: with no mitigation the assistant acted on {facts['acted_none']} of {n_atk} "
        f"planted instructions at least once; attack success {_pct(none.attack_success)}, "
        f"benign task success {_pct(none.benign_success)}. Schema validation stops "
        "instructions in typed control fields and label-spoofing extra fields, but not free "
        "text. Scoped views stop what the task does not read, not what it must read. "
        f"Spotlighting alone (delimited data, nothing enforced) leaves {_pct(spot.attack_success)}"
        " attack success: a textual defence, not a control. Trust "
        f"labels + the sink policy bring attack success to {_pct(lab.attack_success)}, but "
        "with a broad view they refuse most legitimate work too (benign "
        f"{_pct(lab.benign_success)}). "
        f"All combined: attack success {_pct(comb.attack_success)}, benign "
        f"{_pct(comb.benign_success)}; the loss is the tasks that need an untrusted value at a "
        "consequential tool, which need an endorsement. Without label propagation a trusted "
        f"relay launders planted text ({_pct(nop.attack_success)} success, categories: "
        f"{', '.join(nop.misses) or 'none'}). Still missed everywhere: attacker text that "
        "reaches a non-consequential sink (a report people read) through an allowed data "
        f"flow ({_pct(comb.poison_success)} report poisoning combined)."
    )
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
