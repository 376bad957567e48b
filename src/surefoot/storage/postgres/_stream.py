"""PostgreSQL ``StreamLog``: an append-only log with ids, consumer cursors, leases, dead letters.

An append is one call of ``sf_stream_append(…)`` (one round trip): it locks the stream's head
row, so appends to one stream take turns and every later statement sees the others' work;
then it deduplicates by message id, checks ``expect_last_seq`` and inserts at ``last + 1``.
Sequence numbers have no gaps and no duplicates across processes and machines.

A claim is one transaction that locks the consumer's cursor row (claims of one consumer take
turns, as under SQLite's write lock) and the due pending rows, redelivers expired deliveries,
dead-letters those past ``max_attempts`` and hands out new messages. The behaviour mirrors the
SQLite backend statement for statement; the contract suite runs both.
"""

from __future__ import annotations

from typing import Any

from ...codec import dumps, loads
from ...errors import DuplicateMessageError
from ..base import ClaimedMessage, DeadRecord, StreamRecord, check_range, stream_conflict
from ._db import PostgresDB

__all__ = ["MIGRATIONS", "PostgresStream"]

MIGRATIONS = [
    """
    CREATE TABLE sf_stream (
        stream TEXT NOT NULL, seq BIGINT NOT NULL, message_id TEXT NOT NULL,
        payload TEXT NOT NULL, appended_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (stream, seq), UNIQUE (stream, message_id)
    );
    CREATE TABLE sf_stream_head (stream TEXT PRIMARY KEY, last_seq BIGINT NOT NULL);
    CREATE TABLE sf_stream_cursor (
        stream TEXT NOT NULL, consumer TEXT NOT NULL, position BIGINT NOT NULL,
        PRIMARY KEY (stream, consumer)
    );
    CREATE TABLE sf_stream_pending (
        stream TEXT NOT NULL, consumer TEXT NOT NULL, seq BIGINT NOT NULL,
        attempts INTEGER NOT NULL, visible_at DOUBLE PRECISION NOT NULL,
        state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', history TEXT NOT NULL,
        PRIMARY KEY (stream, consumer, seq)
    );
    CREATE INDEX sf_stream_pending_due ON sf_stream_pending (stream, consumer, state, visible_at);
    CREATE FUNCTION sf_stream_append(
        p_stream TEXT, p_id TEXT, p_payload TEXT, p_now DOUBLE PRECISION, p_expect BIGINT)
    RETURNS TABLE (o_kind TEXT, o_seq BIGINT, o_payload TEXT, o_at DOUBLE PRECISION)
    LANGUAGE plpgsql AS $$
    DECLARE
        last BIGINT;
        old RECORD;
    BEGIN
        INSERT INTO sf_stream_head AS h (stream, last_seq) VALUES (p_stream, 0)
        ON CONFLICT (stream) DO UPDATE SET last_seq = h.last_seq  -- locks the stream
        RETURNING h.last_seq INTO last;
        SELECT s.seq, s.payload, s.appended_at INTO old
        FROM sf_stream s WHERE s.stream = p_stream AND s.message_id = p_id;
        IF FOUND THEN
            RETURN QUERY SELECT 'dup', old.seq, old.payload, old.appended_at;
            RETURN;
        END IF;
        IF p_expect IS NOT NULL AND p_expect <> last THEN
            RETURN QUERY SELECT 'conflict', last, NULL::TEXT, NULL::DOUBLE PRECISION;
            RETURN;
        END IF;
        UPDATE sf_stream_head SET last_seq = last + 1 WHERE stream = p_stream;
        INSERT INTO sf_stream (stream, seq, message_id, payload, appended_at)
        VALUES (p_stream, last + 1, p_id, p_payload, p_now);
        RETURN QUERY SELECT 'ok', last + 1, p_payload, p_now;
    END;
    $$
    """,
]

_REC = "SELECT seq, message_id, payload, appended_at FROM sf_stream WHERE stream = %s"


def _rec(row: tuple[Any, ...], duplicate: bool = False) -> StreamRecord:
    return StreamRecord(int(row[0]), str(row[1]), str(row[2]), float(row[3]), duplicate)


