"""SQLite ``StreamLog``: the shared SQL stream (:mod:`surefoot.storage.sql.stream`) plus
what only SQLite does: its migrations, the append and ``last_seq``.

An append is one ``INSERT … SELECT MAX(seq) + 1 … ON CONFLICT (message_id) DO NOTHING …
RETURNING seq`` sent alone, its own transaction (a lone write statement takes the file's
write lock before it reads: see ``SQLiteDB.write_one``): the id check, the
``expect_last_seq`` check and the insert cannot be split by another process. When it appends
nothing (a known id, another last seq), one transaction under ``BEGIN IMMEDIATE`` finds out
which. With a ``Retention`` the append runs under ``BEGIN IMMEDIATE`` and the same
transaction then trims: two index probes find nothing to do in the common case (the first
message is young and the stream is within its length), so a bounded stream's append stays
one commit. A claim is one short transaction that redelivers expired deliveries,
dead-letters those past ``max_attempts``, and hands out new messages. ``wait`` looks at
``PRAGMA data_version`` (it changes when another connection commits) when the file is
written (``SQLiteDB.wait_for_commit``): no write, no lock.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...errors import DuplicateMessageError
from ..sql.stream import FLOOR_SQL, REC_SQL, SQLStream, list_streams, record
from ..streams import Retention, StreamRecord, stream_conflict
from ._db import SQLiteDB
from ._dialect import SQLiteDialect

__all__ = ["SQLiteStream", "sqlite_streams"]

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
    # 2: the ids of trimmed messages, remembered for their dedup window.
    """
    CREATE TABLE sf_stream_ids (
        stream TEXT NOT NULL, message_id TEXT NOT NULL, seq INTEGER NOT NULL,
        digest TEXT NOT NULL, appended_at REAL NOT NULL,
        PRIMARY KEY (stream, message_id)
    );
    CREATE INDEX sf_stream_ids_at ON sf_stream_ids (stream, appended_at)
    """,
    # 3: consumer groups remove_consumer forgot (a claim by one is refused, not re-created).
    """
    CREATE TABLE sf_stream_removed (
        stream TEXT NOT NULL, consumer TEXT NOT NULL, PRIMARY KEY (stream, consumer)
    )
    """,
]

# The bare MAX() subquery reads one index entry (a MAX wrapped in an aggregate query with
# HAVING would scan the whole stream on every append).
_APPEND = """
INSERT INTO sf_stream (stream, seq, message_id, payload, appended_at)
SELECT :s, last + 1, :id, :payload, :now
FROM (SELECT COALESCE((SELECT MAX(seq) FROM sf_stream WHERE stream = :s), 0) AS last)
WHERE (:expect IS NULL OR last = :expect)
  AND NOT EXISTS (SELECT 1 FROM sf_stream_ids WHERE stream = :s AND message_id = :id)
