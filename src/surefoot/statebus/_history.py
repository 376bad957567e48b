"""History, watches and transactions of a ``Store``: the change log as users see it.

Every write, merge, delete and expiry takes the namespace's next revision and is logged under
it in the same transaction. ``Store.history(key)`` lists a key's kept versions with their
authors and trust labels, ``Store.read_at(key, revision)`` reads one, and ``Store.watch``
delivers every change after a revision, in order: resuming from the last revision delivered
misses nothing and repeats nothing, because the log, not a live connection, is the source.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..clock import Clock
from ..codec import loads
from ..errors import ConfigError, ConflictError
from ..guard import Label, Labeled
from ..storage.state import StateChange, StateStore, txn_conflict

__all__ = ["HIDDEN", "Change", "TxnResult", "Watch", "change"]

HIDDEN = ("_lease/", "_endorsement/")
"""The runtime's own keys (leases, endorsement records): a watch skips them unless its
prefix names them."""


@dataclass(frozen=True, slots=True)
class Change:
    """One logged change of a key.

    Attributes:
        revision: the namespace's revision it took. key: the key.
        kind: ``put`` (a write), ``merge``, ``delete`` or ``expire`` (its TTL ran out).
        value: the key's decoded value after it (None for ``delete`` and ``expire``).
        version: the key's version after it (a tombstone is a version too).
        author / trust: who made it and the trust label it was stored with.
        at: the store clock's time. expires_at: when the value expires (None: never).
        label: the provenance stored with the value (as ``Entry.label``), or None.
    """

    revision: int
    key: str
    kind: str
    value: Any
    version: int
    author: str
    trust: str
    at: float
    expires_at: float | None = None
    label: Label | None = None


def change(ch: StateChange) -> Change:
    """A backend's ``StateChange`` with its value decoded (provenance envelope dropped)."""
    value = loads(ch.value) if ch.value is not None else None
    label = None
    if isinstance(value, Labeled):
        value, label = value.value, value.label
    return Change(
        ch.revision,
        ch.key,
        ch.kind,
        value,
        ch.version,
        ch.author,
        ch.trust,
        ch.at,
        ch.expires_at,
        label,
    )


@dataclass(frozen=True, slots=True)
class TxnResult:
    """What a transaction did.

    Attributes:
        succeeded: every compare held, so the success operations were applied (else the
            failure ones were). changes: the changes made, in revision order.
        conflict: when it did not succeed, a ``ConflictError`` naming the first key whose
            compare failed, its version, value and author.
    """

    succeeded: bool
    changes: tuple[Change, ...]
    conflict: ConflictError | None = None


def txn_result(
    out: tuple[bool, list[StateChange], tuple[str, int, str | None, str] | None],
    compare: dict[str, int],
) -> TxnResult:
    ok, made, failed = out
    conflict = None
    if failed is not None:
        key, version, value, author = failed
        conflict = txn_conflict(key, compare[key], version, value, author)
    return TxnResult(ok, tuple(change(c) for c in made), conflict)


