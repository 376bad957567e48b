"""Lab experiments for conflict resolvers and prompt injection through shared state (seed 000,
Hard 2 and Hard 3), registered on import. Built only on ``surefoot.statebus``'s public API."""

from __future__ import annotations

from typing import Any

from ..llm import FakeLLM
from ..statebus import injection, judge_responder, predicted_accuracy, simulate
from ._registry import FAKE_MODEL, LabContext, LabResult, Table, experiment

SEED_FILE = "000_1a539fd3941fa9e6.txt"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


@experiment(
    id="statebus.resolvers",
    seed_file=SEED_FILE,
    exercise="Hard 2",
    title="Priority, vote and judge: accuracy against ground truth and calls, formula vs run",
)
def resolvers(ctx: LabContext) -> LabResult:
    seed = ctx.seed_list(1)[0]
    trials = 600 if ctx.quick else 3000
    judges = (0.75, 0.9)
    teams: list[tuple[float, ...]] = [
        (0.6, 0.6),
        (0.75, 0.75),
        (0.9, 0.9),
        (0.9, 0.6),
        (0.6, 0.6, 0.6),
        (0.75, 0.75, 0.75),
        (0.9, 0.6, 0.6),
    ]
    t = Table(
        f"One field, agents propose independently; {trials} seeded fields per row",
        [
            "agent accuracies",
            "rule",
            "judge accuracy",
            "accuracy (formula)",
            "accuracy (measured)",
            "resolver calls/field (formula)",
            "resolver calls/field (measured)",
            "total calls/field",
        ],
        note=(
            "A wrong agent proposes the field's one plausible wrong value, so wrong agents "
            "agree (the hard case for voting). Priority follows the listed order. The judge "
            f"is the {FAKE_MODEL} answering right with the assumed accuracy; its calls are "
            "counted inside the fake. Total calls = one proposal call per agent + resolver calls."
        ),
    )
    facts: dict[str, Any] = {}
    worst = 0.0
    done, total = 0, len(teams) * len(judges)
    for team in teams:
        name = "/".join(f"{a:g}" for a in team)
        for j, q in enumerate(judges):
            llm = FakeLLM(seed=seed, responder=judge_responder(lambda f: "v" + f[1:], q, seed + 7))
            stats = simulate(team, trials=trials, seed=seed + 1000 * j, llm=llm)
            if stats["judge"].resolver_calls != llm.calls:
                raise AssertionError("judge calls must equal the calls the fake received")
            rules = ("priority", "vote", "judge") if j == 0 else ("judge",)
            for rule in rules:
                s = stats[rule]
                acc, calls = predicted_accuracy(rule, team, q)
                worst = max(worst, abs(acc - s.accuracy))
                t.add(
                    name,
                    rule,
                    f"{q:g}" if rule == "judge" else "-",
                    round(acc, 3),
                    round(s.accuracy, 3),
                    round(calls, 3),
                    round(s.calls_per_field, 3),
                    round(len(team) + s.calls_per_field, 3),
                )
                tag = f"{rule}@{name}" + (f"@q{q:g}" if rule == "judge" else "")
                facts[f"acc_formula[{tag}]"] = acc
                facts[f"acc_measured[{tag}]"] = s.accuracy
                facts[f"calls_measured[{tag}]"] = s.calls_per_field
            done += 1
            ctx.progress(done, total)
    facts["max_abs_diff"] = worst
    facts["trials"] = trials
    v2 = facts["acc_measured[vote@0.75/0.75]"]
    p2 = facts["acc_measured[priority@0.75/0.75]"]
    v3 = facts["acc_measured[vote@0.75/0.75/0.75]"]
    j3 = facts["acc_measured[judge@0.75/0.75/0.75@q0.9]"]
    c3 = facts["calls_measured[judge@0.75/0.75/0.75@q0.9]"]
    pr = facts["acc_measured[priority@0.9/0.6/0.6]"]
    p96 = facts["acc_measured[priority@0.9/0.6]"]
    j96 = facts["acc_measured[judge@0.9/0.6@q0.75]"]
    vr = facts["acc_measured[vote@0.9/0.6/0.6]"]
    answer = (
        f"Measured on {trials} seeded fields per row, every rule lands within "
        f"{worst:.3f} of its closed-form accuracy. With two agents a vote is a tie whenever "
        f"they disagree, so it falls back to priority and adds nothing ({_pct(v2)} vs "
        f"{_pct(p2)} at 0.75 each). With three agents of 0.75, voting reaches {_pct(v3)} at no "
        f"extra calls; a judge of accuracy 0.9 reaches {_pct(j3)} for {c3:.2f} extra calls per "
        "field (it is called only when proposals differ). When one agent is much better "
        f"(0.9 vs 0.6, 0.6), priority to it ({_pct(pr)}) "
        f"{'beats' if pr > vr else 'does not beat'} the vote ({_pct(vr)})"
        + (": the majority of weaker agents outvotes the right one" if pr > vr else "")
        + ". A judge is only as good as its "
        "accuracy on the split cases, which must be measured, never assumed: a 0.75 judge "
        f"over agents of 0.9 and 0.6 scores {_pct(j96)}, "
        f"{'below' if j96 < p96 else 'not below'} priority to the better agent "
        f"({_pct(p96)})."
    )
    return LabResult(
        tables=[t],
        facts=facts,
        answer=answer,
        params={"trials": trials, "seed": seed, "judge_accuracies": list(judges)},
    )


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
)
def injection_(ctx: LabContext) -> LabResult:
    seeds = ctx.seed_list(2 if ctx.quick else 5)
    model = injection.ObedientModel()
    report = injection.run_corpus(seeds=seeds, model=model, progress=ctx.progress)
    n_atk = len(injection.ATTACKS)
    t = Table(
        f"{n_atk} attacks + {len(injection.TASKS)} benign tasks × {len(seeds)} seeds, "
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
    cats = sorted({a.category for a in injection.ATTACKS})
    by_cat = Table("Attack success per category", ["category", "attacks", *names])
    for cat in cats:
        n = sum(a.category == cat for a in injection.ATTACKS)
        by_cat.add(cat, n, *(_pct(s.by_category.get(cat, 0.0)) for s in report.summaries))
    acted = Table(
        "Did the assistant act on the planted instruction? (runs that executed it / seeds)",
        ["attack", "category", "task meanwhile", "none", "schema", "scoped", "labels", "combined"],
    )
    cols = ["none", "schema validation", "scoped views", "trust labels + sink policy"]
    cols.append("all combined")
    n_seeds = len(seeds)
    for a in (*injection.ATTACKS, *injection.MISSES):
        acted.add(
            a.id,
            a.category,
            a.task,
            *(f"{round(report.acted(a.id, m) * n_seeds)}/{n_seeds}" for m in cols),
        )
    facts["attacks"] = n_atk
    facts["acted_none"] = sum(report.acted(a.id, "none") > 0 for a in injection.ATTACKS)
    facts["acted_combined"] = sum(report.acted(a.id, "all combined") > 0 for a in injection.ATTACKS)
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
    client = injection.model_from_env()
    tables = [t, what, by_cat, acted]
    model_name = FAKE_MODEL
    if client is not None:
        real = injection.run_corpus(
            seeds=seeds[:1],
            mitigations=[injection.MITIGATIONS[0], injection.MITIGATIONS[4]],
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
