"""SQLite ``StateStore``: versioned keys, one conditional statement per write.

Every write is ``BEGIN IMMEDIATE``, one ``INSERT … ON CONFLICT DO UPDATE … WHERE`` (or one
``UPDATE … WHERE version = ?``) with ``RETURNING``, then ``COMMIT``: no read-then-write, so
several processes on one file never lose an update the version check was meant to catch.
The global revision is ``MAX(revision) + 1`` of the namespace, computed inside the same
statement under the write lock.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..base import StateRecord, check_size, write_conflict
from ..merges import apply, log_entry, lower_trust
from ._db import SQLiteDB

__all__ = ["SQLiteStateStore"]

MIGRATIONS = [
    """
    CREATE TABLE sf_state (
        ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
        version INTEGER NOT NULL, revision INTEGER NOT NULL,
        author TEXT NOT NULL, trust TEXT NOT NULL, written_at REAL NOT NULL,
        PRIMARY KEY (ns, key)
    );
    CREATE INDEX sf_state_revision ON sf_state (ns, revision)
    """,
    # Lost updates are counted per key: versions its value does not descend from.
    """
    ALTER TABLE sf_state ADD COLUMN lineage INTEGER NOT NULL DEFAULT 0;
    UPDATE sf_state SET lineage = version
    """,
    # Merges applied by the store: the op a key merges by and its log of contributions.
    """
    ALTER TABLE sf_state ADD COLUMN merge_op TEXT;
    ALTER TABLE sf_state ADD COLUMN merge_log TEXT
    """,
]

_COLS = "key, value, version, revision, author, trust, written_at, lineage, merge_op, merge_log"
# A bare MAX() subquery, so SQLite reads one index entry instead of scanning the namespace.
_NEXT_REV = "(COALESCE((SELECT MAX(revision) FROM sf_state WHERE ns = :ns), 0) + 1)"
_FENCE_OK = (
    "(:fkey IS NULL OR EXISTS (SELECT 1 FROM sf_state WHERE ns = :ns AND key = :fkey "
    "AND version = :fver))"
)
# expect None (last-writer-wins) or 0 (create only): one upsert.
_UPSERT = f"""
INSERT INTO sf_state (ns, key, value, version, revision, author, trust, written_at, lineage)
SELECT :ns, :key, :value, 1, {_NEXT_REV}, :author, :trust, :now, 1 WHERE {_FENCE_OK}
ON CONFLICT (ns, key) DO UPDATE SET
    value = excluded.value, version = sf_state.version + 1, revision = excluded.revision,
    author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
    lineage = CASE WHEN :sver IS NOT NULL AND :sver < sf_state.version THEN :slin + 1
                   ELSE sf_state.lineage + 1 END,
    merge_op = NULL, merge_log = NULL
WHERE :expect IS NULL AND {_FENCE_OK}
RETURNING {_COLS}
"""
# expect n > 0: one conditional update.
_UPDATE = f"""
UPDATE sf_state SET
    value = :value, version = version + 1, revision = {_NEXT_REV},
    author = :author, trust = :trust, written_at = :now, lineage = lineage + 1,
    merge_op = NULL, merge_log = NULL
WHERE ns = :ns AND key = :key AND version = :expect AND {_FENCE_OK}
RETURNING {_COLS}
"""


# Without a fence the EXISTS clause is left out of the statement altogether.
_UPSERT_NOFENCE = _UPSERT.replace(f" WHERE {_FENCE_OK}", " WHERE true").replace(
    f" AND {_FENCE_OK}", ""
)
_UPDATE_NOFENCE = _UPDATE.replace(f" AND {_FENCE_OK}", "")


def _record(row: tuple[Any, ...] | sqlite3.Row) -> StateRecord:
    k, v, ver, rev, author, trust, at, lineage, op, log = row
    return StateRecord(
        str(k),
        str(v),
        int(ver),
        int(rev),
        str(author),
        str(trust),
        float(at),
        int(lineage),
        op,
        log,
    )


# A merge: the new value is computed in Python under the write lock, then one upsert.
_MERGE = f"""
INSERT INTO sf_state (ns, key, value, version, revision, author, trust, written_at, lineage,
                      merge_op, merge_log)
VALUES (:ns, :key, :value, 1, {_NEXT_REV}, :author, :trust, :now, 1, :op, :log)
ON CONFLICT (ns, key) DO UPDATE SET
    value = excluded.value, version = sf_state.version + 1, revision = excluded.revision,
    author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
    lineage = sf_state.lineage + 1, merge_op = excluded.merge_op, merge_log = excluded.merge_log
