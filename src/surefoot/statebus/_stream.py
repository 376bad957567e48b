"""``Stream``: an append-only log with message ids, consumers, acks, redelivery, dead letters.

A retried append with the same id and payload is deduplicated (for as long as the stream
keeps the message, not for a few minutes); the same id with another payload is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import storage as _storage
from ..clock import Clock, SystemClock
from ..codec import dumps, loads
from ..errors import ConfigError
from ..storage.base import StreamLog, StreamRecord, check_text

__all__ = ["Consumer", "DeadLetter", "Message", "Stream", "StreamEntry"]


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


def _entry(r: StreamRecord) -> StreamEntry:
    return StreamEntry(r.seq, r.message_id, loads(r.payload), r.appended_at, r.duplicate)


class Stream:
    """A named stream in a storage URL (SQLite: many processes on one file).

    Args:
        url: a storage URL or an opened ``Storage``.
        name: the stream's name.
        clock: time for visibility timeouts (``SystemClock`` by default).
    """

    def __init__(self, url: str | Any, name: str, clock: Clock | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a stream name must be a non-empty string, got {name!r}")
        check_text("stream name", name)
        if isinstance(url, str):
            self.storage: Any = _storage.open(url)
        elif hasattr(url, "stream"):
            self.storage = url
        else:
            raise ConfigError(f"Stream needs a storage URL or a Storage, got {url!r}")
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
        rec = self.log.append(
            message_id, text, now=self.clock.now(), expect_last_seq=expect_last_seq
        )
        return _entry(rec)

    @property
    def last_seq(self) -> int:
        """The sequence number of the last message (0 when empty)."""
        return self.log.last_seq()

    def read(self, after: int = 0, limit: int = 100) -> list[StreamEntry]:
        """Messages with sequence numbers after ``after``, in order (no consumer state)."""
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
        if visibility_timeout <= 0:
            raise ConfigError(f"visibility_timeout must be > 0 seconds, got {visibility_timeout!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
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

    def fetch(self, limit: int = 10, *, worker: str = "") -> list[Message]:
        """Up to ``limit`` messages: redeliveries whose visibility timeout passed, then new ones.

        A message already delivered ``max_attempts`` times without an ack is moved to the
        dead letters (reason ``max_attempts``) instead of being delivered again.
        """
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
        return [
            DeadLetter(
                d.record.seq,
                d.record.message_id,
                loads(d.record.payload),
                d.reason,
                d.attempts,
                d.history,
            )
            for d in self.stream.log.dead_letters(self.name)
        ]

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

    def __repr__(self) -> str:
        return f"Consumer({self.stream.name!r}, {self.name!r})"
