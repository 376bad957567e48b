"""The small protocols the subsystems need from storage. Every method is atomic.

A backend implements the protocols it can make atomic; ``Storage`` hands them out:

    st = storage.open("sqlite:///runs.db")
    keys = st.keystore()          # KeyStore    (resilience: idempotency records)
    state = st.statestore("team") # StateStore  (statebus: versioned keys)
    log = st.stream("findings")   # Stream      (statebus: append-only log, consumers)
    journal = st.journal()        # Journal     (durable: runs, steps, leases, timers)

Each protocol section below is owned by the subsystem that uses it; add a method only when a
subsystem needs it and every backend offering the protocol can make it atomic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..codec import loads
from ..errors import ConfigError, ConflictError, ValueTooLargeError

__all__ = [
    "DEFAULT_DEDUP_WINDOW",
    "DEFAULT_MAX_VALUE_BYTES",
    "TXN_OPS",
    "AuditRow",
    "ChildWrite",
    "ClaimedMessage",
    "ConsumerStats",
    "DeadRecord",
    "Journal",
    "KeyRecord",
    "KeyStore",
    "MergeOutcome",
    "Record",
    "Retention",
    "RunRow",
    "RunWrite",
    "StateChange",
    "StateRecord",
    "StateStore",
    "StepRow",
    "StepWrite",
    "Storage",
    "StreamLog",
    "StreamRecord",
    "StreamStats",
    "TxnOp",
    "check_range",
    "check_seconds",
    "check_size",
    "check_text",
    "expires_at",
    "fence_conflict",
    "next_lineage",
    "stream_conflict",
    "txn_conflict",
    "value_limit",
    "write_conflict",
]

DEFAULT_MAX_VALUE_BYTES = 1 << 20
"""The largest value a store accepts unless its URL says ``?max_value_bytes=N``: 1 MiB.

Agent state is text and small records (a report, findings, a plan: kilobytes, a long
transcript a few hundred); every write of a key rewrites its whole value, and every reader
fetches it, so a value past a megabyte makes each write and read cost milliseconds of I/O
and network and usually means a blob that belongs in a file or object store. The peers
draw the line in the same place: etcd refuses requests over 1.5 MiB, DynamoDB items over
400 KB, Temporal payloads over 2 MB."""


def value_limit(url: str, options: dict[str, str]) -> int:
    """The ``max_value_bytes`` option of a storage URL: bytes, 0 for no limit.

    Raises:
        ConfigError: not a whole number >= 0.
    """
    raw = options.get("max_value_bytes")
    if raw is None:
        return DEFAULT_MAX_VALUE_BYTES
    try:
        limit = int(raw)
    except ValueError:
        limit = -1
    if limit < 0:
        raise ConfigError(
            f"max_value_bytes must be a whole number of bytes >= 0 (0: no limit), got "
            f"{raw!r} in {url!r}; the default is {DEFAULT_MAX_VALUE_BYTES} (1 MiB)"
        )
    return limit


def check_size(url: str, what: str, text: str | None, limit: int) -> None:
    """Refuse ``text`` (codec JSON) when its UTF-8 size is over ``limit`` (0: no limit).

    Raises:
        ValueTooLargeError: naming ``what``, the size, the limit and how to raise it.
    """
    if text is None or not limit or len(text) * 4 <= limit:  # no character is over 4 bytes
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueTooLargeError(url, what, size, limit)


@runtime_checkable
class Storage(Protocol):
    """An opened storage URL. Hands out the protocol objects; ``close`` releases connections."""

    url: str

    def keystore(self) -> KeyStore: ...
    def statestore(self, namespace: str = "default") -> StateStore: ...
    def stream(self, name: str) -> StreamLog: ...
    def journal(self) -> Journal: ...
    def close(self) -> None: ...


# --- KeyStore (idempotency records) -- owned by surefoot.resilience -----------------------


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One idempotency key as stored.

    Attributes:
        key: the key. fingerprint: a hash of the action and its arguments.
        state: ``running`` (the action is in flight) or ``done``.
        result: codec JSON of the result when done.
        owner: who claimed it (process and executor). created_at: when (``Clock.now()``).
        lease_until: a running record whose owner died can be taken over after this.
        expires_at: a done record counts as absent after this (None: never).
    """

    key: str
    fingerprint: str
    state: str
    result: str | None
    owner: str
    created_at: float
    lease_until: float
    expires_at: float | None


