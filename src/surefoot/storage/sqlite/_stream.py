"""SQLite ``StreamLog``: an append-only log with ids, consumer cursors, leases and dead letters.

An append is one ``INSERT … SELECT MAX(seq) + 1 … HAVING … ON CONFLICT (message_id) DO
NOTHING`` under ``BEGIN IMMEDIATE``: the id check, the ``expect_last_seq`` check and the
insert cannot be split by another process. A claim is one short transaction that redelivers
expired deliveries, dead-letters those past ``max_attempts``, and hands out new messages.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ...codec import dumps, loads
from ...errors import DuplicateMessageError
from ..base import ClaimedMessage, DeadRecord, StreamRecord, check_range, stream_conflict
from ._db import SQLiteDB

__all__ = ["SQLiteStream"]

MIGRATIONS = [
    """
    CREATE TABLE sf_stream (
        stream TEXT NOT NULL, seq INTEGER NOT NULL, message_id TEXT NOT NULL,
        payload TEXT NOT NULL, appended_at REAL NOT NULL,
        PRIMARY KEY (stream, seq), UNIQUE (stream, message_id)
    );
    CREATE TABLE sf_stream_cursor (
        stream TEXT NOT NULL, consumer TEXT NOT NULL, position INTEGER NOT NULL,
        PRIMARY KEY (stream, consumer)
    );
    CREATE TABLE sf_stream_pending (
        stream TEXT NOT NULL, consumer TEXT NOT NULL, seq INTEGER NOT NULL,
        attempts INTEGER NOT NULL, visible_at REAL NOT NULL,
        state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', history TEXT NOT NULL,
        PRIMARY KEY (stream, consumer, seq)
    );
    CREATE INDEX sf_stream_pending_due ON sf_stream_pending (stream, consumer, state, visible_at)
    """,
]

# The bare MAX() subquery reads one index entry (a MAX wrapped in an aggregate query with
# HAVING would scan the whole stream on every append).
_APPEND = """
INSERT INTO sf_stream (stream, seq, message_id, payload, appended_at)
SELECT :s, last + 1, :id, :payload, :now
FROM (SELECT COALESCE((SELECT MAX(seq) FROM sf_stream WHERE stream = :s), 0) AS last)
WHERE :expect IS NULL OR last = :expect
ON CONFLICT (stream, message_id) DO NOTHING
RETURNING seq, message_id, payload, appended_at
"""
_REC = "SELECT seq, message_id, payload, appended_at FROM sf_stream WHERE stream = ?"


def _rec(row: tuple[Any, ...] | sqlite3.Row, duplicate: bool = False) -> StreamRecord:
    return StreamRecord(int(row[0]), str(row[1]), str(row[2]), float(row[3]), duplicate)


class SQLiteStream:
    """One named stream in a SQLite file shared by many processes.

    Args:
        db: the file (``SQLiteDB``).
        name: the stream's name.
    """

    def __init__(self, db: SQLiteDB, name: str) -> None:
        self.db = db
        self.name = name
        db.migrate("stream", MIGRATIONS)

    def append(
        self, message_id: str, payload: str, *, now: float, expect_last_seq: int | None = None
    ) -> StreamRecord:
        p = {"s": self.name, "id": message_id, "payload": payload, "now": now}
        with self.db.write() as c:
            row = c.execute(_APPEND, {**p, "expect": expect_last_seq}).fetchone()
            if row is not None:
                return _rec(row)
            old = c.execute(_REC + " AND message_id = ?", (self.name, message_id)).fetchone()
            if old is not None:
                if old[2] != payload:
                    raise DuplicateMessageError(message_id, self.name)
                return _rec(old, duplicate=True)
            last = (
                c.execute(
                    "SELECT MAX(seq) FROM sf_stream WHERE stream = ?", (self.name,)
                ).fetchone()[0]
                or 0
            )
            raise stream_conflict(self.name, int(expect_last_seq or 0), last)

    def last_seq(self) -> int:
        row = (
            self.db.conn()
            .execute("SELECT MAX(seq) FROM sf_stream WHERE stream = ?", (self.name,))
            .fetchone()
        )
        return int(row[0] or 0)

    def range(self, after: int = 0, limit: int = 100) -> list[StreamRecord]:
        check_range(self.name, after, limit)
        rows = (
            self.db.conn()
            .execute(_REC + " AND seq > ? ORDER BY seq LIMIT ?", (self.name, after, limit))
            .fetchall()
        )
        return [_rec(r) for r in rows]

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
        out: list[ClaimedMessage] = []
        key = (self.name, consumer)
        with self.db.write() as c:
            due = c.execute(
                "SELECT p.seq, p.attempts, p.history, s.message_id, s.payload, s.appended_at "
                "FROM sf_stream_pending p JOIN sf_stream s "
                "ON s.stream = p.stream AND s.seq = p.seq "
                "WHERE p.stream = ? AND p.consumer = ? AND p.state = 'pending' "
                "AND p.visible_at <= ? ORDER BY p.seq",
                (*key, now),
            ).fetchall()
            for seq, attempts, hist, mid, payload, at in due:
                if len(out) >= limit:
                    break
                if attempts >= max_attempts:
                    c.execute(
                        "UPDATE sf_stream_pending SET state = 'dead', reason = 'max_attempts' "
                        "WHERE stream = ? AND consumer = ? AND seq = ?",
                        (*key, seq),
                    )
                    continue
                history = [*loads(hist), {"attempt": attempts + 1, "at": now, "worker": worker}]
                c.execute(
                    "UPDATE sf_stream_pending SET attempts = ?, visible_at = ?, history = ? "
                    "WHERE stream = ? AND consumer = ? AND seq = ?",
                    (attempts + 1, now + visibility_timeout, dumps(history), *key, seq),
                )
                out.append(ClaimedMessage(StreamRecord(seq, mid, payload, at), attempts + 1))
            if len(out) < limit:
                row = c.execute(
                    "SELECT position FROM sf_stream_cursor WHERE stream = ? AND consumer = ?", key
                ).fetchone()
                position = row[0] if row else 0
                fresh = c.execute(
                    _REC + " AND seq > ? ORDER BY seq LIMIT ?",
                    (self.name, position, limit - len(out)),
                ).fetchall()
                if fresh:
                    first = dumps([{"attempt": 1, "at": now, "worker": worker}])
                    c.executemany(
                        "INSERT INTO sf_stream_pending (stream, consumer, seq, attempts, "
                        "visible_at, state, history) VALUES (?, ?, ?, 1, ?, 'pending', ?)",
                        [(*key, r[0], now + visibility_timeout, first) for r in fresh],
                    )
                    c.execute(
                        "INSERT INTO sf_stream_cursor (stream, consumer, position) "
                        "VALUES (?, ?, ?) "
                        "ON CONFLICT (stream, consumer) DO UPDATE SET position = excluded.position",
                        (*key, fresh[-1][0]),
                    )
                    out += [ClaimedMessage(_rec(r), 1) for r in fresh]
        return out

    def _change(self, sql: str, args: tuple[Any, ...]) -> bool:
        with self.db.write() as c:
            return c.execute(sql, args).rowcount > 0

    def ack(self, consumer: str, seq: int) -> bool:
        return self._change(
            "DELETE FROM sf_stream_pending WHERE stream = ? AND consumer = ? AND seq = ? "
            "AND state = 'pending'",
            (self.name, consumer, seq),
        )

    def ack_many(self, consumer: str, seqs: list[int]) -> int:
        if not seqs:
            return 0
        with self.db.write() as c:
            return c.executemany(
                "DELETE FROM sf_stream_pending WHERE stream = ? AND consumer = ? AND seq = ? "
                "AND state = 'pending'",
                [(self.name, consumer, int(seq)) for seq in sorted(set(seqs))],
            ).rowcount

    def nack(self, consumer: str, seq: int, *, now: float, delay: float = 0.0) -> bool:
        return self._change(
            "UPDATE sf_stream_pending SET visible_at = ? WHERE stream = ? AND consumer = ? "
            "AND seq = ? AND state = 'pending'",
            (now + delay, self.name, consumer, seq),
        )

    def reject(self, consumer: str, seq: int, *, reason: str, now: float) -> bool:
        with self.db.write() as c:
            row = c.execute(
                "SELECT history FROM sf_stream_pending WHERE stream = ? AND consumer = ? "
                "AND seq = ? AND state = 'pending'",
                (self.name, consumer, seq),
            ).fetchone()
            if row is None:
                return False
            history = [*loads(row[0]), {"rejected": reason, "at": now}]
            c.execute(
                "UPDATE sf_stream_pending SET state = 'dead', reason = ?, history = ? "
                "WHERE stream = ? AND consumer = ? AND seq = ?",
                (reason, dumps(history), self.name, consumer, seq),
            )
            return True

    def dead_letters(self, consumer: str) -> list[DeadRecord]:
        rows = (
            self.db.conn()
            .execute(
                "SELECT s.seq, s.message_id, s.payload, s.appended_at, p.reason, p.attempts, "
                "p.history FROM sf_stream_pending p JOIN sf_stream s ON s.stream = p.stream "
                "AND s.seq = p.seq WHERE p.stream = ? AND p.consumer = ? AND p.state = 'dead' "
                "ORDER BY p.seq",
                (self.name, consumer),
            )
            .fetchall()
        )
        return [DeadRecord(_rec(r[:4]), consumer, r[4], r[5], loads(r[6])) for r in rows]

    def redrive(self, consumer: str, seqs: list[int] | None, *, now: float) -> int:
        with self.db.write() as c:
            rows = c.execute(
                "SELECT seq, reason, history FROM sf_stream_pending WHERE stream = ? "
                "AND consumer = ? AND state = 'dead' ORDER BY seq",
                (self.name, consumer),
            ).fetchall()
            chosen = [r for r in rows if seqs is None or r[0] in seqs]
            for seq, reason, hist in chosen:
                history = [*loads(hist), {"redriven_at": now, "reason": reason}]
                c.execute(
                    "UPDATE sf_stream_pending SET state = 'pending', reason = '', attempts = 0, "
                    "visible_at = ?, history = ? WHERE stream = ? AND consumer = ? AND seq = ?",
                    (now, dumps(history), self.name, consumer, seq),
                )
            return len(chosen)

    def position(self, consumer: str) -> int:
        row = (
            self.db.conn()
            .execute(
                "SELECT position FROM sf_stream_cursor WHERE stream = ? AND consumer = ?",
                (self.name, consumer),
            )
            .fetchone()
        )
        return int(row[0]) if row else 0

    def pending(self, consumer: str) -> int:
        row = (
            self.db.conn()
            .execute(
                "SELECT COUNT(*) FROM sf_stream_pending WHERE stream = ? AND consumer = ? "
                "AND state = 'pending'",
                (self.name, consumer),
            )
            .fetchone()
        )
        return int(row[0])

    def __repr__(self) -> str:
        return f"SQLiteStream({self.db.path!r}, {self.name!r})"