RETURNING {_COLS}
"""


class SQLiteStateStore:
    """Versioned keys of one namespace in a SQLite file shared by many processes.

    Args:
        db: the file (``SQLiteDB``), shared with the other protocol objects.
        namespace: keys of different namespaces never meet.
    """

    def __init__(self, db: SQLiteDB, namespace: str = "default") -> None:
        self.db = db
        self.namespace = namespace
        db.migrate("statestore", MIGRATIONS)

    def read(self, key: str) -> StateRecord | None:
        rows = self.db.read(
            f"SELECT {_COLS} FROM sf_state WHERE ns = ? AND key = ?", (self.namespace, key)
        )
        return _record(rows[0]) if rows else None

    def write(
        self,
        key: str,
        value: str,
        *,
        author: str,
        trust: str,
        expect: int | None,
        now: float,
        fence: tuple[str, int] | None = None,
        seen: tuple[int, int] | None = None,
    ) -> StateRecord:
        check_size(self.db.url, f"the value of key {key!r}", value, self.db.max_value_bytes)
        params = {
            "ns": self.namespace,
            "key": key,
            "value": value,
            "author": author,
            "trust": trust,
            "now": now,
            "expect": expect,
            "fkey": fence[0] if fence else None,
            "fver": fence[1] if fence else None,
            "sver": seen[0] if seen else None,
            "slin": seen[1] if seen else None,
        }
        with self.db.write() as c:
            if fence is None:
                sql = _UPDATE_NOFENCE if expect else _UPSERT_NOFENCE
            else:
                sql = _UPDATE if expect else _UPSERT
            row = c.execute(sql, params).fetchone()
            if row is not None:
                return _record(row)
            # Nothing written: say why, from the same transaction.
            current = "SELECT version, value, author FROM sf_state WHERE ns = ? AND key = ?"
            if fence is not None:
                lease = c.execute(current, (self.namespace, fence[0])).fetchone()
                if lease is None or lease[0] != fence[1]:
                    raise write_conflict("fence", key, expect, fence, lease)
            cur = c.execute(current, (self.namespace, key)).fetchone()
            raise write_conflict("conflict", key, expect, fence, cur)

    def merge(
        self,
        key: str,
        op: str,
        arg: str,
        *,
        author: str,
        trust: str,
        now: float,
        merge_id: str | None = None,
        reducer: Any = None,
    ) -> tuple[StateRecord, bool]:
        limit = self.db.max_value_bytes
        check_size(self.db.url, f"the contribution to key {key!r}", arg, limit)
        entry = log_entry(author, trust, now, merge_id, op, arg)
        with self.db.write() as c:  # the file's write lock: no other writer until COMMIT
            row = c.execute(
                f"SELECT {_COLS} FROM sf_state WHERE ns = ? AND key = ?", (self.namespace, key)
            ).fetchone()
            cur = _record(row) if row is not None else None
            state = (cur.value, cur.merge_op, cur.merge_log) if cur is not None else None
            out = apply(key, op, state, arg, entry, merge_id, reducer)
            if out is None:
                assert cur is not None
                return cur, False
            value, log = out
            check_size(self.db.url, f"the value of key {key!r}", value, limit)
            params = {
                "ns": self.namespace,
                "key": key,
                "value": value,
                "author": author,
                "trust": lower_trust(cur.trust if cur else None, trust),
                "now": now,
                "op": op,
                "log": log,
            }
            return _record(c.execute(_MERGE, params).fetchone()), True

    def snapshot(self) -> dict[str, StateRecord]:
        rows = self.db.read(
            f"SELECT {_COLS} FROM sf_state WHERE ns = ? ORDER BY key", (self.namespace,)
        )
        return {r[0]: _record(r) for r in rows}

    def revision(self) -> int:
        rows = self.db.read("SELECT MAX(revision) FROM sf_state WHERE ns = ?", (self.namespace,))
        return int(rows[0][0] or 0)

    def lost_updates(self) -> int:
        rows = self.db.read(
            "SELECT COALESCE(SUM(version - lineage), 0) FROM sf_state WHERE ns = ?",
            (self.namespace,),
        )
        return int(rows[0][0])

    def __repr__(self) -> str:
        return f"SQLiteStateStore({self.db.path!r}, {self.namespace!r})"
