"""Merges declared per key pattern, their contributions, and ``update``: expect= under a policy.

``store.declare_merge("findings/*", "append")`` makes every key matching the pattern a
merge key: agents send contributions (``session.merge("findings/q1", finding, id=...)``) and
the store combines them atomically, in one statement or script, so agents that only add
never conflict and never retry. Each contribution keeps its author and trust label
(``Entry.contributions``). Where an update needs the current value, ``store.update(key, fn)``
runs the read / ``fn`` / ``write(expect=version)`` loop under a ``RetryPolicy``.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..codec import loads
from ..errors import ConfigError, ConflictError
from ..storage.merges import LIST_OPS, OPS, Reducer

if TYPE_CHECKING:
    from ..resilience import RetryPolicy
    from ..storage.state import StateRecord
    from ._entry import Entry
    from ._store import Store

__all__ = ["Contribution", "MergeRule", "contributions", "find_rule", "make_rule", "update"]


@dataclass(frozen=True, slots=True)
class Contribution:
    """One contribution merged into a key: who sent it, with what trust, when, its id (None
    if it had none) and the value it contributed."""

    author: str
    trust: str
    at: float
    id: str | None
    value: Any


@dataclass(frozen=True, slots=True)
class MergeRule:
    """Keys matching ``pattern`` (a glob) merge by ``op``; ``reducer`` for ``reduce``."""

    pattern: str
    op: str
    reducer: Reducer | None = None


def make_rule(pattern: Any, op: Any, reducer: Any) -> MergeRule:
    """A checked ``MergeRule``.

    Raises:
        ConfigError: a bad pattern, an unknown op, or a reducer that is not callable.
    """
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"a merge pattern is a non-empty glob like 'findings/*', got {pattern!r}")
    if reducer is not None:
        if not callable(reducer):
            raise ConfigError(f"reducer for {pattern!r} must be a function, got {reducer!r}")
        if op not in (None, "reduce"):
            raise ConfigError(f"merge {pattern!r}: pass op={op!r} or a reducer, not both")
        return MergeRule(pattern, "reduce", reducer)
    if op not in OPS or op == "reduce":
        builtin = ", ".join(o for o in OPS if o != "reduce")
        raise ConfigError(
            f"unknown merge {op!r} for {pattern!r}; use one of {builtin}, or reducer=fn"
        )
    return MergeRule(pattern, str(op), None)


def find_rule(rules: list[MergeRule], key: str) -> MergeRule | None:
    """The first rule whose pattern matches ``key``."""
    for rule in rules:
        if fnmatch.fnmatchcase(key, rule.pattern):
            return rule
    return None


def contributions(rec: StateRecord, value: Any) -> tuple[Contribution, ...]:
    """The contributions of a merge key's record, oldest first (none for a plain key).

    ``value`` is the record's value, decoded: a list merge's items are its last entries.
    """
    if rec.merge_op is None or rec.merge_log is None:
        return ()
    log = json.loads(rec.merge_log)
    if rec.merge_op in LIST_OPS:
        values = list(value[-len(log) :]) if log else []
    else:
        values = [loads(json.dumps(e[4])) for e in log]
    return tuple(
        Contribution(str(e[0]), str(e[1]), float(e[2]), e[3], v)
        for e, v in zip(log, values, strict=True)
    )


def update(
    store: Store,
    key: str,
    fn: Callable[[Any], Any],
    *,
    read: Callable[[str], Entry | None],
    write: Callable[[str, Any, int], Entry],
    policy: RetryPolicy | None,
) -> Entry:
    """Read ``key``, compute ``fn(value)`` (``None`` when absent) and write it with
    ``expect=version``; on ``ConflictError`` re-read and recompute, under ``policy``.

    The default policy makes 10 attempts with full-jitter waits of 5 ms doubling to 200 ms
    and retries only ``ConflictError``; when the attempts run out, the last
    ``ConflictError`` is raised unchanged.
    """
    from ..resilience import Backoff, RetryPolicy, retry_call

    if policy is None:
        policy = RetryPolicy(
            max_attempts=10, backoff=Backoff(0.005, 0.2), retry_on=(ConflictError,)
        )

    def attempt() -> Entry:
        e = read(key)
        return write(key, fn(e.value if e is not None else None), e.version if e else 0)

    return retry_call(attempt, policy=policy, clock=store.clock)
