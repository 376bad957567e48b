"""Seed 000, Hard 2: conflict resolvers measured against their closed form.

:func:`predicted_accuracy` gives the closed-form accuracy and call cost of each rule of
``surefoot.statebus`` (priority, vote, judge) for independent agents of given accuracies,
and :func:`simulate` measures the same numbers on seeded trials, so the two can be compared
side by side; :func:`judge_responder` is the FakeLLM judge of the simulation. The
``statebus.resolvers`` experiment registers on import.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

from surefoot.errors import ConfigError
from surefoot.llm import FakeLLM
from surefoot.statebus import ChatClient, Proposal, Resolution, judge, priority, vote

from .._registry import FAKE_MODEL, LabContext, LabResult, Table, experiment
from ._common import SEED_FILE

__all__ = [
    "RULES",
    "ResolverStats",
    "judge_responder",
    "predicted_accuracy",
    "resolvers",
    "simulate",
]

RULES = ("priority", "vote", "judge")


def judge_responder(
    truth: Callable[[str], Any], accuracy: float, seed: int
) -> Callable[[list[dict[str, Any]]], str]:
    """A ``FakeLLM`` responder that judges with an assumed accuracy.

    It reads the field and the numbered candidates from the prompt, looks the right value up
    with ``truth(field)`` (the simulation's ground truth, which a real judge would not
    have), and answers its number with probability ``accuracy``, otherwise the number of a
    wrong candidate. If the right value is not among the candidates it answers at random.
    """
    if not 0.0 <= accuracy <= 1.0:
        raise ConfigError(f"accuracy must be in [0, 1], got {accuracy!r}")
    rng = random.Random(seed)

    def respond(messages: list[dict[str, Any]]) -> str:
        text = str(messages[-1]["content"])
        fld = text.split("\n", 1)[0].removeprefix("Field: ")
        cands = re.findall(r"^(\d+)\. (.*)$", text, flags=re.M)
        right = repr(truth(fld))
        good = [n for n, c in cands if c == right]
        bad = [n for n, c in cands if c != right]
        if good and (not bad or rng.random() < accuracy):
            return str(good[0])
        return str(rng.choice(bad))

    return respond


def _prob(accs: Sequence[float], right: Sequence[bool]) -> float:
    out = 1.0
    for a, r in zip(accs, right, strict=True):
        out *= a if r else 1.0 - a
    return out


def predicted_accuracy(
    rule: str, accuracies: Sequence[float], judge_accuracy: float = 1.0
) -> tuple[float, float]:
    """Closed-form accuracy and expected resolver calls per field.

    The model: agent ``i`` (ranked in the given order) proposes the true value with
    probability ``accuracies[i]``, independently; a wrong agent proposes *the* wrong value
    (one shared plausible mistake: the hard case for voting, since wrong agents agree).

    - priority: ``p1``.
    - vote (ties to the higher rank): the sum, over every right/wrong pattern, of its
      probability when more agents are right than wrong, or when tied and the top-ranked
      agent is right. With two agents this equals ``p1``: a 1-1 split is a tie.
    - judge: ``P(all right) + P(split) * q`` where ``q`` is the judge's accuracy, and one
      call per split field: ``P(split) = 1 - P(all right) - P(all wrong)``.

    Returns:
        ``(accuracy, resolver_calls_per_field)``.
    """
    if rule not in RULES:
        raise ConfigError(f"rule must be one of {RULES}, got {rule!r}")
    if not accuracies or not all(0.0 <= a <= 1.0 for a in accuracies):
        raise ConfigError(f"accuracies must be probabilities, got {list(accuracies)!r}")
    if len(accuracies) > 16:
        raise ConfigError(
            f"the closed form enumerates 2**n outcomes; n={len(accuracies)} agents is too many "
            "(at most 16). Use simulate() for larger teams."
        )
    if rule == "priority":
        return accuracies[0], 0.0
    all_right = _prob(accuracies, [True] * len(accuracies))
    all_wrong = _prob(accuracies, [False] * len(accuracies))
    if rule == "judge":
        split = 1.0 - all_right - all_wrong
        return all_right + split * judge_accuracy, split
    acc = 0.0
    for pattern in product((True, False), repeat=len(accuracies)):
        n_right = sum(pattern)
        n_wrong = len(pattern) - n_right
        if n_right > n_wrong or (n_right == n_wrong and pattern[0]):
            acc += _prob(accuracies, pattern)
    return acc, 0.0


@dataclass(slots=True)
class ResolverStats:
    """Measured outcome of one rule over many fields."""

    rule: str
    trials: int = 0
    correct: int = 0
    abstained: int = 0
    resolver_calls: int = 0
    proposal_calls: int = 0
    agreements: int = 0

    @property
    def accuracy(self) -> float:
        return self.correct / self.trials if self.trials else 0.0

    @property
    def calls_per_field(self) -> float:
        return self.resolver_calls / self.trials if self.trials else 0.0


def simulate(
    accuracies: Sequence[float],
    *,
    trials: int,
    seed: int,
    llm: ChatClient | None = None,
    judge_accuracy: float = 1.0,
) -> dict[str, ResolverStats]:
    """Measure every rule on ``trials`` seeded fields with a known right value.

    Each agent proposes the right value with its accuracy, otherwise the field's one wrong
    value (the model of :func:`predicted_accuracy`). All three rules resolve the same
    proposals. The judge uses ``llm`` when given (for example a ``FakeLLM`` with
    :func:`judge_responder`, whose calls are counted inside the fake); otherwise an
    in-process judge with ``judge_accuracy`` whose every split counts as the one call a
    model judge would make. Proposal calls count one
    model call per agent per field, the cost every rule shares.

    Raises:
        ConfigError: ``trials < 1`` or accuracies outside [0, 1].
    """
    if trials < 1:
        raise ConfigError(f"trials must be >= 1, got {trials}")
    predicted_accuracy("vote", accuracies)  # validates
    agents = [f"agent{i}" for i in range(len(accuracies))]
    rng = random.Random(seed)
    judge_rng = random.Random(seed + 1)
    stats = {r: ResolverStats(r) for r in RULES}
    for t in range(trials):
        right, wrong = f"v{t}", f"w{t}"
        props = [
            Proposal(a, right if rng.random() < acc else wrong)
            for a, acc in zip(agents, accuracies, strict=True)
        ]
        agree = len({p.value for p in props}) == 1
        results = [priority(props, agents), vote(props, agents)]
        if llm is not None:
            results.append(judge(props, llm, field=f"f{t}", rng=judge_rng))
        elif agree:
            results.append(Resolution(props[0].value, "judge"))
        else:
            # stands for the one call a model judge would make
            pick = right if judge_rng.random() < judge_accuracy else wrong
            results.append(Resolution(pick, "judge", calls=1))
        for res in results:
            s = stats[res.rule]
            s.trials += 1
            s.correct += res.value == right
            s.abstained += res.abstained
            s.resolver_calls += res.calls
            s.proposal_calls += len(props)
            s.agreements += agree
    return stats


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
