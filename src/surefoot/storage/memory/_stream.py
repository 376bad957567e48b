"""In-memory ``StreamLog``: an append-only list with ids and consumer positions.

Retention drops from the front of the list (``_first`` is the sequence number of its first
record); the ids of dropped messages are kept with a digest of their payload until their
``dedup_window`` passes. A condition variable wakes ``wait`` on every append.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

from ...errors import DuplicateMessageError
from ..checks import DEFAULT_MAX_VALUE_BYTES, check_size
from ..sql.stream import consumer_removed
from ..streams import (
    ClaimedMessage,
    ConsumerStats,
    DeadRecord,
    Retention,
    StreamRecord,
    StreamStats,
    check_range,
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
        self._first = 1  # the seq of _records[0]
        self._by_id: dict[str, StreamRecord] = {}
        self._trimmed: dict[str, tuple[int, str, float]] = {}  # id -> (seq, digest, at)
        self._consumers: dict[str, _Consumer] = {}
        self._removed: set[str] = set()  # groups remove_consumer forgot
        self._lock = threading.Lock()
        self._appended = threading.Condition(self._lock)

    def _rec(self, seq: int) -> StreamRecord:
        return self._records[seq - self._first]

    def _last(self) -> int:
        return self._first + len(self._records) - 1

    def append(
        self,
        message_id: str,
        payload: str,
        *,
        now: float,
        expect_last_seq: int | None = None,
        retention: Retention | None = None,
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
            if retention is not None:  # ids past their window are forgotten first
                self._forget(now - retention.dedup_window)
            gone = self._trimmed.get(message_id)
            if gone is not None:
                if gone[1] != _digest(payload):
                    raise DuplicateMessageError(message_id, self.name)
                return StreamRecord(gone[0], message_id, payload, gone[2], True)
            last = self._last()
            if expect_last_seq is not None and expect_last_seq != last:
                raise stream_conflict(self.name, expect_last_seq, last)
            rec = StreamRecord(last + 1, message_id, payload, now)
            self._records.append(rec)
            self._by_id[message_id] = rec
            if retention is not None:
                self._trim(retention, now)
            self._appended.notify_all()
            return rec

    def append_many(self, items: list[tuple[str, str]], *, now: float) -> list[StreamRecord]:
        """Append ``items`` in order, all or nothing (``StreamBatches.append_many``)."""
        for message_id, payload in items:
            what = f"message {message_id!r} of stream {self.name!r}"
            check_size(self.url, what, payload, self.max_value_bytes)
        with self._lock:
            for message_id, payload in items:  # refuse before anything is appended
                old = self._by_id.get(message_id)
                gone = self._trimmed.get(message_id)
                if (old is not None and old.payload != payload) or (
                    old is None and gone is not None and gone[1] != _digest(payload)
                ):
                    raise DuplicateMessageError(message_id, self.name)
            out: list[StreamRecord] = []
            for message_id, payload in items:
                old = self._by_id.get(message_id)
                if old is not None:
                    out.append(StreamRecord(old.seq, message_id, payload, old.appended_at, True))
                    continue
                gone = self._trimmed.get(message_id)
                if gone is not None:
                    out.append(StreamRecord(gone[0], message_id, payload, gone[2], True))
                    continue
                rec = StreamRecord(self._last() + 1, message_id, payload, now)
                self._records.append(rec)
                self._by_id[message_id] = rec
                out.append(rec)
            self._appended.notify_all()
            return out

    def delete(self) -> int:
        """Delete the whole stream (``StreamBatches.delete``): how many messages went."""
        with self._lock:
            n = len(self._records)
            self._first += n
            self._records.clear()
            self._by_id.clear()
            self._trimmed.clear()
            self._consumers.clear()
            self._removed.clear()
            return n

    def trim(self, retention: Retention, *, now: float) -> int:
        with self._lock:
            return self._trim(retention, now)

    def _floor(self) -> int:
        """The lowest seq some registered consumer has not settled (no trim reaches it)."""
        floor = self._last() + 1
        for c in self._consumers.values():
            floor = min(floor, c.position + 1, *c.pending, *c.dead)
        return floor

    def _trim(self, retention: Retention, now: float) -> int:
        by_len, by_age, forget = retention.cuts(self._last(), now)
        keep = by_len
        if by_age is not None:
            young = next((r.seq for r in self._records if r.appended_at >= by_age), None)
            keep = max(keep, young if young is not None else self._last() + 1)
        keep = min(keep, self._last(), self._floor())
        n = max(0, min(keep - self._first, len(self._records)))
        for rec in self._records[:n]:
            del self._by_id[rec.message_id]
            if rec.appended_at >= forget:
                self._trimmed[rec.message_id] = (rec.seq, _digest(rec.payload), rec.appended_at)
        del self._records[:n]
        self._first += n
        self._forget(forget)
        return n

    def _forget(self, before: float) -> None:
        for mid in [m for m, (_, _, at) in self._trimmed.items() if at < before]:
            del self._trimmed[mid]

    def last_seq(self) -> int:
        return self._last()

    def range(self, after: int = 0, limit: int = 100) -> list[StreamRecord]:
        check_range(self.name, after, limit)
        with self._lock:
            start = max(0, after + 1 - self._first)
            return self._records[start : start + limit]

    def register(self, consumer: str) -> None:
        with self._lock:
            if consumer not in self._consumers:
                # A removed group starts after the last message: no acked work again.
                start = self._last() if consumer in self._removed else self._first - 1
                self._consumers[consumer] = _Consumer(position=start)
                self._removed.discard(consumer)

    def remove_consumer(self, consumer: str) -> bool:
        with self._lock:
            gone = self._consumers.pop(consumer, None) is not None
            if gone:  # its worker may still claim: refuse that until it is opened again
                self._removed.add(consumer)
            return gone

    def stats(self) -> StreamStats:
        with self._lock:
            last = self._last()
            consumers = tuple(
                ConsumerStats(name, c.position, len(c.pending), len(c.dead), last - c.position)
                for name, c in sorted(self._consumers.items())
            )
            first = self._first if self._records else 0
            return StreamStats(
                self.name, len(self._records), first, last, len(self._trimmed), consumers
            )

    def next_visible(self, consumer: str) -> float | None:
        with self._lock:
            c = self._consumers.get(consumer)
            if c is None or not c.pending:
                return None
            return min(p.visible_at for p in c.pending.values())

    def wait(self, after_seq: int, timeout: float) -> bool:
        with self._appended:
            return self._appended.wait_for(lambda: self._last() > after_seq, timeout)

    def _consumer(self, consumer: str) -> _Consumer:
        """The consumer, registered by its first claim (as ``register`` would)."""
        c = self._consumers.get(consumer)
        if c is None:
            if consumer in self._removed:
                raise consumer_removed(self.name, consumer)
            c = self._consumers[consumer] = _Consumer(position=self._first - 1)
        return c

    def _known(self, consumer: str) -> _Consumer:
        """The consumer, or an empty one left unregistered (an ack registers nothing)."""
        return self._consumers.get(consumer) or _Consumer()

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
                rec = self._rec(seq)
                if p.attempts >= max_attempts:
                    del c.pending[seq]
                    c.dead[seq] = DeadRecord(rec, consumer, "max_attempts", p.attempts, p.history)
                    continue
                p.attempts += 1
                p.visible_at = now + visibility_timeout
                p.history.append({"attempt": p.attempts, "at": now, "worker": worker})
                out.append(ClaimedMessage(rec, p.attempts))
            c.position = max(c.position, self._first - 1)  # past trimmed messages
            while len(out) < limit and c.position < self._last():
                rec = self._rec(c.position + 1)
                c.position += 1
                hist = [{"attempt": 1, "at": now, "worker": worker}]
                c.pending[rec.seq] = _Pending(1, now + visibility_timeout, hist)
                out.append(ClaimedMessage(rec, 1))
            return out

    def ack(self, consumer: str, seq: int) -> bool:
        with self._lock:
            return self._known(consumer).pending.pop(seq, None) is not None

    def ack_many(self, consumer: str, seqs: list[int]) -> int:
        with self._lock:
            pending = self._known(consumer).pending
            return sum(pending.pop(seq, None) is not None for seq in set(seqs))

    def nack(self, consumer: str, seq: int, *, now: float, delay: float = 0.0) -> bool:
        with self._lock:
            p = self._known(consumer).pending.get(seq)
            if p is None:
                return False
            p.visible_at = now + delay
            return True

    def reject(self, consumer: str, seq: int, *, reason: str, now: float) -> bool:
        with self._lock:
            c = self._known(consumer)
            p = c.pending.pop(seq, None)
            if p is None:
                return False
            p.history.append({"rejected": reason, "at": now})
            c.dead[seq] = DeadRecord(self._rec(seq), consumer, reason, p.attempts, p.history)
            return True

    def dead_letters(self, consumer: str) -> list[DeadRecord]:
        with self._lock:
            c = self._known(consumer)
            return [c.dead[s] for s in sorted(c.dead)]

    def redrive(self, consumer: str, seqs: list[int] | None, *, now: float) -> int:
        with self._lock:
            c = self._known(consumer)
            chosen = sorted(c.dead) if seqs is None else sorted(set(seqs) & c.dead.keys())
            for seq in chosen:
                d = c.dead.pop(seq)
                hist = [*d.history, {"redriven_at": now, "reason": d.reason}]
                c.pending[seq] = _Pending(0, now, hist)
            return len(chosen)

    def position(self, consumer: str) -> int:
        c = self._consumers.get(consumer)
        return c.position if c is not None else 0

    def pending(self, consumer: str) -> int:
        c = self._consumers.get(consumer)
        return len(c.pending) if c is not None else 0

    def __repr__(self) -> str:
        return f"MemoryStream({self.name!r}, messages={len(self._records)})"


def _digest(payload: str) -> str:
    """What a trimmed message's id keeps of its payload: enough to tell a retry (same
    payload) from a reused id (another one)."""
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def list_streams(streams: dict[str, MemoryStream]) -> dict[str, int]:
    """Stream names (sorted) with their kept message counts."""
    return {name: streams[name].stats().messages for name in sorted(streams)}
