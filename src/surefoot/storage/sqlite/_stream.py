"""SQLite ``StreamLog``: the shared SQL stream (:mod:`surefoot.storage.sql.stream`) plus
what only SQLite does: its migrations, the append and ``last_seq``.

An append is one ``INSERT … SELECT MAX(seq) + 1 … HAVING … ON CONFLICT (message_id) DO
NOTHING`` under ``BEGIN IMMEDIATE``: the id check, the ``expect_last_seq`` check and the
insert cannot be split by another process. A claim is one short transaction that redelivers
expired deliveries, dead-letters those past ``max_attempts``, and hands out new messages.
"""

from __future__ import annotations

from typing import Any

from ...errors import DuplicateMessageError
from ..base import StreamRecord, stream_conflict
from ..sql.stream import REC_SQL, SQLStream, record
from ._db import SQLiteDB
from ._dialect import SQLiteDialect

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
_LAST = "SELECT MAX(seq) FROM sf_stream WHERE stream = ?"


class SQLiteStream(SQLStream):
    """One named stream in a SQLite file shared by many processes.

    Args:
        db: the file (``SQLiteDB``).
        name: the stream's name.
    """

    def __init__(self, db: SQLiteDB, name: str) -> None:
        self.db = db
        db.migrate("stream", MIGRATIONS)
        super().__init__(SQLiteDialect(db), name)

    def append(
        self, message_id: str, payload: str, *, now: float, expect_last_seq: int | None = None
    ) -> StreamRecord:
        self._check_payload(message_id, payload)
        p = {"s": self.name, "id": message_id, "payload": payload, "now": now}
        with self.db.write() as c:
            row = c.execute(_APPEND, {**p, "expect": expect_last_seq}).fetchone()
            if row is not None:
                return record(row)
            old = c.execute(REC_SQL + " AND message_id = ?", (self.name, message_id)).fetchone()
            if old is not None:
                if old[2] != payload:
                    raise DuplicateMessageError(message_id, self.name)
                return record(old, duplicate=True)
            last = c.execute(_LAST, (self.name,)).fetchone()[0] or 0
            raise stream_conflict(self.name, int(expect_last_seq or 0), last)

    def last_seq(self) -> int:
        return int(self.db.read(_LAST, (self.name,))[0][0] or 0)

    def _claim_position(self, c: Any, consumer: str) -> int:
        # Under the write lock already: a plain read (no cursor row until it moves).
        row = c.execute(
            "SELECT position FROM sf_stream_cursor WHERE stream = ? AND consumer = ?",
            (self.name, consumer),
        ).fetchone()
        return int(row[0]) if row else 0

    def __repr__(self) -> str:
        return f"SQLiteStream({self.db.path!r}, {self.name!r})"
