"""PostgreSQL ``StreamLog``: the shared SQL stream (:mod:`surefoot.storage.sql.stream`) plus
what only PostgreSQL does: its migrations (with a PL/pgSQL append), the append itself,
``last_seq`` from the head row, and a claim that locks the consumer's cursor row.

An append is one call of ``sf_stream_append(…)`` (one round trip): it locks the stream's head
row, so appends to one stream take turns and every later statement sees the others' work;
then it deduplicates by message id, checks ``expect_last_seq`` and inserts at ``last + 1``.
Sequence numbers have no gaps and no duplicates across processes and machines. Migration 2
replaces it with ``sf_stream_append2``, which also checks the ids of trimmed messages, trims
by a ``Retention`` in the same call (``sf_stream_trim``) and ``NOTIFY``s the stream's channel
so a blocked ``wait`` (``LISTEN``) wakes when the append commits.

A claim is one transaction that locks the consumer's cursor row (claims of one consumer take
turns, as under SQLite's write lock) and the due pending rows, redelivers expired deliveries,
dead-letters those past ``max_attempts`` and hands out new messages: the statements are the
SQLite backend's, written once; the contract suite runs both.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from typing import Any

from ...errors import DuplicateMessageError
from ..sql.stream import SQLStream, list_streams
from ..streams import Retention, StreamRecord, stream_conflict
from ._db import Listener, PostgresDB
from ._dialect import PostgresDialect

__all__ = ["MIGRATIONS", "PostgresStream", "postgres_streams"]

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
    # 2: trimmed ids with their dedup window, trims, and a NOTIFY per append.
    """
    CREATE TABLE sf_stream_ids (
        stream TEXT NOT NULL, message_id TEXT NOT NULL, seq BIGINT NOT NULL,
        digest TEXT NOT NULL, appended_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (stream, message_id)
    );
    CREATE INDEX sf_stream_ids_at ON sf_stream_ids (stream, appended_at);
    CREATE FUNCTION sf_stream_trim(
        p_stream TEXT, p_max BIGINT, p_age_cut DOUBLE PRECISION, p_forget DOUBLE PRECISION)
    RETURNS BIGINT LANGUAGE plpgsql AS $$
    DECLARE
        last BIGINT;
        first_seq BIGINT;
        first_at DOUBLE PRECISION;
        young BIGINT;
        lowest BIGINT;
        keep BIGINT := 0;
        n BIGINT := 0;
    BEGIN
        SELECT h.last_seq INTO last FROM sf_stream_head h WHERE h.stream = p_stream FOR UPDATE;
        DELETE FROM sf_stream_ids WHERE stream = p_stream AND appended_at < p_forget;
        IF last IS NULL OR last = 0 THEN RETURN 0; END IF;
        SELECT s.seq, s.appended_at INTO first_seq, first_at FROM sf_stream s
        WHERE s.stream = p_stream ORDER BY s.seq LIMIT 1;
        IF p_max IS NOT NULL THEN keep := last + 1 - p_max; END IF;
        IF first_seq >= keep AND (p_age_cut IS NULL OR first_at >= p_age_cut) THEN
            RETURN 0;
        END IF;
        IF p_age_cut IS NOT NULL THEN
            SELECT s.seq INTO young FROM sf_stream s
            WHERE s.stream = p_stream AND s.appended_at >= p_age_cut ORDER BY s.seq LIMIT 1;
            keep := GREATEST(keep, COALESCE(young, last));
        END IF;
        -- one statement, one snapshot: a claim's cursor move and its pending rows together
        SELECT LEAST(
            (SELECT MIN(c.position) + 1 FROM sf_stream_cursor c WHERE c.stream = p_stream),
            (SELECT MIN(p.seq) FROM sf_stream_pending p WHERE p.stream = p_stream))
        INTO lowest;
        keep := LEAST(keep, last, lowest);
        IF keep <= first_seq THEN RETURN 0; END IF;
        WITH gone AS (
            DELETE FROM sf_stream s WHERE s.stream = p_stream AND s.seq < keep
            RETURNING s.message_id, s.seq, s.payload, s.appended_at
        ), kept AS (
            INSERT INTO sf_stream_ids (stream, message_id, seq, digest, appended_at)
            SELECT p_stream, g.message_id, g.seq,
                   encode(sha256(convert_to(g.payload, 'UTF8')), 'hex'), g.appended_at
            FROM gone g WHERE g.appended_at >= p_forget
            ON CONFLICT (stream, message_id) DO NOTHING
            RETURNING 1
        )
        SELECT COUNT(*) INTO n FROM gone;
        RETURN n;
    END;
    $$;
    CREATE FUNCTION sf_stream_append2(
        p_stream TEXT, p_id TEXT, p_payload TEXT, p_now DOUBLE PRECISION, p_expect BIGINT,
        p_channel TEXT, p_trim BOOLEAN, p_max BIGINT, p_age_cut DOUBLE PRECISION,
        p_forget DOUBLE PRECISION)
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
        IF p_trim THEN  -- ids past their window are forgotten before they are looked up
            DELETE FROM sf_stream_ids WHERE stream = p_stream AND appended_at < p_forget;
        END IF;
        SELECT i.seq, i.digest, i.appended_at INTO old
        FROM sf_stream_ids i WHERE i.stream = p_stream AND i.message_id = p_id;
        IF FOUND THEN
            RETURN QUERY SELECT
                CASE WHEN old.digest = encode(sha256(convert_to(p_payload, 'UTF8')), 'hex')
                THEN 'dup' ELSE 'other' END, old.seq, p_payload, old.appended_at;
            RETURN;
        END IF;
        IF p_expect IS NOT NULL AND p_expect <> last THEN
            RETURN QUERY SELECT 'conflict', last, NULL::TEXT, NULL::DOUBLE PRECISION;
            RETURN;
        END IF;
        UPDATE sf_stream_head SET last_seq = last + 1 WHERE stream = p_stream;
        INSERT INTO sf_stream (stream, seq, message_id, payload, appended_at)
        VALUES (p_stream, last + 1, p_id, p_payload, p_now);
        IF p_trim THEN
            PERFORM sf_stream_trim(p_stream, p_max, p_age_cut, p_forget);
        END IF;
        PERFORM pg_notify(p_channel, (last + 1)::TEXT);
        RETURN QUERY SELECT 'ok', last + 1, p_payload, p_now;
    END;
    $$
    """,
    # consumer groups remove_consumer forgot (a claim by one is refused, not re-created).
    """
    CREATE TABLE sf_stream_removed (
        stream TEXT NOT NULL, consumer TEXT NOT NULL, PRIMARY KEY (stream, consumer)
    )
    """,
    # 4: a batch of appends in one call (one round trip): every id is looked up first, and
    # one reused with another payload appends nothing of the batch ('other' is returned).
    """
    CREATE FUNCTION sf_stream_append_many(
        p_stream TEXT, p_ids TEXT[], p_payloads TEXT[], p_now DOUBLE PRECISION,
        p_channel TEXT)
    RETURNS TABLE (o_kind TEXT, o_seq BIGINT, o_at DOUBLE PRECISION)
    LANGUAGE plpgsql AS $$
    DECLARE
        last BIGINT;
        start_seq BIGINT;
        n INTEGER := coalesce(array_length(p_ids, 1), 0);
        kinds TEXT[] := array_fill(NULL::TEXT, ARRAY[n]);
        seqs BIGINT[] := array_fill(NULL::BIGINT, ARRAY[n]);
        ats DOUBLE PRECISION[] := array_fill(NULL::DOUBLE PRECISION, ARRAY[n]);
        r RECORD;
        i INTEGER;
    BEGIN
        INSERT INTO sf_stream_head AS h (stream, last_seq) VALUES (p_stream, 0)
        ON CONFLICT (stream) DO UPDATE SET last_seq = h.last_seq  -- locks the stream
        RETURNING h.last_seq INTO last;
        start_seq := last;
        FOR i IN 1 .. n LOOP
            SELECT s.seq, s.payload = p_payloads[i] AS same, s.appended_at INTO r
            FROM sf_stream s WHERE s.stream = p_stream AND s.message_id = p_ids[i];
            IF NOT FOUND THEN
                SELECT t.seq,
                       t.digest = encode(sha256(convert_to(p_payloads[i], 'UTF8')), 'hex')
                       AS same,
                       t.appended_at INTO r
                FROM sf_stream_ids t WHERE t.stream = p_stream AND t.message_id = p_ids[i];
            END IF;
            IF FOUND THEN
                IF NOT r.same THEN
                    RETURN QUERY SELECT 'other'::TEXT, i::BIGINT, NULL::DOUBLE PRECISION;
                    RETURN;
                END IF;
                kinds[i] := 'dup';
                seqs[i] := r.seq;
                ats[i] := r.appended_at;
            END IF;
        END LOOP;
        FOR i IN 1 .. n LOOP
            IF kinds[i] IS NULL THEN
                last := last + 1;
                INSERT INTO sf_stream (stream, seq, message_id, payload, appended_at)
                VALUES (p_stream, last, p_ids[i], p_payloads[i], p_now);
                kinds[i] := 'ok';
                seqs[i] := last;
                ats[i] := p_now;
            END IF;
        END LOOP;
        IF last > start_seq THEN
            UPDATE sf_stream_head SET last_seq = last WHERE stream = p_stream;
            PERFORM pg_notify(p_channel, last::TEXT);
        END IF;
        RETURN QUERY SELECT u.k, u.s, u.a FROM unnest(kinds, seqs, ats) AS u(k, s, a);
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
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        self._channel_name = f"sf_stream_{digest}"
        self.channel = db.channel(self._channel_name)
        # LISTEN connections, one per thread waiting at a time; closed with the stream object.
        self._idle: list[Listener] = []
        self._idle_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._idle)

    def append(
        self,
        message_id: str,
        payload: str,
        *,
        now: float,
        expect_last_seq: int | None = None,
        retention: Retention | None = None,
    ) -> StreamRecord:
        self._check_payload(message_id, payload)
        trim = (None, None, None) if retention is None else _cuts(retention, now)
        rows = self.db.execute(
            "SELECT * FROM sf_stream_append2(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                self.name,
                message_id,
                payload,
                float(now),
                expect_last_seq,
                self.channel,
                retention is not None,
                *trim,
            ),
            idempotent=True,  # a retry finds its own message id and returns it
        )
        kind, seq, old_payload, at = rows[0]
        if kind == "ok":
            return StreamRecord(int(seq), message_id, payload, float(now))
        if kind == "dup":
            if old_payload != payload:
                raise DuplicateMessageError(message_id, self.name)
            return StreamRecord(int(seq), message_id, old_payload, float(at), True)
        if kind == "other":
            raise DuplicateMessageError(message_id, self.name)
        raise stream_conflict(self.name, int(expect_last_seq or 0), int(seq))

    def append_many(self, items: list[tuple[str, str]], *, now: float) -> list[StreamRecord]:
        """Append ``items`` in order in one transaction (``StreamBatches.append_many``): one
        call of ``sf_stream_append_many``, one round trip whatever the batch's size. Sent
        again after a lost reply, the batch finds its own ids and appends nothing."""
        for message_id, payload in items:
            self._check_payload(message_id, payload)
        if not items:
            return []
        rows = self.db.execute(
            "SELECT * FROM sf_stream_append_many(%s, %s, %s, %s, %s)",
            (self.name, [m for m, _ in items], [p for _, p in items], float(now), self.channel),
            idempotent=True,  # a retry finds its own message ids and returns them
        )
        if rows and rows[0][0] == "other":
            raise DuplicateMessageError(items[int(rows[0][1]) - 1][0], self.name)
        return [
            StreamRecord(int(seq), mid, payload, float(at), kind == "dup")
            for (kind, seq, at), (mid, payload) in zip(rows, items, strict=True)
        ]

    _TABLES = (*SQLStream._TABLES, "sf_stream_head")

    def trim(self, retention: Retention, *, now: float) -> int:
        rows = self.db.execute(
            "SELECT sf_stream_trim(%s, %s, %s, %s)",
            (self.name, *_cuts(retention, now)),
            idempotent=True,
        )
        return int(rows[0][0])

    def wait(self, after_seq: int, timeout: float) -> bool:
        with self._idle_lock:
            listener = self._idle.pop() if self._idle else None
        if listener is None:
            listener = Listener(self.db, self._channel_name)
        try:
            listener.wait(0.0)  # LISTEN (first use) before reading: no append falls between
            if self.last_seq() > after_seq:
                return True
            listener.wait(timeout)
            return self.last_seq() > after_seq
        finally:
            with self._idle_lock:
                self._idle.append(listener)

    def last_seq(self) -> int:
        rows = self.db.execute(
            "SELECT last_seq FROM sf_stream_head WHERE stream = %s", (self.name,), write=False
        )
        return int(rows[0][0]) if rows else 0

    def _last_in(self, c: Any) -> int:
        row = c.execute(
            "SELECT last_seq FROM sf_stream_head WHERE stream = %s", (self.name,)
        ).fetchone()
        return int(row[0]) if row is not None else 0

    def _claim_position(self, c: Any, consumer: str) -> int:
        # Lock the cursor row, or create it (a first claim): claims of one consumer take
        # turns from here on. A group remove_consumer forgot is refused, not re-created.
        row = c.execute(
            "SELECT position FROM sf_stream_cursor WHERE stream = %s AND consumer = %s FOR UPDATE",
            (self.name, consumer),
        ).fetchone()
        if row is not None:
            return int(row[0])
        self._check_not_removed(c, consumer)
        row = c.execute(
            "INSERT INTO sf_stream_cursor AS c (stream, consumer, position) VALUES (%s, %s, "
            "COALESCE((SELECT MIN(seq) FROM sf_stream WHERE stream = %s), 1) - 1) "
            "ON CONFLICT (stream, consumer) DO UPDATE SET position = c.position "
            "RETURNING c.position",
            (self.name, consumer, self.name),
        ).fetchone()
        return int(row[0])

    def __repr__(self) -> str:
        return f"PostgresStream({self.db.url!r}, {self.name!r})"


def _close_all(listeners: list[Listener]) -> None:
    for listener in listeners:
        listener.close()


def _cuts(retention: Retention, now: float) -> tuple[int | None, float | None, float]:
    by_age = now - retention.max_age if retention.max_age is not None else None
    return retention.max_messages, by_age, now - retention.dedup_window


def postgres_streams(db: PostgresDB) -> dict[str, int]:
    """Every stream in the schema with its kept message count (nothing when it has none)."""
    rows = db.execute("SELECT to_regclass('sf_stream') IS NOT NULL", write=False)
    if not rows[0][0]:
        return {}
    return list_streams(PostgresDialect(db), heads="sf_stream_head")