ON CONFLICT (stream, message_id) DO NOTHING
RETURNING seq
"""
_LAST = "SELECT MAX(seq) FROM sf_stream WHERE stream = ?"
_FORGET = "DELETE FROM sf_stream_ids WHERE stream = ? AND appended_at < ?"
# The first message and the consumers' floor in one statement (a bounded append needs both).
_HEAD = (
    "SELECT seq, appended_at, (" + FLOOR_SQL + ") FROM sf_stream WHERE stream = ? "
    "ORDER BY seq LIMIT 1"
)
_YOUNG = "SELECT seq FROM sf_stream WHERE stream = ? AND appended_at >= ? ORDER BY seq LIMIT 1"
_DROP = (
    "DELETE FROM sf_stream WHERE stream = ? AND seq < ? "
    "RETURNING seq, message_id, payload, appended_at"
)
_KEEP_ID = (
    "INSERT OR REPLACE INTO sf_stream_ids (stream, message_id, seq, digest, appended_at) "
    "VALUES (?, ?, ?, ?, ?)"
)


def _digest(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


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
        self,
        message_id: str,
        payload: str,
        *,
        now: float,
        expect_last_seq: int | None = None,
        retention: Retention | None = None,
    ) -> StreamRecord:
        limit = self.db.max_value_bytes
        if limit and len(payload) * 4 > limit:  # no character is over 4 bytes
            self._check_payload(message_id, payload)
        name = self.name
        p = {"s": name, "id": message_id, "payload": payload, "now": now, "expect": expect_last_seq}
        if retention is None:  # the common append: one statement, its own transaction
            row = self.db.write_returning(_APPEND, p)
            if row:
                return StreamRecord(row[0][0], message_id, payload, float(now))
            # Nothing appended (a known id, or expect_last_seq did not match): say which,
            # from one transaction.
        with self.db.write() as c:
            if retention is not None:  # ids past their window are forgotten before lookup
                c.execute(_FORGET, (name, now - retention.dedup_window))
            row = c.execute(_APPEND, p).fetchone()
            if row is not None:
                seq = row[0]
                if retention is not None:
                    self._trim(c, retention, now, seq, forgotten=True)
                return StreamRecord(seq, message_id, payload, float(now))
            known = self._known(c, message_id, payload)
            if known is not None:
                return known
            last = c.execute(_LAST, (name,)).fetchone()[0] or 0
            raise stream_conflict(name, int(expect_last_seq or 0), last)

    def _known(self, c: Any, message_id: str, payload: str) -> StreamRecord | None:
        """The record already appended with ``message_id`` (kept, or trimmed within its
        dedup window), or None.

        Raises:
            DuplicateMessageError: it was appended with another payload.
        """
        name = self.name
        old = c.execute(REC_SQL + " AND message_id = ?", (name, message_id)).fetchone()
        if old is not None:
            if old[2] != payload:
                raise DuplicateMessageError(message_id, name)
            return record(old, duplicate=True)
        gone = c.execute(
            "SELECT seq, digest, appended_at FROM sf_stream_ids WHERE stream = ? "
            "AND message_id = ?",
            (name, message_id),
        ).fetchone()
        if gone is not None:
            if gone[1] != _digest(payload):
                raise DuplicateMessageError(message_id, name)
            return StreamRecord(int(gone[0]), message_id, payload, float(gone[2]), True)
        return None

    def append_many(self, items: list[tuple[str, str]], *, now: float) -> list[StreamRecord]:
        """Append ``items`` in order in one transaction (``StreamBatches.append_many``)."""
        for message_id, payload in items:
            self._check_payload(message_id, payload)
        out: list[StreamRecord] = []
        if not items:
            return out
        with self.db.write() as c:
            for message_id, payload in items:
                p = {"s": self.name, "id": message_id, "payload": payload, "now": now}
                row = c.execute(_APPEND, {**p, "expect": None}).fetchone()
                if row is not None:
                    out.append(StreamRecord(row[0], message_id, payload, float(now)))
                    continue
                known = self._known(c, message_id, payload)
                assert known is not None  # no expect_last_seq: only a known id appends nothing
                out.append(known)
        return out

    def trim(self, retention: Retention, *, now: float) -> int:
        with self.db.write() as c:
            last = c.execute(_LAST, (self.name,)).fetchone()[0]
            return self._trim(c, retention, now, int(last)) if last else 0

    def _trim(
        self, c: Any, retention: Retention, now: float, last: int, *, forgotten: bool = False
    ) -> int:
        """Drop what ``retention`` no longer keeps (under the write lock); how many went.

        One statement reads the first message and the consumers' floor, one deletes what
        goes (returning it), one remembers the ids still in their dedup window."""
        name = self.name
        by_len, by_age, forget = retention.cuts(last, now)
        if not forgotten:
            c.execute(_FORGET, (name, forget))
        first, first_at, floor = c.execute(_HEAD, (name, name, name)).fetchone()
        if first >= by_len and (by_age is None or first_at >= by_age):
            return 0  # nothing is over the limits
        keep = by_len
        if by_age is not None:
            young = c.execute(_YOUNG, (name, by_age)).fetchone()
            keep = max(keep, int(young[0]) if young else last)
        keep = min(keep, last, int(floor) if floor is not None else last)
        if keep <= first:
            return 0
        gone = c.execute(_DROP, (name, keep)).fetchall()
        kept_ids = [
            (name, mid, seq, _digest(body), at) for seq, mid, body, at in gone if at >= forget
        ]
        if kept_ids:
            c.executemany(_KEEP_ID, kept_ids)
        return len(gone)

    def last_seq(self) -> int:
        return int(self.db.read(_LAST, (self.name,))[0][0] or 0)

    def wait(self, after_seq: int, timeout: float) -> bool:
        return self.db.wait_for_commit(lambda: self.last_seq() > after_seq, timeout)

    def _last_in(self, c: Any) -> int:
        return int(c.execute(_LAST, (self.name,)).fetchone()[0] or 0)

    def _claim_position(self, c: Any, consumer: str) -> int:
        # Under the write lock already: a plain read; the first claim registers the consumer.
        row = c.execute(
            "SELECT position FROM sf_stream_cursor WHERE stream = ? AND consumer = ?",
            (self.name, consumer),
        ).fetchone()
        if row is not None:
            return int(row[0])
        self._check_not_removed(c, consumer)
        row = c.execute(
            "INSERT INTO sf_stream_cursor (stream, consumer, position) VALUES (?, ?, "
            "COALESCE((SELECT MIN(seq) FROM sf_stream WHERE stream = ?), 1) - 1) "
            "RETURNING position",
            (self.name, consumer, self.name),
        ).fetchone()
        return int(row[0])

    def __repr__(self) -> str:
        return f"SQLiteStream({self.db.path!r}, {self.name!r})"


def sqlite_streams(db: SQLiteDB) -> dict[str, int]:
    """Every stream in the file with its kept message count (nothing when it has none)."""
    if not db.read("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sf_stream'"):
        return {}
    return list_streams(SQLiteDialect(db))