class Watch:
    """Every change after a revision, in revision order, as a sync or async iterator.

    ``revision`` is the last revision delivered: a watcher that stops (or is killed) and
    starts again with ``after_revision=`` that revision gets every later change exactly
    once. Between changes it blocks in the backend (``StateStore.wait``: a condition,
    ``PRAGMA data_version``, ``LISTEN``, ``XREAD BLOCK``) for at most ``poll`` seconds,
    then sweeps expired keys (so expiries reach it) and looks again.

    A watch opened by an ``AgentSession`` passes ``scope`` (which keys it may see: the
    others are skipped before their value is decoded) and ``delivered`` (called with each
    change as it is handed out: the session joins its label into what it has read).

    Raises (while iterating):
        CompactedError: a change after ``after_revision`` was removed by compaction.
    """

    def __init__(
        self,
        state: StateStore,
        clock: Clock,
        prefix: str,
        after_revision: int,
        *,
        timeout: float | None,
        poll: float,
        batch: int,
        scope: Callable[[str], bool] | None = None,
        delivered: Callable[[Change], None] | None = None,
    ) -> None:
        if isinstance(after_revision, bool) or not isinstance(after_revision, int):
            raise ConfigError(f"after_revision must be a revision >= 0, got {after_revision!r}")
        if after_revision < 0 or poll <= 0 or batch < 1:
            raise ConfigError(
                f"watch needs after_revision >= 0, poll > 0 and batch >= 1, got "
                f"{after_revision!r}, {poll!r}, {batch!r}"
            )
        self.state = state
        self.clock = clock
        self.prefix = prefix
        self.revision = after_revision
        self.timeout = timeout
        self.poll = poll
        self.batch = batch
        self._scope = scope
        self._delivered = delivered
        self._scanned = after_revision
        self._caught_up = False
        self._buffer: deque[Change] = deque()
        make = getattr(state, "waiter", None)  # a backend that keeps a connection
        self._waiter: Any = make() if make is not None else None

    def _fill(self) -> bool:
        """Look (until something is shown or the log is read to its head): True if changes
        are buffered."""
        skip = () if self.prefix.startswith(HIDDEN) else HIDDEN  # leases, endorsements
        scope = self._scope
        while True:
            got = self._read()
            shown = [
                change(c)  # decoded once it passed the checks: out of scope is never read
                for c in got
                if not (skip and c.key.startswith(skip)) and (scope is None or scope(c.key))
            ]
            self._buffer.extend(shown)
            if shown or len(got) < self.batch:  # a full batch all skipped: read on
                # read to the head: once these are delivered, wait before reading again
                self._caught_up = bool(shown) and len(got) < self.batch
                return bool(shown)

    def _read(self) -> list[StateChange]:
        """The next batch of changes under the prefix, after sweeping due expiries; moves
        ``_scanned`` to the revision the log was read up to."""
        state = self.state
        now = self.clock.now()
        after = self._scanned
        read = getattr(state, "watch_read", None)  # one round trip, where a backend folds it
        if read is not None:
            got, scanned, due = read(after, prefix=self.prefix, limit=self.batch, now=now)
            if due:  # keys expired: sweep, so their expiries reach this watch, and read again
                state.expire(now)
                got, scanned, _ = read(after, prefix=self.prefix, limit=self.batch, now=now)
            self._scanned = scanned
            return list(got)
        state.expire(now)
        head = state.revision()
        got = state.changes(after, prefix=self.prefix, limit=self.batch, upto=head)
        self._scanned = got[-1].revision if len(got) == self.batch else max(head, after)
        return got

    def _next(self, deadline: float | None) -> Change | None:
        while not self._buffer:
            if self._caught_up:  # nothing new since the last read unless the wait says so
                self._caught_up = False
            elif self._fill():
                break
            left = self.poll if deadline is None else min(self.poll, deadline - time.monotonic())
            if left <= 0:
                self.close()
                return None
            if self._waiter is not None:
                self._waiter.wait(self._scanned, left)
            else:
                self.state.wait(self._scanned, left)
        return self._deliver()

    def _deliver(self) -> Change:
        ch = self._buffer.popleft()
        self.revision = ch.revision
        if self._delivered is not None:
            self._delivered(ch)
        return ch

    def _deadline(self) -> float | None:
        return None if self.timeout is None else time.monotonic() + self.timeout

    def __iter__(self) -> Watch:
        return self

    def __next__(self) -> Change:
        ch = self._next(self._deadline())
        if ch is None:
            raise StopIteration
        return ch

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> Change:
        if self._buffer:
            return self._deliver()
        got = await asyncio.to_thread(self._next, self._deadline())
        if got is None:
            raise StopAsyncIteration
        return got

    def close(self) -> None:
        """Release what the watch holds in the backend (PostgreSQL: its LISTEN connection).
        Iterating again reopens it."""
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.close()
            self._waiter = self.state.waiter()  # type: ignore[attr-defined]

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        waiter = getattr(self, "_waiter", None)
        if waiter is not None:
            waiter.close()

    def __repr__(self) -> str:
        return f"Watch(prefix={self.prefix!r}, revision={self.revision})"
