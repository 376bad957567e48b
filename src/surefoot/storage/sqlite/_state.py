"""SQLite ``StateStore``: versioned keys, one conditional statement per write.

Every write is ``BEGIN IMMEDIATE``, one ``INSERT … ON CONFLICT DO UPDATE … WHERE`` (or one
``UPDATE … WHERE version = ?``) with ``RETURNING``, then ``COMMIT``: no read-then-write, so
several processes on one file never lose an update the version check was meant to catch.
The global revision is ``MAX(revision) + 1`` of the namespace, computed inside the same
statement under the write lock.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ...errors import ValueTooLargeError
from ..base import MergeOutcome, StateRecord, check_size, write_conflict
from ..merges import (
    LIST_OPS,
    apply,
    check_contribution,
    log_entry,
    lower_trust,
    merge_refused,
)
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
    # A list merge (append, set_add) adds one row to sf_state_items instead of rewriting
    # the whole list: the list is read back in one statement, in order.
    """
    ALTER TABLE sf_state ADD COLUMN merge_op TEXT;
    ALTER TABLE sf_state ADD COLUMN merge_log TEXT;
    ALTER TABLE sf_state ADD COLUMN merge_size INTEGER;
    CREATE TABLE sf_state_items (
        ns TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL, item TEXT NOT NULL,
        entry TEXT NOT NULL, mid TEXT, member TEXT,
        PRIMARY KEY (ns, key, n)
    );
    CREATE UNIQUE INDEX sf_state_items_mid ON sf_state_items (ns, key, mid)
        WHERE mid IS NOT NULL;
    CREATE UNIQUE INDEX sf_state_items_member ON sf_state_items (ns, key, member)
        WHERE member IS NOT NULL
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


# A list merge key's items and log entries, joined in order, in the statement that reads it.
_JOINED = (
    "CASE WHEN s.merge_op IN ('append', 'set_add') THEN (SELECT group_concat({col}, ',') FROM "
    "(SELECT {col} FROM sf_state_items i WHERE i.ns = s.ns AND i.key = s.key ORDER BY i.n)) END"
)
_SELECT = (
    f"SELECT {', '.join('s.' + c for c in _COLS.split(', '))}, "
    f"{_JOINED.format(col='item')}, {_JOINED.format(col='entry')} FROM sf_state s "
)


def _record(row: tuple[Any, ...] | sqlite3.Row) -> StateRecord:
    k, v, ver, rev, author, trust, at, lineage, op, log, *joined = row
    if op in LIST_OPS:
        items, entries = joined if joined else (None, None)
        v, log = f"[{items or ''}]", f"[{entries or ''}]"
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
# A list merge: one item row (inserted before), and the key's row moves on.
_MERGE_LIST = f"""
INSERT INTO sf_state (ns, key, value, version, revision, author, trust, written_at, lineage,
                      merge_op, merge_log, merge_size)
VALUES (:ns, :key, '', 1, {_NEXT_REV}, :author, :trust, :now, 1, :op, NULL, :size)
ON CONFLICT (ns, key) DO UPDATE SET
    value = '', version = sf_state.version + 1, revision = excluded.revision,
    author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
    lineage = sf_state.lineage + 1, merge_op = excluded.merge_op, merge_log = NULL,
    merge_size = excluded.merge_size
RETURNING version, revision, author, trust, written_at
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
        rows = self.db.read(_SELECT + "WHERE s.ns = ? AND s.key = ?", (self.namespace, key))
        return _record(rows[0]) if rows else None

    def _read_in(self, c: sqlite3.Connection, key: str) -> StateRecord | None:
        row = c.execute(_SELECT + "WHERE s.ns = ? AND s.key = ?", (self.namespace, key)).fetchone()
        return _record(row) if row is not None else None

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
    ) -> MergeOutcome:
        limit = self.db.max_value_bytes
        check_size(self.db.url, f"the contribution to key {key!r}", arg, limit)
        entry = log_entry(author, trust, now, merge_id, op, arg)
        if op in LIST_OPS:
            return self._merge_list(key, op, arg, author, trust, now, merge_id, entry)
        with self.db.write() as c:  # the file's write lock: no other writer until COMMIT
            row = c.execute(
                f"SELECT {_COLS} FROM sf_state WHERE ns = ? AND key = ?", (self.namespace, key)
            ).fetchone()
            cur = _record(row) if row is not None else None
            state = (cur.value, cur.merge_op, cur.merge_log) if cur is not None else None
            out = apply(key, op, state, arg, entry, merge_id, reducer)
            if out is None:
                assert cur is not None
                return MergeOutcome.of(cur, False)
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
            return MergeOutcome.of(_record(c.execute(_MERGE, params).fetchone()), True)

    def _merge_list(
        self,
        key: str,
        op: str,
        arg: str,
        author: str,
        trust: str,
        now: float,
        merge_id: str | None,
        entry: str,
    ) -> MergeOutcome:
        """``append`` / ``set_add``: one item row and one row update, under the write lock."""
        data = check_contribution(key, op, arg)
        item = arg if op == "append" else json.dumps(data)
        ns, limit = self.namespace, self.db.max_value_bytes
        with self.db.write() as c:
            row = c.execute(
                "SELECT version, trust, merge_op, merge_size, revision, author, written_at "
                "FROM sf_state WHERE ns = ? AND key = ?",
                (ns, key),
            ).fetchone()
            if row is not None and row[2] != op:
                raise merge_refused(key, op, self.db.url, "op", self._read_in(c, key))
            size = (row[3] if row is not None else 2) + len(item.encode("utf-8", "surrogatepass"))
            size += 1 if row is not None and row[3] > 2 else 0  # the comma
            # The unique indexes on (key, mid) and (key, member) find a duplicate.
            added = c.execute(
                "INSERT INTO sf_state_items (ns, key, n, item, entry, mid, member) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    ns,
                    key,
                    (row[0] if row is not None else 0) + 1,
                    item,
                    entry,
                    merge_id,
                    item if op == "set_add" else None,
                ),
            ).rowcount
            if not added:
                assert row is not None  # a duplicate needs an earlier item
                return MergeOutcome(key, row[0], row[4], row[5], row[1], row[6], False)
            if limit and size > limit:  # rolled back with the item
                raise ValueTooLargeError(self.db.url, f"the value of key {key!r}", size, limit)
            params = {
                "ns": ns,
                "key": key,
                "author": author,
                "trust": lower_trust(row[1] if row is not None else None, trust),
                "now": now,
                "op": op,
                "size": size,
            }
            ver, rev, by, tr, at = c.execute(_MERGE_LIST, params).fetchone()
            return MergeOutcome(key, int(ver), int(rev), str(by), str(tr), float(at), True)

    def snapshot(self) -> dict[str, StateRecord]:
        rows = self.db.read(_SELECT + "WHERE s.ns = ? ORDER BY s.key", (self.namespace,))
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