@runtime_checkable
class KeyStore(Protocol):
    """Idempotency records. Every method is one atomic statement (or one short transaction)."""

    def claim(
        self, key: str, fingerprint: str, owner: str, now: float, lease_until: float
    ) -> tuple[bool, KeyRecord]:
        """Insert a ``running`` record if the key is absent, or take it over if it expired
        (done, ``expires_at <= now``) or its owner's lease ran out (running, same
        fingerprint, ``lease_until <= now``). Returns (claimed, the record now stored)."""
        ...

    def complete(self, key: str, owner: str, result: str, expires_at: float | None) -> bool:
        """``running`` → ``done`` with ``result``, only if ``owner`` still holds the key."""
        ...

    def release(self, key: str, owner: str) -> bool:
        """Delete a ``running`` record held by ``owner`` (its action failed; a retry may run)."""
        ...

    def get(self, key: str) -> KeyRecord | None: ...
    def delete(self, key: str) -> bool: ...
    def purge(self, now: float) -> int:
        """Delete done records that expired at ``now``; returns how many."""
        ...


# --- StateStore (versioned keys) -- owned by surefoot.statebus ------------------------------


@dataclass(frozen=True, slots=True)
class StateRecord:
    """One key as stored: the value is codec JSON text; ``version`` counts writes to the key
    (1 for the first), ``revision`` is the namespace's global revision at that write.

    ``lineage`` counts the versions this value descends from, itself included: each write
    is based on a version (the one its writer read), and the value carries the changes of
    that version's lineage plus its own. ``version - lineage`` versions of the key were
    overwritten without their writer's successor having read them: their change is lost.

    A key made by merges (:mod:`surefoot.storage.merges`) also has ``merge_op``, the
    operation it merges by, and ``merge_log``, the JSON list of its contributions.
    ``expires_at`` is when a key written with a TTL expires (None: never).
    """

    key: str
    value: str
    version: int
    revision: int
    author: str
    trust: str
    written_at: float
    lineage: int
    merge_op: str | None = None
    merge_log: str | None = None
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class MergeOutcome:
    """What a merge did: ``applied`` is False for a duplicate (nothing changed); the other
    fields describe the key as stored after it (its trust is the lowest it holds)."""

    key: str
    version: int
    revision: int
    author: str
    trust: str
    written_at: float
    applied: bool

    @classmethod
    def of(cls, rec: StateRecord, applied: bool) -> MergeOutcome:
        """The outcome for the key stored as ``rec``."""
        return cls(
            rec.key, rec.version, rec.revision, rec.author, rec.trust, rec.written_at, applied
        )


@dataclass(frozen=True, slots=True)
class StateChange:
    """One entry of a namespace's change log: what one revision did to one key.

    ``kind`` is ``put`` (a write), ``merge``, ``delete`` (a tombstone) or ``expire`` (the
    key's TTL ran out). ``value`` is the key's value after the change (codec JSON), None for a
    tombstone. ``version`` is the key's version after it (a tombstone is a version too).
    """

    revision: int
    key: str
    kind: str
    value: str | None
    version: int
    author: str
    trust: str
    at: float
    expires_at: float | None = None


#: The operations of a transaction: ``("put", key, value_json, ttl_or_None)`` or
#: ``("delete", key)``.
TXN_OPS = ("put", "delete")
TxnOp = tuple[Any, ...]


