"""``StateStore``: versioned keys in a namespace, owned by ``surefoot.statebus``.

Its records (a key as stored, a change of the log, a merge's outcome), the transaction's
operations, and the rules every backend spells alike (a TTL's expiry, a write's lineage,
the ``ConflictError`` of a failed condition).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..codec import loads
from ..errors import ConfigError, ConflictError

__all__ = [
    "TXN_OPS",
    "LeaseWatch",
    "MergeOutcome",
    "StateChange",
    "StateRecord",
    "StateStore",
    "TxnOp",
    "expires_at",
    "fence_conflict",
    "next_lineage",
    "txn_conflict",
    "write_conflict",
]


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
    """The ``ConflictError`` (kind ``transaction``) of a transaction whose compare on ``key``
    failed; ``value`` is the key's current value as codec JSON."""
    decoded = loads(value) if value is not None else None
    return ConflictError(key, expected, version, decoded, author, kind="transaction")


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
    """The ``ConflictError`` (kind ``fence``) for a write whose fence did not hold.

    Args:
        lease_key: the fenced lease key.
        expected: the lease version the writer fenced on.
        version: the lease key's current version (0 when it does not exist).
        value: the lease key's current value (decoded), or None.
        author: who wrote the lease key's current version.
    """
    return ConflictError(lease_key, expected, version, value, author, kind="fence")


def write_conflict(
    failed: str,
    key: str,
    expect: int | None,
    fence: tuple[str, int] | None,
    current: tuple[int, str | None, str | None] | None,
) -> ConflictError:
    """The ``ConflictError`` for a ``StateStore.write`` whose condition failed (every backend).

    Args:
        failed: ``"fence"`` (the fence's lease key was not at its version: a ``fence``
            conflict) or ``"conflict"`` (``key`` was not at ``expect``: a ``version`` one),
            as each backend's statement or script reports it.
        key: the key written. expect: the version the writer expected (None: any).
        fence: the write's fence, ``(lease_key, version)``.
        current: the failing key's ``(version, value as codec JSON, author)`` as stored now,
            or None when it does not exist.
    """
    version, value, author = current if current is not None else (0, None, "")
    decoded = loads(value) if value is not None else None
    if failed == "fence" and fence is not None:
        return fence_conflict(fence[0], fence[1], int(version), decoded, author or "")
    return ConflictError(
        key, expect if expect is not None else 0, int(version), decoded, author or ""
    )


class LeaseWatch(Protocol):
    """How a state store without a server clock (SQLite) judges a Store lock's lease by
    observation as well as by the wall clock (``state.leases``; None elsewhere).

    Attributes:
        token: this store's, written into the leases it takes (``process``).
    """

    token: str

    def hold(self) -> None:
        """Hold this store's liveness lock, before it writes a lease naming ``token``."""
        ...

    def may_take(self, key: str, rec: StateRecord, process: str | None, until: float) -> bool:
        """Whether lease record ``rec`` of ``key``, expired by the caller's clock at
        ``until``, written by the store whose token is ``process``, may be taken over now:
        that store's process is gone or unknown, or the record was seen unchanged here for
        its whole time to live."""
        ...
