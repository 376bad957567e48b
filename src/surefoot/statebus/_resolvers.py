"""Resolvers: pick one value for a field when agents propose different ones.

Three rules, each a function of the proposals (the seed's hint):

- :func:`priority` takes the value of the highest-ranked agent that proposed one. No calls.
- :func:`vote` takes the most common value; a tie goes to the higher-ranked agent (or the
  field is left undecided with ``tie="abstain"``). No calls.
- :func:`judge` asks a model to pick among the distinct proposals, shown in a shuffled order
  (judges favour positions, so the order must not carry information). One model call when
  the proposals disagree, none when they agree.

Each returns a :class:`Resolution` that says which rule decided, how many model calls it
made and whether it abstained. :func:`predicted_accuracy` gives the closed-form accuracy and
call cost of each rule for independent agents of given accuracies, and :func:`simulate`
measures the same numbers on seeded trials, so the two can be compared side by side.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any, Protocol

from ..errors import ConfigError

__all__ = [
    "ChatClient",
    "Proposal",
    "Resolution",
    "ResolverStats",
    "judge",
    "judge_responder",
    "predicted_accuracy",
    "priority",
    "simulate",
    "vote",
]

RULES = ("priority", "vote", "judge")


class ChatClient(Protocol):
    """Anything with a chat-completions ``create`` (``FakeLLM``, an OpenAI-style client)."""

    def create(self, *, model: str, messages: Sequence[dict[str, Any]]) -> Any: ...


@dataclass(frozen=True, slots=True)
class Proposal:
    """One agent's proposed value for a field."""

    agent: str
    value: Any


@dataclass(frozen=True, slots=True)
class Resolution:
    """The outcome of a resolver.

    Attributes:
        value: the chosen value (None when it abstained).
        rule: ``priority``, ``vote`` or ``judge``.
        calls: model calls the resolver made.
        abstained: no value was chosen; escalate (to a person, or another rule).
        chosen_from: the agents whose proposal was chosen.
    """

    value: Any
    rule: str
    calls: int = 0
    abstained: bool = False
    chosen_from: tuple[str, ...] = ()


def _check(proposals: Sequence[Proposal]) -> None:
    if not proposals:
        raise ConfigError("a resolver needs at least one proposal, got none")
    agents = [p.agent for p in proposals]
    if len(set(agents)) != len(agents):
        raise ConfigError(f"each agent proposes at most once, got agents {agents!r}")


def _rank(order: Sequence[str], agent: str) -> int:
    try:
        return list(order).index(agent)
    except ValueError:
        raise ConfigError(
            f"agent {agent!r} proposed a value but is not in the priority order {list(order)!r}; "
            "add it to the order"
        ) from None


def _distinct(proposals: Sequence[Proposal]) -> list[Any]:
    out: list[Any] = []
    for p in proposals:
        if p.value not in out:
            out.append(p.value)
    return out


def _canon(value: Any) -> str:
    """A key equal for equal values (dicts in any key order), for counting votes."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _from(proposals: Sequence[Proposal], value: Any) -> tuple[str, ...]:
    return tuple(p.agent for p in proposals if p.value == value)


def priority(proposals: Sequence[Proposal], order: Sequence[str]) -> Resolution:
    """Take the proposal of the highest-ranked agent in ``order`` (first = highest).

    Raises:
        ConfigError: no proposals, an agent proposing twice, or an agent not in ``order``.
    """
    _check(proposals)
    best = min(proposals, key=lambda p: _rank(order, p.agent))
    return Resolution(best.value, "priority", chosen_from=_from(proposals, best.value))


def vote(
    proposals: Sequence[Proposal], order: Sequence[str], *, tie: str = "priority"
) -> Resolution:
    """Take the most common value; break a tie by ``order`` or abstain.

    Args:
        proposals: one per agent.
        order: agents from highest to lowest rank, used to break ties.
        tie: ``"priority"`` (the tied value of the highest-ranked agent wins) or ``"abstain"``.

    Raises:
        ConfigError: bad proposals or an unknown ``tie``.
    """
    _check(proposals)
    if tie not in ("priority", "abstain"):
        raise ConfigError(f"tie must be 'priority' or 'abstain', got {tie!r}")
    counts = Counter(_canon(p.value) for p in proposals)
    top = max(counts.values())
    tied = [p for p in proposals if counts[_canon(p.value)] == top]
    if len({_canon(p.value) for p in tied}) > 1:
        if tie == "abstain":
            return Resolution(None, "vote", abstained=True)
        tied.sort(key=lambda p: _rank(order, p.agent))
    return Resolution(tied[0].value, "vote", chosen_from=_from(proposals, tied[0].value))


_ANSWER = re.compile(r"\d+")


def judge(
    proposals: Sequence[Proposal],
    llm: ChatClient,
    *,
    field: str,
    rng: random.Random,
    model: str = "judge",
    context: str = "",
) -> Resolution:
    """Ask a model which distinct proposal is right; shown in a shuffled order.

    When every agent proposed the same value the model is not called. Otherwise one call
    lists the candidates numbered from 1 and asks for the number of the correct one; an
    answer without a valid number makes the resolver abstain.

    Args:
        proposals: one per agent.
        llm: a chat client (``FakeLLM`` or a real one).
        field: the field's name, shown to the judge.
        rng: shuffles the candidates, so position carries no information.
        model: the model name passed to ``llm.create``.
        context: extra text for the judge (the question the field answers).

    Raises:
        ConfigError: bad proposals.
    """
    _check(proposals)
    candidates = _distinct(proposals)
    if len(candidates) == 1:
        return Resolution(candidates[0], "judge", chosen_from=_from(proposals, candidates[0]))
    rng.shuffle(candidates)
    lines = "\n".join(f"{i}. {c!r}" for i, c in enumerate(candidates, 1))
    prompt = (
        f"Field: {field}\n{context}\nAgents proposed these values:\n{lines}\n"
        "Reply with only the number of the correct value."
    )
    resp = llm.create(model=model, messages=[{"role": "user", "content": prompt}])
    text = str(resp.choices[0].message.content or "")
    m = _ANSWER.search(text)
    if m is None or not 1 <= int(m.group()) <= len(candidates):
        return Resolution(None, "judge", calls=1, abstained=True)
    value = candidates[int(m.group()) - 1]
    return Resolution(value, "judge", calls=1, chosen_from=_from(proposals, value))


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
