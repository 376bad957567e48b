"""``Stream``: an append-only log with message ids, consumers, acks, redelivery, dead letters.

A retried append with the same id and payload is deduplicated while the stream keeps the
message and, once retention trimmed it, for ``dedup_window`` seconds after its append (a
day by default); the same id with another payload is an error. Retention by length and age
never drops a message a registered consumer has not settled. ``Consumer.fetch(block=s)``
waits for an append instead of polling.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .. import storage as _storage
from ..clock import Clock, SystemClock
from ..codec import dumps, loads
from ..errors import ConfigError, ValueTooLargeError
from ..storage.checks import check_seconds, check_text
from ..storage.streams import (
    DEFAULT_DEDUP_WINDOW,
    ConsumerStats,
    Retention,
    StreamLog,
    StreamRecord,
    StreamStats,
)

__all__ = [
    "Consumer",
    "ConsumerStats",
    "DeadLetter",
    "Message",
    "Stream",
    "StreamEntry",
    "StreamStats",
    "streams",
]


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """An appended message. ``duplicate`` is True when the append was a deduplicated retry."""

    seq: int
    message_id: str
    payload: Any
    appended_at: float
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class Message:
    """A message delivered to a consumer; ``attempt`` is 1 the first time, more on redelivery."""

    seq: int
    message_id: str
    payload: Any
    attempt: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that will not be delivered again until redriven: the whole message, a
    reason code (``max_attempts``, or the reason given to ``reject``) and its history."""

    seq: int
    message_id: str
    payload: Any
    reason: str
    attempts: int
    history: list[dict[str, Any]]


_new = object.__new__
_set_seq, _set_id, _set_payload, _set_at, _set_dup = (
    StreamEntry.__dict__[f].__set__
    for f in ("seq", "message_id", "payload", "appended_at", "duplicate")
)


def _entry(r: StreamRecord) -> StreamEntry:
    # Built by setting the slots: a frozen dataclass's __init__ costs a call per field,
    # and every append returns one.
    e = _new(StreamEntry)
    _set_seq(e, r.seq)
    _set_id(e, r.message_id)
    _set_payload(e, loads(r.payload))
    _set_at(e, r.appended_at)
    _set_dup(e, r.duplicate)
    return e


def _opened(url: str | Any) -> Any:
    if isinstance(url, str):
        return _storage.open(url)
    if hasattr(url, "stream"):
        return url
    raise ConfigError(f"Stream needs a storage URL or a Storage, got {url!r}")


def streams(url: str | Any) -> dict[str, int]:
    """Every stream in a storage URL (or an opened ``Storage``): names, sorted, with the
    number of messages each keeps. ``memory://`` lists the streams opened in that storage.
    """
    st = _opened(url)
    try:
        found: dict[str, int] = st.streams()
    finally:
        if isinstance(url, str):
            st.close()
    return found