def expires_at(now: float, ttl: float | None) -> float | None:
    """When a key written at ``now`` with ``ttl`` seconds expires (None: never).

    Raises:
        ConfigError: a ttl that is not a number > 0.
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise ConfigError(f"ttl must be a number of seconds > 0 or None, got {ttl!r}")
    return float(now) + float(ttl)


def txn_conflict(
    key: str, expected: int, version: int, value: str | None, author: str
) -> ConflictError:
    """The ``ConflictError`` of a transaction whose compare on ``key`` failed."""
    exc = ConflictError(key, expected, version, loads(value) if value is not None else None, author)
    want = "absent" if expected == 0 else f"at version {expected}"
    exc.args = (
        f"transaction refused: key {key!r} is at version {version} (written by {author!r}), "
        f"not {want}; its failure branch ran instead, no success operation was applied. "
        "Re-read the keys and try again",
    )
    return exc


@runtime_checkable
class StateStore(Protocol):
    """Versioned keys in one namespace. Every method is atomic.

    ``write`` is one conditional statement: with ``expect=None`` it always writes
    (last-writer-wins); with ``expect=0`` it only creates; with ``expect=n`` it writes only if
    the key is at version ``n``. ``fence=(lease_key, version)`` adds the condition that
    ``lease_key`` is still at that version (a lease epoch). A failed condition raises
    ``ConflictError`` carrying the current value, version and author, and writes nothing.
    A fence on a lease key that does not exist never matches (not even at version 0): a
    lease is held only once it has been written.

    Lost updates are counted in the same statement as the write: ``seen=(version,
    lineage)`` names the record the writer read. A last-writer-wins write based on an older
    version than the key's current one descends from the record it read, not from the
    current one (``lineage = seen lineage + 1``); every other write descends from the current
    record (``lineage + 1``). ``lost_updates()`` is the sum of ``version - lineage`` over the
    namespace: the versions whose change no current value carries, seen alike by every
    process.
    """

    namespace: str

    def read(self, key: str, now: float | None = None) -> StateRecord | None:
        """The key as stored, or None (absent, deleted, or expired at ``now``)."""
        ...

    def write(
        self,
        key: str,
        value: str,
        *,
        author: str,
        trust: str,
        expect: int | None,
        now: float,
        fence: tuple[str, int] | None = None,
        seen: tuple[int, int] | None = None,
        ttl: float | None = None,
    ) -> StateRecord: ...
    def snapshot(self, now: float | None = None) -> dict[str, StateRecord]: ...
    def delete(
        self,
        key: str,
        *,
        author: str,
        trust: str,
        expect: int | None,
        now: float,
        fence: tuple[str, int] | None = None,
    ) -> StateChange | None:
        """Replace the key by a tombstone (a new version, logged as ``delete``); None when
        the key is absent (nothing written). ``expect`` is checked like a write's (0: the key
        must be absent); a failed condition raises ``ConflictError`` and writes nothing."""
        ...

    def expire(self, now: float) -> int:
        """Log an ``expire`` tombstone for every key whose TTL ran out at ``now``; how many.
        Every write sweeps first, in its own transaction, so expiries keep revision order."""
        ...

    def changes(
        self, after: int, *, prefix: str = "", limit: int = 100, upto: int | None = None
    ) -> list[StateChange]:
        """The change log after revision ``after`` (up to ``upto``), oldest first, of keys
        starting with ``prefix``.

        Raises:
            CompactedError: a change after ``after`` was removed by compaction.
        """
        ...

    def history(self, key: str) -> list[StateChange]:
        """The kept changes of ``key``, oldest first."""
        ...

    def read_at(self, key: str, revision: int) -> StateChange | None:
        """The key as it was at ``revision`` (its last change at or before it), or None.

        Raises:
            CompactedError: that change was removed by compaction.
        """
        ...

    def compact(self, *, keep: int | None, before: float | None) -> int:
        """Remove changes from the log: all but the last ``keep`` of each key, and those
        written before time ``before``; each key's latest change is always kept. Returns
        how many were removed; reads and watches of a removed revision raise
        ``CompactedError``."""
        ...

    def compacted(self) -> int:
        """The highest revision compaction removed (0: none)."""
        ...

    def wait(self, after: int, timeout: float) -> bool:
        """Block until the namespace's revision passes ``after`` or ``timeout`` seconds pass;
        True if it did. May return True early (a spurious wake); callers re-check."""
        ...

    def txn(
        self,
        compare: list[tuple[str, int]],
        success: list[TxnOp],
        failure: list[TxnOp],
        *,
        author: str,
        trust: str,
        now: float,
    ) -> tuple[bool, list[StateChange], tuple[str, int, str | None, str] | None]:
        """A multi-key transaction (etcd's Txn), atomic.

        ``compare`` holds ``(key, version)`` pairs (0: the key is absent). If every one
        holds, the ``success`` operations are applied, else the ``failure`` ones, all at
        once. Returns (succeeded, the changes made, the first failed compare as
        ``(key, version, value, author)`` or None).
        """
        ...

    def revision(self) -> int: ...
    def lost_updates(self) -> int:
        """Versions of the namespace's keys that no current value descends from."""
        ...

    def merge(
        self,
        key: str,
        op: str,
        arg: str,
        *,
        author: str,
        trust: str,
        now: float,
        merge_id: str | None = None,
        reducer: Any = None,
    ) -> MergeOutcome:
        """Combine the contribution ``arg`` (codec JSON) into ``key`` by ``op``, atomically.

        Returns the key's version, revision and labels now, and whether the contribution was
        applied (False: a duplicate, by ``merge_id`` or, for ``set_add``, by member; nothing
        changed). Not the merged value: a list merge does not read the list back.
        See :mod:`surefoot.storage.merges` for the operations.
        """
        ...


# --- Stream (append-only log with ids and consumer positions) -- owned by surefoot.statebus --


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """One appended message. ``duplicate`` is True when an append was deduplicated: the
    record is the original one."""

    seq: int
    message_id: str
    payload: str
    appended_at: float
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class ClaimedMessage:
    """A message handed to a consumer: ``attempt`` counts its deliveries (1 the first time)."""

    record: StreamRecord
    attempt: int


@dataclass(frozen=True, slots=True)
class DeadRecord:
    """A dead letter: the whole message, a reason code and its delivery history."""

    record: StreamRecord
    consumer: str
    reason: str
    attempts: int
    history: list[dict[str, Any]] = field(default_factory=list)


DEFAULT_DEDUP_WINDOW = 86_400.0
"""Seconds a trimmed message's id is still deduplicated after its append: one day (an LLM
retry may come hours later; NATS JetStream's default duplicate window is two minutes)."""


@dataclass(frozen=True, slots=True)
class Retention:
    """How much of a stream is kept; applied by every append and by ``trim``.

    Attributes:
        max_messages: keep at most this many messages (None: no length limit).
        max_age: keep messages appended less than this many seconds ago (None: no age limit).
        dedup_window: seconds after its append that a trimmed message's id still
            deduplicates a retry (a kept message's id always does).

    A trim never removes a message a registered consumer has not settled (not yet handed
    out, pending, or a dead letter): such a stream stays over its limits until the consumer
    catches up or is removed (``remove_consumer``), and ``stats`` shows it.
    """

    max_messages: int | None = None
    max_age: float | None = None
    dedup_window: float = DEFAULT_DEDUP_WINDOW

    def __post_init__(self) -> None:
        m = self.max_messages
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise ConfigError(f"max_messages must be an integer >= 1 or None, got {m!r}")
        if self.max_age is not None:
            check_seconds("max_age", self.max_age, positive=True)
        check_seconds("dedup_window", self.dedup_window)

    def cuts(self, last_seq: int, now: float) -> tuple[int, float | None, float]:
        """(keep seq >= this, keep appended_at >= this or None, forget ids appended before)."""
        by_len = last_seq + 1 - self.max_messages if self.max_messages is not None else 0
        by_age = now - self.max_age if self.max_age is not None else None
        return by_len, by_age, now - self.dedup_window


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    """One consumer group of a stream: ``position`` (last seq handed out), ``pending``
    (delivered, not acked), ``dead`` (dead letters) and ``lag`` (not yet handed out)."""

    name: str
    position: int
    pending: int
    dead: int
    lag: int


@dataclass(frozen=True, slots=True)
class StreamStats:
    """A stream's counts: kept ``messages``, ``first_seq``..``last_seq`` (0, 0 when empty;
    ``first_seq`` > 1 after a trim), remembered trimmed ids, and each consumer's counts."""

    name: str
    messages: int
    first_seq: int
    last_seq: int
    trimmed_ids: int
    consumers: tuple[ConsumerStats, ...] = ()


def check_seconds(what: str, value: Any, *, positive: bool = False) -> float:
    """A finite number of seconds >= 0 (> 0 with ``positive``), or a ConfigError naming it."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"{what} must be a finite number of seconds {bound}, got {value!r}")
    return float(value)


def check_text(what: str, value: str) -> str:
    """Refuse a key, id or name some backend cannot store, the same way on every backend.

    PostgreSQL text cannot hold NUL, and no backend but memory can encode a lone surrogate
    as UTF-8; checking here keeps memory, SQLite, PostgreSQL and Redis in agreement.

    Raises:
        ConfigError: naming what it is, the value and the fix.
    """
    if "\x00" in value:
        raise ConfigError(f"{what} {value!r} contains a NUL character; remove it")
    if value.isascii():  # no surrogate in ASCII text: nothing to encode to find out
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{what} {value!r} contains a lone surrogate (not valid UTF-8); pass real text"
        ) from None
    return value


def next_lineage(
    version: int, lineage: int, expect: int | None, seen: tuple[int, int] | None
) -> int:
    """The lineage of the version a write makes over a key at ``(version, lineage)``.

    A last-writer-wins write (``expect=None``) based on an older version than the current
    one descends from what its writer read; every other write descends from the current
    version. The SQL statements and the Redis script spell the same rule.
    """
    if expect is None and seen is not None and seen[0] < version:
        return seen[1] + 1
    return lineage + 1


def fence_conflict(
    lease_key: str, expected: int, version: int, value: Any, author: str
) -> ConflictError:
    """The ``ConflictError`` for a write whose fence (lease key at a version) did not hold.

    Args:
        lease_key: the fenced lease key.
        expected: the lease version the writer fenced on.
        version: the lease key's current version (0 when it does not exist).
        value: the lease key's current value (decoded), or None.
        author: who wrote the lease key's current version.
    """
    exc = ConflictError(lease_key, expected, version, value, author)
    if version == 0:
        exc.args = (
            f"lease key {lease_key!r} does not exist, so a write fenced on it (version "
            f"{expected}) is refused: acquire the lease first (write {lease_key!r}) and fence "
            "on the version that write returns; nothing was written",
        )
    else:
        exc.args = (
            f"lease key {lease_key!r} is at version {version} (written by {author!r}), not "
            f"{expected}: the lease was taken over or released, so this write is refused; "
            "re-acquire the lease, re-read the data and write again; nothing was written",
        )
    return exc


def write_conflict(
    kind: str,
    key: str,
    expect: int | None,
    fence: tuple[str, int] | None,
    current: tuple[int, str | None, str | None] | None,
) -> ConflictError:
    """The ``ConflictError`` for a ``StateStore.write`` whose condition failed (every backend).

    Args:
        kind: ``"fence"`` (the fence's lease key was not at its version) or ``"conflict"``
            (``key`` was not at ``expect``).
        key: the key written. expect: the version the writer expected (None: any).
        fence: the write's fence, ``(lease_key, version)``.
        current: the failing key's ``(version, value as codec JSON, author)`` as stored now,
            or None when it does not exist.
    """
    version, value, author = current if current is not None else (0, None, "")
    decoded = loads(value) if value is not None else None
    if kind == "fence" and fence is not None:
        return fence_conflict(fence[0], fence[1], int(version), decoded, author or "")
    return ConflictError(
        key, expect if expect is not None else 0, int(version), decoded, author or ""
    )


def check_range(stream: str, after: int, limit: int) -> None:
    """Refuse a negative ``after`` or ``limit`` for ``StreamLog.range`` (every backend alike).

    Raises:
        ConfigError: naming the stream, the value and the fix.
    """
    if limit < 0 or after < 0:
        bad = f"limit={limit}" if limit < 0 else f"after={after}"
        raise ConfigError(
            f"stream {stream!r}: range({bad}) is negative; pass after >= 0 (the sequence "
            "number to read after, 0 for the start) and limit >= 0 (0 returns nothing)"
        )


def stream_conflict(stream: str, expected: int, last: int) -> ConflictError:
    """The ``ConflictError`` for an append whose ``expect_last_seq`` did not match."""
    exc = ConflictError(f"stream:{stream}", expected, last, None, "")
    exc.args = (
        f"stream {stream!r} ends at sequence {last}, not {expected} (expect_last_seq): "
        f"read the messages after {expected}, redo your append on them, and append again "
        f"with expect_last_seq={last}; nothing was appended",
    )
    return exc


@runtime_checkable
class StreamLog(Protocol):
    """An append-only log with message ids and consumer positions. Every method is atomic.

    ``append`` is one statement: a retried id with the same payload returns the original
    record (``duplicate=True``); the same id with another payload raises
    ``DuplicateMessageError``; ``expect_last_seq`` makes it conditional (``ConflictError``).
    ``claim`` hands a consumer new messages and redelivers those whose visibility timeout
    passed without an ack; a message that was delivered ``max_attempts`` times without an ack
    becomes a dead letter (reason ``max_attempts``) instead. ``ack_many`` settles a batch in
    one transaction (one commit) and returns how many were pending. ``range`` refuses a
    negative ``after`` or ``limit`` (``ConfigError``); ``limit=0`` returns nothing.

    ``append`` with a ``retention`` (and ``trim``) drops the oldest messages beyond it in the
    same transaction, never one a registered consumer has not settled (see ``Retention``),
    and forgets trimmed ids older than its ``dedup_window``; ``trim`` returns how many
    messages it removed. ``register`` makes a consumer known (its position starts before the
    first kept message); ``remove_consumer`` forgets it with its pending and dead letters.
    ``next_visible`` is the earliest time a pending delivery becomes due again (None: none).
    ``wait(after_seq, timeout)`` blocks up to ``timeout`` seconds until the last sequence
    number is past ``after_seq`` and says whether it is (it may return early, spuriously).
    """

    name: str

    def append(
        self,
        message_id: str,
        payload: str,
        *,
        now: float,
        expect_last_seq: int | None = None,
        retention: Retention | None = None,
    ) -> StreamRecord: ...
    def trim(self, retention: Retention, *, now: float) -> int: ...
    def last_seq(self) -> int: ...
    def register(self, consumer: str) -> None: ...
    def remove_consumer(self, consumer: str) -> bool: ...
    def stats(self) -> StreamStats: ...
    def next_visible(self, consumer: str) -> float | None: ...
    def wait(self, after_seq: int, timeout: float) -> bool: ...
    def range(self, after: int = 0, limit: int = 100) -> list[StreamRecord]: ...
    def claim(
        self,
        consumer: str,
        *,
        limit: int,
        now: float,
        visibility_timeout: float,
        max_attempts: int,
        worker: str = "",
    ) -> list[ClaimedMessage]: ...
    def ack(self, consumer: str, seq: int) -> bool: ...
    def ack_many(self, consumer: str, seqs: list[int]) -> int: ...
    def nack(self, consumer: str, seq: int, *, now: float, delay: float = 0.0) -> bool: ...
    def reject(self, consumer: str, seq: int, *, reason: str, now: float) -> bool: ...
    def dead_letters(self, consumer: str) -> list[DeadRecord]: ...
    def redrive(self, consumer: str, seqs: list[int] | None, *, now: float) -> int: ...
    def position(self, consumer: str) -> int: ...
    def pending(self, consumer: str) -> int: ...


# --- Journal (runs, steps, leases, timers, audit) -- owned by surefoot.durable ---------------
#
# A run is a header row plus one row per step, keyed by (run_id, pos). ``pos`` is the step's
# position, a string: "1", "2", … in the workflow's own task, "3.1", "3.2", … inside the task
# that got position 3 (``asyncio.gather`` of sub-flows). Every write of a running run is
# conditional on the lease epoch the writer holds, so a zombie's late write is refused.
# Values (``args``, ``result``, ``error``, ``payload``) are codec JSON text; times are
# ``Clock.now()`` seconds.


@dataclass(slots=True)
class RunRow:
    """A run's header, as stored.

    Attributes:
        run_id: the run's id (its idempotency key). workflow / version: what runs it.
        structure_hash: a hash of the workflow's step structure when the run began.
        args: codec JSON of ``[args, kwargs]``. strategy: ``restart``, ``journal`` or
        ``journal_keys``. status: pending, running, sleeping, succeeded, failed, cancelled,
        needs_attention. result / error: codec JSON when finished. owner / epoch /
        lease_until: the lease. wake_at: when a sleeping run is due (None: only a signal
        wakes it). waiting_for: the signal name a sleeping run waits for. claims: times
        the run was claimed since it last suspended or an operator moved it (``max_claims``).
        queue / priority / dedup_id: the named queue the run waits in (None: any worker
        takes it), its priority there (lower first) and its deduplication id.
        parent_id: the run that started this one as a child. deadline_at: when the run
        times out (None: never). started_at: when a queue first let the run start.
    """

    run_id: str
    workflow: str
    version: str
    structure_hash: str
    args: str
    strategy: str
    status: str
    created_at: float
    updated_at: float
    result: str | None = None
    error: str | None = None
    owner: str | None = None
    epoch: int = 0
    lease_until: float | None = None
    wake_at: float | None = None
    waiting_for: str | None = None
    forked_from: str | None = None
    claims: int = 0
    queue: str | None = None
    priority: int = 0
    dedup_id: str | None = None
    parent_id: str | None = None
    deadline_at: float | None = None
    started_at: float | None = None


@dataclass(slots=True)
class StepRow:
    """One journalled step. ``status`` is ``intent`` (effect started, outcome unknown),
    ``waiting`` (a wait step not yet satisfied), ``done`` or ``error``."""

    run_id: str
    pos: str
    name: str
    kind: str
    status: str
    result: str | None
    error: str | None
    attempts: int
    epoch: int
    started_at: float
    finished_at: float | None
    seq: int = 0


@dataclass(slots=True)
class StepWrite:
    """Insert or update one step row, if the run's epoch is still ``epoch``.

    ``consume_signal`` marks that signal as delivered to this step in the same transaction.
    ``order``: the step's place in its run's journal (1, 2, …; the same for a position
    journalled again), numbered by the run that writes it; None where the writer does not
    know it (an operator's edit), and the journal finds it. SQLite keeps a run's steps in
    one range of one b-tree by it; PostgreSQL does not use it.
    """

    run_id: str
    epoch: int
    pos: str
    name: str
    kind: str
    status: str
    result: str | None
    error: str | None
    attempts: int
    started_at: float
    finished_at: float | None
    consume_signal: int | None = None
    order: int | None = None


@dataclass(slots=True)
class RunWrite:
    """Move a run the writer holds (``epoch``) to ``status``, releasing its lease.

    For ``sleeping``: ``wake_at`` and ``waiting_for``; a signal already waiting for
    ``waiting_for`` makes the run due at once. ``audit`` entries are ``(action, detail)``
    appended in the same transaction. ``parent``: the run that awaits this one as a child;
    when the run ends (succeeded, failed, cancelled) the parent is signalled in the same
    transaction.
    """

    run_id: str
    epoch: int
    status: str
    now: float
    actor: str
    result: str | None = None
    error: str | None = None
    wake_at: float | None = None
    waiting_for: str | None = None
    audit: list[tuple[str, str]] = field(default_factory=list)
    parent: str | None = None


@dataclass(slots=True)
class ChildWrite:
    """Create run ``child`` as a child of the writer's run and journal the writer's step
    ``step`` (its ``run_id`` and ``epoch`` are the writer's), in one transaction.

    The child is created only while the writer's run is ``running`` at ``step.epoch`` (a
    parent cancelled or taken over meanwhile creates nothing); a child that exists already
    is kept as it is. ``step`` is journalled, and the record applied, only if the child
    then exists as the writer's child, of the same workflow with the same arguments.
    """

    step: StepWrite
    child: RunRow

    @property
    def run_id(self) -> str:
        """The writer's run (a batch orders and fences its records by it)."""
        return self.step.run_id

    @property
    def epoch(self) -> int:
        return self.step.epoch


Record = StepWrite | RunWrite | ChildWrite
"""What the journal's ``commit`` writes in one transaction."""


@dataclass(slots=True)
class AuditRow:
    """One audit-log entry: who did what to a run, and when. ``detail`` is codec JSON."""

    run_id: str
    seq: int
    at: float
    actor: str
    action: str
    detail: str


#: The orders of ``Journal.page_runs``: newest first, or ``needs_attention`` first then newest.
RUN_ORDERS = ("newest", "attention")


@dataclass(slots=True)
class WorkerRow:
    """A worker as the journal last saw it.

    Attributes:
        worker_id: its id. workflows: the (workflow, version) pairs it offers.
        seen_at: when it last registered (it does so as it starts and as it polls).
        leases: running runs whose lease it holds and that have not expired.
    """

    worker_id: str
    workflows: list[tuple[str, str]]
    seen_at: float
    leases: int


@runtime_checkable
class Journal(Protocol):
    """Runs, steps, leases, timers, signals and the audit log. Every method is atomic.

    ``commit`` writes a batch in one transaction (one fsync) and returns, per record,
    whether it was applied: False means the writer's epoch is stale (a zombie).
    """

    url: str

    def create_run(self, row: RunRow) -> tuple[RunRow, bool]: ...
    def get_run(self, run_id: str) -> RunRow | None: ...
    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[RunRow]: ...
    def steps(self, run_id: str) -> list[StepRow]: ...
    def commit(self, records: list[Record]) -> list[bool]: ...
    def claim(
        self,
        owner: str,
        *,
        now: float,
        lease_until: float,
        workflows: list[tuple[str, str]],
        limit: int,
        run_id: str | None = None,
        force: bool = False,
    ) -> list[tuple[str, int]]: ...
    def heartbeat(
        self, owner: str, runs: list[tuple[str, int]], *, lease_until: float, now: float
    ) -> list[str]: ...
    def operator(
        self,
        run_id: str,
        *,
        status: str,
        from_statuses: tuple[str, ...],
        now: float,
        actor: str,
        action: str,
        detail: str,
        reset_steps: list[str] | None = None,
        put_steps: list[StepWrite] | None = None,
    ) -> RunRow | None: ...
    def signal(
        self, run_id: str, name: str, payload: str, *, now: float, signal_id: str | None
    ) -> bool: ...
    def pending_signal(self, run_id: str, name: str) -> tuple[int, str] | None: ...
    def audit(self, run_id: str, *, actor: str, action: str, detail: str, now: float) -> None: ...
    def audit_log(self, run_id: str) -> list[AuditRow]: ...
    def fork(self, run_id: str, new_run_id: str, before_pos: str, *, now: float) -> RunRow: ...
    def register_worker(
        self,
        worker_id: str,
        workflows: list[tuple[str, str]],
        *,
        now: float,
        queues: Sequence[str] = (),
    ) -> None: ...
    def live_workflows(self, *, since: float) -> set[tuple[str, str]]: ...
    def page_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
        order: str = "newest",
        offset: int = 0,
        limit: int = 100,
    ) -> list[RunRow]: ...
    def count_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
    ) -> dict[str, int]: ...
    def backlog(self, *, now: float) -> tuple[int, float | None]: ...
    def run_versions(self) -> list[tuple[str, str]]: ...
    def workers(self, *, now: float) -> list[WorkerRow]: ...