class PostgresStream:
    """One named stream in PostgreSQL, shared by agents in many processes and machines.

    Args:
        db: the database (``PostgresDB``).
        name: the stream's name.
    """

    def __init__(self, db: PostgresDB, name: str) -> None:
        self.db = db
        self.name = name
        db.migrate("stream", MIGRATIONS)

    def append(
        self, message_id: str, payload: str, *, now: float, expect_last_seq: int | None = None
    ) -> StreamRecord:
        rows = self.db.execute(
            "SELECT * FROM sf_stream_append(%s, %s, %s, %s, %s)",
            (self.name, message_id, payload, float(now), expect_last_seq),
            idempotent=True,  # a retry finds its own message id and returns it
        )
        kind, seq, old_payload, at = rows[0]
        if kind == "ok":
            return StreamRecord(int(seq), message_id, payload, float(now))
        if kind == "dup":
            if old_payload != payload:
                raise DuplicateMessageError(message_id, self.name)
            return StreamRecord(int(seq), message_id, old_payload, float(at), True)
        raise stream_conflict(self.name, int(expect_last_seq or 0), int(seq))

    def last_seq(self) -> int:
        rows = self.db.execute(
            "SELECT last_seq FROM sf_stream_head WHERE stream = %s", (self.name,), write=False
        )
        return int(rows[0][0]) if rows else 0

    def range(self, after: int = 0, limit: int = 100) -> list[StreamRecord]:
        check_range(self.name, after, limit)
        rows = self.db.execute(
            _REC + " AND seq > %s ORDER BY seq LIMIT %s",
            (self.name, after, limit),
            write=False,
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
        key = (self.name, consumer)

        def work(conn: Any) -> list[ClaimedMessage]:
            out: list[ClaimedMessage] = []
            position = conn.execute(
                "INSERT INTO sf_stream_cursor AS c (stream, consumer, position) "
                "VALUES (%s, %s, 0) ON CONFLICT (stream, consumer) "
                "DO UPDATE SET position = c.position RETURNING c.position",
                key,
            ).fetchone()[0]
            due = conn.execute(
                "SELECT p.seq, p.attempts, p.history, s.message_id, s.payload, s.appended_at "
                "FROM sf_stream_pending p JOIN sf_stream s "
                "ON s.stream = p.stream AND s.seq = p.seq "
                "WHERE p.stream = %s AND p.consumer = %s AND p.state = 'pending' "
                "AND p.visible_at <= %s ORDER BY p.seq FOR UPDATE OF p",
                (*key, now),
            ).fetchall()
            for seq, attempts, hist, mid, payload, at in due:
                if len(out) >= limit:
                    break
                if attempts >= max_attempts:
                    conn.execute(
                        "UPDATE sf_stream_pending SET state = 'dead', reason = 'max_attempts' "
                        "WHERE stream = %s AND consumer = %s AND seq = %s",
                        (*key, seq),
                    )
                    continue
                history = [*loads(hist), {"attempt": attempts + 1, "at": now, "worker": worker}]
                conn.execute(
                    "UPDATE sf_stream_pending SET attempts = %s, visible_at = %s, history = %s "
                    "WHERE stream = %s AND consumer = %s AND seq = %s",
                    (attempts + 1, now + visibility_timeout, dumps(history), *key, seq),
                )
                out.append(ClaimedMessage(StreamRecord(seq, mid, payload, at), attempts + 1))
            if len(out) < limit:
                fresh = conn.execute(
                    _REC + " AND seq > %s ORDER BY seq LIMIT %s",
                    (self.name, position, limit - len(out)),
                ).fetchall()
                if fresh:
                    first = dumps([{"attempt": 1, "at": now, "worker": worker}])
                    with conn.cursor() as cur:
                        cur.executemany(
                            "INSERT INTO sf_stream_pending (stream, consumer, seq, attempts, "
                            "visible_at, state, history) VALUES (%s, %s, %s, 1, %s, 'pending', %s)",
                            [(*key, r[0], now + visibility_timeout, first) for r in fresh],
                        )
                    conn.execute(
                        "UPDATE sf_stream_cursor SET position = %s "
                        "WHERE stream = %s AND consumer = %s",
                        (fresh[-1][0], *key),
                    )
                    out += [ClaimedMessage(_rec(r), 1) for r in fresh]
            return out

        return self.db.run(work, tx=True)

    def _change(self, sql: str, args: tuple[Any, ...]) -> bool:
        def one(conn: Any) -> bool:
            return bool(conn.execute(sql, args).rowcount > 0)

        return self.db.run(one)

    def ack(self, consumer: str, seq: int) -> bool:
        return self._change(
            "DELETE FROM sf_stream_pending WHERE stream = %s AND consumer = %s AND seq = %s "
            "AND state = 'pending'",
            (self.name, consumer, seq),
        )

    def ack_many(self, consumer: str, seqs: list[int]) -> int:
        if not seqs:
            return 0

        def one(conn: Any) -> int:
            return int(
                conn.execute(
                    "DELETE FROM sf_stream_pending WHERE stream = %s AND consumer = %s "
                    "AND seq = ANY(%s) AND state = 'pending'",
                    (self.name, consumer, sorted({int(s) for s in seqs})),
                ).rowcount
            )

        return self.db.run(one)

    def nack(self, consumer: str, seq: int, *, now: float, delay: float = 0.0) -> bool:
        return self._change(
            "UPDATE sf_stream_pending SET visible_at = %s WHERE stream = %s AND consumer = %s "
            "AND seq = %s AND state = 'pending'",
            (now + delay, self.name, consumer, seq),
        )

    def reject(self, consumer: str, seq: int, *, reason: str, now: float) -> bool:
        def work(conn: Any) -> bool:
            row = conn.execute(
                "SELECT history FROM sf_stream_pending WHERE stream = %s AND consumer = %s "
                "AND seq = %s AND state = 'pending' FOR UPDATE",
                (self.name, consumer, seq),
            ).fetchone()
            if row is None:
                return False
            history = [*loads(row[0]), {"rejected": reason, "at": now}]
            conn.execute(
                "UPDATE sf_stream_pending SET state = 'dead', reason = %s, history = %s "
                "WHERE stream = %s AND consumer = %s AND seq = %s",
                (reason, dumps(history), self.name, consumer, seq),
            )
            return True

        return self.db.run(work, tx=True)

    def dead_letters(self, consumer: str) -> list[DeadRecord]:
        rows = self.db.execute(
            "SELECT s.seq, s.message_id, s.payload, s.appended_at, p.reason, p.attempts, "
            "p.history FROM sf_stream_pending p JOIN sf_stream s ON s.stream = p.stream "
            "AND s.seq = p.seq WHERE p.stream = %s AND p.consumer = %s AND p.state = 'dead' "
            "ORDER BY p.seq",
            (self.name, consumer),
            write=False,
        )
        return [DeadRecord(_rec(r[:4]), consumer, r[4], r[5], loads(r[6])) for r in rows]

    def redrive(self, consumer: str, seqs: list[int] | None, *, now: float) -> int:
        def work(conn: Any) -> int:
            rows = conn.execute(
                "SELECT seq, reason, history FROM sf_stream_pending WHERE stream = %s "
                "AND consumer = %s AND state = 'dead' ORDER BY seq FOR UPDATE",
                (self.name, consumer),
            ).fetchall()
            chosen = [r for r in rows if seqs is None or r[0] in seqs]
            for seq, reason, hist in chosen:
                history = [*loads(hist), {"redriven_at": now, "reason": reason}]
                conn.execute(
                    "UPDATE sf_stream_pending SET state = 'pending', reason = '', attempts = 0, "
                    "visible_at = %s, history = %s WHERE stream = %s AND consumer = %s "
                    "AND seq = %s",
                    (now, dumps(history), self.name, consumer, seq),
                )
            return len(chosen)

        return self.db.run(work, tx=True)

    def position(self, consumer: str) -> int:
        rows = self.db.execute(
            "SELECT position FROM sf_stream_cursor WHERE stream = %s AND consumer = %s",
            (self.name, consumer),
            write=False,
        )
        return int(rows[0][0]) if rows else 0

    def pending(self, consumer: str) -> int:
        rows = self.db.execute(
            "SELECT COUNT(*) FROM sf_stream_pending WHERE stream = %s AND consumer = %s "
            "AND state = 'pending'",
            (self.name, consumer),
            write=False,
        )
        return int(rows[0][0])

    def __repr__(self) -> str:
        return f"PostgresStream({self.db.url!r}, {self.name!r})"