class Stream:
    """A named stream in a storage URL (SQLite: many processes on one file).

    Args:
        url: a storage URL or an opened ``Storage``.
        name: the stream's name.
        clock: time for visibility timeouts and ages (``SystemClock`` by default).
        max_messages: keep at most this many messages (None: no limit); each append trims.
        max_age: keep messages appended less than this many seconds ago (None: no limit).
        dedup_window: seconds after its append that a trimmed message's id still
            deduplicates a retry (default one day); a kept message's id always does.
        max_message_bytes: refuse a message over this many bytes of UTF-8 JSON
            (``ValueTooLargeError``; None: the store's ``max_value_bytes``, 1 MiB).

    Retention never removes a message a registered consumer (``consumer(name)``) has not
    settled (acked, or moved past), nor the last message: a stream stays over its limits
    while a consumer lags, until it catches up or ``remove_consumer`` forgets it.
    Declare the same limits in every process that appends.
    """

    def __init__(
        self,
        url: str | Any,
        name: str,
        clock: Clock | None = None,
        *,
        max_messages: int | None = None,
        max_age: float | None = None,
        dedup_window: float = DEFAULT_DEDUP_WINDOW,
        max_message_bytes: int | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a stream name must be a non-empty string, got {name!r}")
        check_text("stream name", name)
        limit = max_message_bytes
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ConfigError(f"max_message_bytes must be an integer >= 1 or None, got {limit!r}")
        self.retention: Retention | None = (
            None
            if max_messages is None and max_age is None
            else Retention(max_messages, max_age, dedup_window)
        )
        if self.retention is None:
            check_seconds("dedup_window", dedup_window)
        self.dedup_window = float(dedup_window)
        self.max_message_bytes = limit
        self.storage: Any = _opened(url)
        self.log: StreamLog = self.storage.stream(name)
        self.name = name
        self.clock: Clock = clock if clock is not None else SystemClock()

    def append(
        self, payload: Any, *, message_id: str, expect_last_seq: int | None = None
    ) -> StreamEntry:
        """Append ``payload`` under ``message_id``.

        Args:
            payload: any value the codec can store.
            message_id: the producer's id for this message; a retry must reuse it.
            expect_last_seq: append only if the stream's last sequence number is this one.

        Returns:
            The entry; ``duplicate=True`` (and the original sequence number) for a retry.

        Raises:
            DuplicateMessageError: the id was used before with another payload.
            ConflictError: ``expect_last_seq`` did not match the last sequence number.
        """
        if not isinstance(message_id, str) or not message_id:
            raise ConfigError(f"message_id must be a non-empty string, got {message_id!r}")
        check_text("message_id", message_id)
        if expect_last_seq is not None and (
            isinstance(expect_last_seq, bool)
            or not isinstance(expect_last_seq, int)
            or expect_last_seq < 0
        ):
            raise ConfigError(
                f"expect_last_seq must be a sequence number >= 0 or None, got {expect_last_seq!r}"
            )
        text = dumps(payload, where=f"message {message_id!r}")
        if self.max_message_bytes is not None and len(text) * 4 > self.max_message_bytes:
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > self.max_message_bytes:
                what = f"message {message_id!r} of stream {self.name!r}"
                exc = ValueTooLargeError(self.storage.url, what, size, self.max_message_bytes)
                exc.args = (
                    f"{what} is {size:,} bytes of JSON, over the stream's max_message_bytes="
                    f"{self.max_message_bytes:,}; nothing was appended. Keep large data "
                    "elsewhere (a file or an object store) and append its name, or raise "
                    "max_message_bytes in Stream(...).",
                )
                raise exc
        rec = self.log.append(
            message_id,
            text,
            now=self.clock.now(),
            expect_last_seq=expect_last_seq,
            retention=self.retention,
        )
        return _entry(rec)

    def trim(self) -> int:
        """Apply the retention now (appends do it too); returns how many messages went.

        Raises:
            ConfigError: the stream has no ``max_messages`` nor ``max_age``.
        """
        if self.retention is None:
            raise ConfigError(
                f"stream {self.name!r} has no retention to trim by: pass max_messages= or "
                "max_age= to Stream(...)"
            )
        return self.log.trim(self.retention, now=self.clock.now())

    def stats(self) -> StreamStats:
        """Kept messages, first and last sequence numbers, remembered trimmed ids, and per
        consumer group its position, pending, dead letters and lag (for inspectors, metrics)."""
        return self.log.stats()

    def dead_letters(self, group: str) -> list[DeadLetter]:
        """Group ``group``'s dead letters, oldest first, with reason and delivery history.

        A read: unlike :meth:`consumer`, it registers nothing (an inspector may look at any
        group without holding retention back); a group the stream does not have has none.
        """
        return [
            DeadLetter(
                d.record.seq,
                d.record.message_id,
                loads(d.record.payload),
                d.reason,
                d.attempts,
                d.history,
            )
            for d in self.log.dead_letters(group)
        ]

    def remove_consumer(self, name: str) -> bool:
        """Forget a consumer group (its position, pending deliveries and dead letters), so
        retention no longer keeps messages for it; False if it was unknown.

        A worker still fetching for it gets ``StateError`` (the group is not re-created
        silently); ``consumer(name)`` opens it again after the last message appended."""
        return self.log.remove_consumer(name)

    @property
    def last_seq(self) -> int:
        """The sequence number of the last message (0 when empty)."""
        return self.log.last_seq()

    def read(self, after: int = 0, limit: int = 100) -> list[StreamEntry]:
        """Messages with sequence numbers after ``after``, in order (no consumer state);
        after a trim the first one returned may be past ``after + 1``."""
        return [_entry(r) for r in self.log.range(after, limit)]

    def consumer(
        self, name: str, *, visibility_timeout: float = 30.0, max_attempts: int = 5
    ) -> Consumer:
        """A consumer group with its own position; several workers may share one name.

        Args:
            name: the group's name.
            visibility_timeout: seconds a delivered message stays hidden before redelivery.
            max_attempts: deliveries without an ack before a message becomes a dead letter.
        """
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a consumer name must be a non-empty string, got {name!r}")
        check_text("consumer name", name)
        check_seconds("visibility_timeout", visibility_timeout, positive=True)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
        self.log.register(name)
        return Consumer(self, name, visibility_timeout, max_attempts)

    def close(self) -> None:
        """Release the storage's connections."""
        self.storage.close()

    def __repr__(self) -> str:
        return f"Stream({self.storage!r}, {self.name!r})"


class Consumer:
    """A consumer group of a ``Stream``: fetch, then ack (or nack, or reject) each message."""

    def __init__(
        self, stream: Stream, name: str, visibility_timeout: float, max_attempts: int
    ) -> None:
        self.stream = stream
        self.name = name
        self.visibility_timeout = float(visibility_timeout)
        self.max_attempts = max_attempts

    def fetch(self, limit: int = 10, *, worker: str = "", block: float = 0.0) -> list[Message]:
        """Up to ``limit`` messages: redeliveries whose visibility timeout passed, then new ones.

        A message already delivered ``max_attempts`` times without an ack is moved to the
        dead letters (reason ``max_attempts``) instead of being delivered again.

        Args:
            limit: the most messages to return (>= 1).
            worker: who fetches (kept in each message's delivery history).
            block: when nothing is due, wait up to this many seconds for an append (or a
                redelivery coming due) instead of returning at once; ``[]`` at the limit.
                The wait is the backend's: a condition variable (memory), ``PRAGMA
                data_version`` polled every 5 ms (SQLite), ``LISTEN`` (PostgreSQL),
                ``XREAD BLOCK`` (Redis).

        Raises:
            ConfigError: ``limit`` < 1 or ``block`` not a finite number of seconds >= 0.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"fetch limit must be an integer >= 1, got {limit!r}")
        wait = check_seconds("fetch block", block)
        deadline = time.monotonic() + wait
        log = self.stream.log
        while True:
            seen = log.last_seq()
            got = self._claim(limit, worker)
            left = deadline - time.monotonic()
            if got or left <= 0:
                return got
            due = log.next_visible(self.name)
            if due is not None:  # a redelivery comes due before the deadline: wake for it
                left = min(left, max(0.0, due - self.stream.clock.now()))
            if left > 0:
                log.wait(seen, left)
            if time.monotonic() >= deadline:
                return self._claim(limit, worker)

    def _claim(self, limit: int, worker: str) -> list[Message]:
        claimed = self.stream.log.claim(
            self.name,
            limit=limit,
            now=self.stream.clock.now(),
            visibility_timeout=self.visibility_timeout,
            max_attempts=self.max_attempts,
            worker=worker,
        )
        return [
            Message(c.record.seq, c.record.message_id, loads(c.record.payload), c.attempt)
            for c in claimed
        ]

    def ack(self, message: Message | int) -> bool:
        """Mark a message handled; False if it was not pending (already acked or dead)."""
        seq = message.seq if isinstance(message, Message) else message
        return self.stream.log.ack(self.name, seq)

    def ack_many(self, messages: list[Message] | list[int]) -> int:
        """Ack a batch in one transaction (one commit); returns how many were still pending.

        Cheaper than one ``ack`` per message on a file or server, where each ack is a commit.
        """
        seqs = [m.seq if isinstance(m, Message) else m for m in messages]
        return self.stream.log.ack_many(self.name, seqs)

    def nack(self, message: Message | int, delay: float = 0.0) -> bool:
        """Give a message back for redelivery after ``delay`` seconds (it counts as an attempt)."""
        seq = message.seq if isinstance(message, Message) else message
        return self.stream.log.nack(self.name, seq, now=self.stream.clock.now(), delay=delay)

    def reject(self, message: Message | int, reason: str = "rejected") -> bool:
        """Move a message straight to the dead letters with ``reason`` (a poison message)."""
        seq = message.seq if isinstance(message, Message) else message
        return self.stream.log.reject(self.name, seq, reason=reason, now=self.stream.clock.now())

    def dead_letters(self) -> list[DeadLetter]:
        """The dead letters of this group, oldest first, with reason and delivery history."""
        return self.stream.dead_letters(self.name)

    def redrive(self, seqs: list[int] | None = None) -> int:
        """Put dead letters (all, or those in ``seqs``) back for delivery with fresh attempts."""
        return self.stream.log.redrive(self.name, seqs, now=self.stream.clock.now())

    @property
    def position(self) -> int:
        """The last sequence number handed to this group."""
        return self.stream.log.position(self.name)

    @property
    def pending(self) -> int:
        """Messages delivered and not yet acked (dead letters excluded)."""
        return self.stream.log.pending(self.name)

    @property
    def lag(self) -> int:
        """Messages appended and not yet handed to this group (the last seq - position)."""
        return max(0, self.stream.log.last_seq() - self.position)

    def stats(self) -> ConsumerStats:
        """This group's position, pending, dead letters and lag, read together."""
        for c in self.stream.log.stats().consumers:
            if c.name == self.name:
                return c
        return ConsumerStats(self.name, 0, 0, 0, self.stream.log.last_seq())

    def __repr__(self) -> str:
        return f"Consumer({self.stream.name!r}, {self.name!r})"
