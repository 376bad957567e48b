"""In-memory ``StreamLog``: an append-only list with ids and consumer positions."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ...errors import DuplicateMessageError
from ..base import (
    DEFAULT_MAX_VALUE_BYTES,
    ClaimedMessage,
    DeadRecord,
    StreamRecord,
    check_range,
    check_size,
    stream_conflict,
)

__all__ = ["MemoryStream"]


@dataclass(slots=True)
class _Pending:
    attempts: int
    visible_at: float
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _Consumer:
    position: int = 0
    pending: dict[int, _Pending] = field(default_factory=dict)
    dead: dict[int, DeadRecord] = field(default_factory=dict)


class MemoryStream:
    """One stream in memory; every method holds one lock.

    Args:
        name: the stream's name (shown in errors).
        max_value_bytes: the largest payload accepted (0: no limit).
        url: the storage URL (shown in errors).
    """

    def __init__(
        self, name: str, *, max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES, url: str = "memory://"
    ) -> None:
        self.name = name
        self.max_value_bytes = max_value_bytes
        self.url = url
        self._records: list[StreamRecord] = []
        self._by_id: dict[str, StreamRecord] = {}
        self._consumers: dict[str, _Consumer] = {}
        self._lock = threading.Lock()

    def append(
        self, message_id: str, payload: str, *, now: float, expect_last_seq: int | None = None
    ) -> StreamRecord:
        check_size(
            self.url,
            f"message {message_id!r} of stream {self.name!r}",
            payload,
            self.max_value_bytes,
        )
        with self._lock:
            old = self._by_id.get(message_id)
            if old is not None:
                if old.payload != payload:
                    raise DuplicateMessageError(message_id, self.name)
                return StreamRecord(old.seq, old.message_id, old.payload, old.appended_at, True)
            last = len(self._records)
            if expect_last_seq is not None and expect_last_seq != last:
                raise stream_conflict(self.name, expect_last_seq, last)
            rec = StreamRecord(last + 1, message_id, payload, now)
            self._records.append(rec)
            self._by_id[message_id] = rec
            return rec

    def last_seq(self) -> int:
        return len(self._records)

    def range(self, after: int = 0, limit: int = 100) -> list[StreamRecord]:
        check_range(self.name, after, limit)
        return self._records[after : after + limit]

    def _consumer(self, consumer: str) -> _Consumer:
        c = self._consumers.get(consumer)
        if c is None:
            c = self._consumers[consumer] = _Consumer()
        return c

    def claim(
        self,
        consumer: str,
        *,
        limit: int,
        now: float,
        visibility_timeout: float,
        max_attempts: int,
        worker: str = "",
    ) -> list[ClaimedMessage]:
        with self._lock:
            c = self._consumer(consumer)
            out: list[ClaimedMessage] = []
            for seq in sorted(c.pending):
                if len(out) >= limit:
                    break
                p = c.pending[seq]
                if p.visible_at > now:
                    continue
                rec = self._records[seq - 1]
                if p.attempts >= max_attempts:
                    del c.pending[seq]
                    c.dead[seq] = DeadRecord(rec, consumer, "max_attempts", p.attempts, p.history)
                    continue
                p.attempts += 1
                p.visible_at = now + visibility_timeout
                p.history.append({"attempt": p.attempts, "at": now, "worker": worker})
                out.append(ClaimedMessage(rec, p.attempts))
            while len(out) < limit and c.position < len(self._records):
                rec = self._records[c.position]
                c.position += 1
                hist = [{"attempt": 1, "at": now, "worker": worker}]
                c.pending[rec.seq] = _Pending(1, now + visibility_timeout, hist)
                out.append(ClaimedMessage(rec, 1))
            return out

    def ack(self, consumer: str, seq: int) -> bool:
        with self._lock:
            return self._consumer(consumer).pending.pop(seq, None) is not None

    def ack_many(self, consumer: str, seqs: list[int]) -> int:
        with self._lock:
            pending = self._consumer(consumer).pending
            return sum(pending.pop(seq, None) is not None for seq in set(seqs))

    def nack(self, consumer: str, seq: int, *, now: float, delay: float = 0.0) -> bool:
        with self._lock:
            p = self._consumer(consumer).pending.get(seq)
            if p is None:
                return False
            p.visible_at = now + delay
            return True

    def reject(self, consumer: str, seq: int, *, reason: str, now: float) -> bool:
        with self._lock:
            c = self._consumer(consumer)
            p = c.pending.pop(seq, None)
            if p is None:
                return False
            p.history.append({"rejected": reason, "at": now})
            c.dead[seq] = DeadRecord(
                self._records[seq - 1], consumer, reason, p.attempts, p.history
            )
            return True

    def dead_letters(self, consumer: str) -> list[DeadRecord]:
        with self._lock:
            c = self._consumer(consumer)
            return [c.dead[s] for s in sorted(c.dead)]

    def redrive(self, consumer: str, seqs: list[int] | None, *, now: float) -> int:
        with self._lock:
            c = self._consumer(consumer)
            chosen = sorted(c.dead) if seqs is None else sorted(set(seqs) & c.dead.keys())
            for seq in chosen:
                d = c.dead.pop(seq)
                hist = [*d.history, {"redriven_at": now, "reason": d.reason}]
                c.pending[seq] = _Pending(0, now, hist)
            return len(chosen)

    def position(self, consumer: str) -> int:
        return self._consumer(consumer).position

    def pending(self, consumer: str) -> int:
        return len(self._consumer(consumer).pending)

    def __repr__(self) -> str:
        return f"MemoryStream({self.name!r}, messages={len(self._records)})"
