"""Resolvers: pick one value for a field when agents propose different ones.

Three rules, each a function of the proposals:

- :func:`priority` takes the value of the highest-ranked agent that proposed one. No calls.
- :func:`vote` takes the most common value; a tie goes to the higher-ranked agent (or the
  field is left undecided with ``tie="abstain"``). No calls.
- :func:`judge` asks a model to pick among the distinct proposals, shown in a shuffled order
  (judges favour positions, so the order must not carry information). One model call when
  the proposals disagree, none when they agree.

Each returns a :class:`Resolution` that says which rule decided, how many model calls it
made and whether it abstained.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConfigError

__all__ = [
    "ChatClient",
    "Proposal",
    "Resolution",
    "judge",
    "priority",
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
