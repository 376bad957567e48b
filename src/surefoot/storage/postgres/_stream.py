"""PostgreSQL ``StreamLog``: the shared SQL stream (:mod:`surefoot.storage.sql.stream`) plus
what only PostgreSQL does: its migrations (with a PL/pgSQL append), the append itself,
``last_seq`` from the head row, and a claim that locks the consumer's cursor row.

An append is one call of ``sf_stream_append(…)`` (one round trip): it locks the stream's head
row, so appends to one stream take turns and every later statement sees the others' work;
then it deduplicates by message id, checks ``expect_last_seq`` and inserts at ``last + 1``.
Sequence numbers have no gaps and no duplicates across processes and machines.

A claim is one transaction that locks the consumer's cursor row (claims of one consumer take
turns, as under SQLite's write lock) and the due pending rows, redelivers expired deliveries,
dead-letters those past ``max_attempts`` and hands out new messages: the statements are the
SQLite backend's, written once; the contract suite runs both.
"""

from __future__ import annotations

from typing import Any

from ...errors import DuplicateMessageError
from ..base import StreamRecord, stream_conflict
from ..sql.stream import SQLStream
from ._db import PostgresDB
from ._dialect import PostgresDialect

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


class PostgresStream(SQLStream):
    """One named stream in PostgreSQL, shared by agents in many processes and machines.

    Args:
        db: the database (``PostgresDB``).
        name: the stream's name.
    """

    def __init__(self, db: PostgresDB, name: str) -> None:
        self.db = db
        db.migrate("stream", MIGRATIONS)
        super().__init__(PostgresDialect(db), name)

    def append(
        self, message_id: str, payload: str, *, now: float, expect_last_seq: int | None = None
    ) -> StreamRecord:
        self._check_payload(message_id, payload)
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

    def _claim_position(self, c: Any, consumer: str) -> int:
        # Create-or-lock the cursor row: claims of one consumer take turns from here on.
        row = c.execute(
            "INSERT INTO sf_stream_cursor AS c (stream, consumer, position) "
            "VALUES (%s, %s, 0) ON CONFLICT (stream, consumer) "
            "DO UPDATE SET position = c.position RETURNING c.position",
            (self.name, consumer),
        ).fetchone()
        return int(row[0])

    def __repr__(self) -> str:
        return f"PostgresStream({self.db.url!r}, {self.name!r})"
