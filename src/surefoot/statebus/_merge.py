"""Merges declared per key pattern, and ``update``: expect= under a policy.

``store.declare_merge("findings/*", "append")`` makes every key matching the pattern a
merge key: agents send contributions (``session.merge("findings/q1", finding, id=...)``) and
the store combines them atomically, in one statement or script, so agents that only add
never conflict and never retry. Each contribution keeps its author and trust label
(``Entry.contributions``). Where an update needs the current value, ``store.update(key, fn)``
runs the read / ``fn`` / ``write(expect=version)`` loop under a ``RetryPolicy``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..clock import Clock
from ..errors import ConfigError, ConflictError
from ..resilience import Backoff, RetryPolicy, retry_call
from ..storage.merges import OPS, Reducer
from ._entry import Entry

__all__ = ["MergeRule", "find_rule", "make_rule", "update"]


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


def update(
    key: str,
    fn: Callable[[Any], Any],
    *,
    read: Callable[[str], Entry | None],
    write: Callable[[str, Any, int], Entry],
    policy: RetryPolicy | None,
    clock: Clock,
) -> Entry:
    """Read ``key``, compute ``fn(value)`` (``None`` when absent) and write it with
    ``expect=version``; on ``ConflictError`` re-read and recompute, under ``policy``, waiting
    on ``clock`` (the store's).

    The default policy makes 10 attempts with full-jitter waits of 5 ms doubling to 200 ms
    and retries only ``ConflictError``; when the attempts run out, the last
    ``ConflictError`` is raised unchanged.
    """
    if policy is None:
        policy = RetryPolicy(
            max_attempts=10, backoff=Backoff(0.005, 0.2), retry_on=(ConflictError,)
        )

    def attempt() -> Entry:
        e = read(key)
        return write(key, fn(e.value if e is not None else None), e.version if e else 0)

    return retry_call(attempt, policy=policy, clock=clock)
