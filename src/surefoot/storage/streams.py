"""``StreamLog``: an append-only log with message ids and consumer positions, owned by
``surefoot.statebus``; its records, its retention and the checks every backend shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError, ConflictError
from .checks import check_seconds

__all__ = [
    "DEFAULT_DEDUP_WINDOW",
    "ClaimedMessage",
    "ConsumerStats",
    "DeadRecord",
    "Retention",
    "StreamBatches",
    "StreamLog",
    "StreamRecord",
    "StreamStats",
    "check_range",
    "stream_conflict",
]


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
    """The ``ConflictError`` (kind ``stream``) for an append whose ``expect_last_seq`` did not
    match: the stream ends at ``last``."""
    return ConflictError(stream, expected, last, None, "", kind="stream")


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


@runtime_checkable
class StreamBatches(Protocol):
    """What a stream offers beyond ``StreamLog`` for a writer that batches (the durable
    token streams): many appends in one transaction, and deleting the whole stream.

    ``append_many`` appends ``(message_id, payload)`` pairs in order, in one transaction (one
    commit), with ``append``'s rules for each: a known id with the same payload is the
    original record (``duplicate=True``, so a batch sent again after a lost reply appends
    nothing twice); the same id with another payload raises ``DuplicateMessageError`` and
    nothing of the batch is kept. ``delete`` removes every message, id, consumer and dead
    letter of the stream and returns how many messages went. ``max_value_bytes`` is the
    largest payload it accepts (0: no limit), so a writer can refuse one before batching it.
    """

    name: str
    max_value_bytes: int

    def append_many(self, items: list[tuple[str, str]], *, now: float) -> list[StreamRecord]: ...
    def delete(self) -> int: ...
