"""The change log's rules, shared by every ``StateStore`` backend.

Every write, merge, delete and expiry of a namespace appends one ``StateChange`` to its log,
keyed by the revision it took, in the same transaction (statement, script) as the change
itself. The log answers ``history(key)``, ``read_at(key, revision)`` and watches
(``changes(after)``); compaction trims it by a policy: keep the last N changes of each key,
drop changes older than an age; each key's latest change always stays.

A backend whose reads cost a round trip may also offer ``watch_read(after, *, prefix, limit,
now) -> WatchRead``: what a watch needs per look (the changes, how far the log was read, and
whether expiries are due) in one round trip, so a watch's wake-up costs one read instead of
the four of ``expire`` + ``revision`` + ``changes`` (with its compaction mark).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from ..errors import ConfigError
from .state import StateChange, TxnOp

__all__ = [
    "Compaction",
    "WatchRead",
    "change_kind",
    "check_policy",
    "compaction_victims",
    "txn_plan",
    "watch_params",
]


class WatchRead(NamedTuple):
    """One look of a watch (``StateStore.watch_read``), read from one snapshot.

    Attributes:
        changes: the changes of keys under the prefix after the revision asked, oldest
            first, at most ``limit``.
        scanned: the revision the log was read up to: every change under the prefix up to
            it is in ``changes``. Fewer than ``limit`` changes: the namespace's revision.
        due: some key's TTL had run out at ``now``; sweep (``expire``) and read again, so
            the expiry reaches the watcher in revision order.

    Raises (from ``watch_read``):
        CompactedError: a change after the revision asked was removed by compaction.
    """

    changes: list[StateChange]
    scanned: int
    due: bool


def watch_params(namespace: str, after: int, now: float, prefix: str, limit: int) -> dict[str, Any]:
    """The named parameters of a SQL backend's one-statement ``watch_read``."""
    return {
        "ns": namespace,
        "after": after,
        "now": now,
        "n": len(prefix),
        "prefix": prefix,
        "limit": limit,
    }


def change_kind(merge_op: str | None) -> str:
    """``put`` for a plain write, ``merge`` for a merge key's change."""
    return "put" if merge_op is None else "merge"


def check_policy(keep: int | None, before: float | None) -> None:
    """Refuse a compaction policy that keeps nothing or is not a number.

    Raises:
        ConfigError: naming the value and the fix.
    """
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise ConfigError(
            f"compaction keep must be a whole number >= 1 (changes kept per key), got {keep!r}"
        )
    if before is not None and (isinstance(before, bool) or not isinstance(before, int | float)):
        raise ConfigError(f"compaction before must be a time in seconds, got {before!r}")


class Compaction(NamedTuple):
    """What a compaction removes: ``gone``, the revisions; ``marks``, per key touched, the
    highest revision removed (the key's new compacted mark)."""

    gone: set[int]
    marks: dict[str, int]


def compaction_victims(
    rows: list[tuple[str, int, float]], keep: int | None, before: float | None
) -> Compaction:
    """The revisions compaction removes from ``rows`` (key, revision, at), with each key's
    new compacted mark.

    Per key only a prefix by revision goes: the walk stops at the first change the policy
    keeps, so everything removed is older than everything kept even when writers' clocks
    disagree (``at`` is the writer's time, not monotonic in revision). ``read_at`` relies on
    it: the latest kept change at or before a revision is the answer.
    """
    check_policy(keep, before)
    by_key: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for key, revision, at in rows:
        by_key[key].append((revision, at))
    gone: set[int] = set()
    marks: dict[str, int] = {}
    for key, changes in by_key.items():
        changes.sort()
        for i, (revision, at) in enumerate(changes[:-1]):  # the latest always stays
            if not (
                (keep is not None and len(changes) - i > keep)
                or (before is not None and at < before)
            ):
                break
            gone.add(revision)
            marks[key] = revision  # ascending, so the last one removed is the highest
    return Compaction(gone, marks)


def txn_plan(ops: list[TxnOp]) -> list[TxnOp]:
    """Check a transaction branch's operations; each key at most once.

    Raises:
        ConfigError: an unknown operation, a malformed one, or a key named twice.
    """
    seen: set[str] = set()
    for op in ops:
        if not isinstance(op, tuple) or not op or op[0] not in ("put", "delete"):
            raise ConfigError(
                f"a transaction operation is ('put', key, value, ttl) or ('delete', key), "
                f"got {op!r}"
            )
        key: Any = op[1]
        if key in seen:
            raise ConfigError(
                f"key {key!r} appears twice in one transaction branch; combine the operations"
            )
        seen.add(key)
    return ops
