"""SQLite ``StateStore``: versioned keys, one conditional statement per write.

A write is one statement in its own transaction: one ``INSERT … ON CONFLICT DO UPDATE …
WHERE`` (or one ``UPDATE … WHERE version = ?``) that reads the namespace's revision itself
and returns what it wrote. The conditional statement is the check: there is no
read-then-write, so several processes on one file never lose an update the version check was
meant to catch. While some key of the namespace is due to expire the statement writes
nothing, and so does a refused one; then four statements run: ``BEGIN IMMEDIATE``, one read
(is a key due to expire; for a versioned write also the revision and the key's lineage),
the keys due tombstoned first, the write again, ``COMMIT`` (and a refusal says why). The
global revision is ``MAX(revision) + 1`` of the namespace's log (every key's latest change
stays in it), read under the write lock (a lone write statement takes the lock before it
reads: see ``SQLiteDB.write_one``); the change's log row is written by a trigger on
``sf_state``, inside the statement that makes the change. A merged append is five: the one
read (the key's row, the expiry check and the revision), its item row, the key's row.

What a commit costs on a disk grows with the pages it writes, so a change writes few
b-trees: the key's row, its log row (keyed by revision; a key's log rows are chained by
``prev``, one in ``SKIP`` indexed by key), and a list merge's item (keyed by its id, so
no index of ids is written).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ...errors import CompactedError, ConflictError, ValueTooLargeError
from ..checks import check_size
from ..history import WatchRead, compaction_victims, txn_plan, watch_params
from ..merges import (
    LIST_OPS,
    apply,
    check_contribution,
    log_entry,
    lower_trust,
    merge_refused,
)
from ..rowsum import key_sum, refused
from ..state import MergeOutcome, StateChange, StateRecord, TxnOp, expires_at, write_conflict
from ._db import SQLiteDB
from ._liveness import FileLiveness
from ._observed import ObservedLocks
from ._state_sql import (
    COLS,
    CURRENT,
    DUE,
    HISTORY,
    LIST_LOGGED,
    LIST_ROW,
    LIVE,
    LOG_COLS,
    MERGE,
    MERGE_LIST,
    MERGE_LIST_UPDATE,
    MIGRATIONS,
    READ_AT,
    SELECT,
    TOMBSTONE,
    UPDATE,
    UPDATE_NOFENCE,
    UPDATE_ONE,
    UPDATE_ONE_NOFENCE,
    UPSERT,
    UPSERT_NOFENCE,
    UPSERT_ONE,
    UPSERT_ONE_NOFENCE,
    WATCH_READ,
    WRITE_READ,
)

__all__ = ["MIGRATIONS", "SQLiteStateStore"]

# StateRecord is a frozen dataclass: its __init__ sets each field through
# object.__setattr__. Rows are built here by calling the slots' setters directly instead
# (a hot path: one record per write and per read); SQLite hands back the columns' types.
_NEW = object.__new__
(_SKEY, _SVALUE, _SVER, _SREV, _SAUTHOR, _STRUST, _SAT, _SLIN, _SOP, _SLOG, _SEXP) = (
    getattr(StateRecord, f).__set__ for f in StateRecord.__slots__
)


def _record(row: tuple[Any, ...] | sqlite3.Row) -> StateRecord:
    k, v, ver, rev, author, trust, at, lineage, op, log, exp, *joined = row
    if op in LIST_OPS:
        items, entries = joined[:2] if joined else (None, None)
        v, log = f"[{items or ''}]", f"[{entries or ''}]"
    r = _NEW(StateRecord)
    _SKEY(r, k)
    _SVALUE(r, v)
    _SVER(r, ver)
    _SREV(r, rev)
    _SAUTHOR(r, author)
    _STRUST(r, trust)
    _SAT(r, float(at))
    _SLIN(r, lineage)
    _SOP(r, op)
    _SLOG(r, log)
    _SEXP(r, exp)
    return r


def _versioned(
    key: str, expect: int, rev: int, lineage: int, params: dict[str, Any]
) -> StateRecord:
    """The record a versioned write (over version ``expect``, with ``params``) wrote: the
    statement returned only its revision and lineage."""
    r = _NEW(StateRecord)
    _SKEY(r, key)
    _SVALUE(r, params["value"])
    _SVER(r, expect + 1)
    _SREV(r, rev)
    _SAUTHOR(r, params["author"])
    _STRUST(r, params["trust"])
    _SAT(r, float(params["now"]))
    _SLIN(r, lineage)
    _SOP(r, None)
    _SLOG(r, None)
    _SEXP(r, params["exp"])
    return r


def _change(row: tuple[Any, ...] | sqlite3.Row) -> StateChange:
    rev, key, kind, value, ver, author, trust, at, exp = row
    return StateChange(
        int(rev),
        str(key),
        str(kind),
        None if value is None else str(value),
        int(ver),
        str(author),
        str(trust),
        float(at),
        None if exp is None else float(exp),
    )


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
        # No server clock: a Store lock's lease is also judged by observation (._observed).
        available = FileLiveness.available(db.path)
        self.leases = ObservedLocks(FileLiveness(db.path)) if available else None

    # -- reads ---------------------------------------------------------------------------

    def read(self, key: str, now: float | None = None) -> StateRecord | None:
        rows = self.db.read(
            SELECT + f"WHERE s.ns = :ns AND s.key = :key AND {LIVE}",
            {"ns": self.namespace, "key": key, "at": now},
        )
        return self._checked(rows[0]) if rows else None

    def _checked(self, row: tuple[Any, ...]) -> StateRecord:
        """The record of a row read with ``SELECT`` (its checksum last), if its key and value
        pass the checksum (storage/rowsum.py; NULL: not checked).

        Raises:
            CorruptionError: they do not; the value is not served.
        """
        stored = row[13]
        if stored is not None and key_sum(row[0], row[1]) != stored:
            raise refused(
                self.db.url, f"key {row[0]!r} of namespace {self.namespace!r} (table sf_state)"
            )
        return _record(row)

    def _read_in(self, c: sqlite3.Connection, key: str) -> StateRecord | None:
        row = c.execute(
            SELECT + "WHERE s.ns = ? AND s.key = ? AND s.deleted = 0", (self.namespace, key)
        ).fetchone()
        return self._checked(row) if row is not None else None

    def snapshot(self, now: float | None = None) -> dict[str, StateRecord]:
        rows = self.db.read(
            SELECT + f"WHERE s.ns = :ns AND {LIVE} ORDER BY s.key",
            {"ns": self.namespace, "at": now},
        )
        return {r[0]: self._checked(r) for r in rows}

    def revision(self) -> int:
        rows = self.db.read(
            "SELECT MAX(revision) FROM sf_state_log WHERE ns = ?", (self.namespace,)
        )
        return int(rows[0][0] or 0)

    def lost_updates(self) -> int:
        rows = self.db.read(
            "SELECT COALESCE(SUM(version - lineage), 0) FROM sf_state WHERE ns = ?",
            (self.namespace,),
        )
        return int(rows[0][0])

    # -- the log ---------------------------------------------------------------------------

    def _sweep(self, c: sqlite3.Connection, now: float) -> int:
        """Tombstone the keys whose TTL ran out at ``now``, oldest expiry first.

        One read of the expiry index when nothing is due (the common case)."""
        if c.execute(DUE, (self.namespace, now)).fetchone() is None:
            return 0
        return self._sweep_due(c, now)

    def _sweep_due(self, c: sqlite3.Connection, now: float) -> int:
        due = c.execute(
            "SELECT key FROM sf_state WHERE ns = ? AND expires_at <= ? ORDER BY expires_at, key",
            (self.namespace, now),
        ).fetchall()
        for (key,) in due:
            self._tombstone(c, key, "system", "system", now, 2)
        return len(due)

    def _tombstone(
        self, c: sqlite3.Connection, key: str, author: str, trust: str, now: float, kind: int
    ) -> StateChange | None:
        ns = self.namespace
        self._drop_items(c, key)
        params = {"ns": ns, "key": key, "author": author, "trust": trust, "now": now, "kind": kind}
        out = c.execute(TOMBSTONE, params).fetchone()
        if out is None:
            return None
        kind_ = "delete" if kind == 1 else "expire"
        return StateChange(int(out[1]), key, kind_, None, int(out[0]), author, trust, now)

    def _drop_items(self, c: sqlite3.Connection, key: str) -> None:
        """Before a list merge key is replaced: write its logged versions' values into the
        log (they were its items up to each version), then drop the items."""
        ns = self.namespace
        row = c.execute("SELECT merge_op FROM sf_state WHERE ns = ? AND key = ?", (ns, key))
        op = row.fetchone()
        if op is None or op[0] not in LIST_OPS:
            return
        logged = c.execute(LIST_LOGGED, {"ns": ns, "key": key}).fetchall()
        c.executemany(
            "UPDATE sf_state_log SET value = ? WHERE ns = ? AND revision = ?",
            [(r[3], ns, r[0]) for r in logged],
        )
        c.execute("DELETE FROM sf_state_items WHERE ns = ? AND key = ?", (ns, key))

    def expire(self, now: float) -> int:
        due = self.db.read(
            "SELECT 1 FROM sf_state WHERE ns = ? AND expires_at <= ? LIMIT 1", (self.namespace, now)
        )
        if not due:  # nothing to sweep: no write transaction
            return 0
        with self.db.write() as c:
            return self._sweep(c, now)

    def _compacted_in(self, key: str | None) -> int:
        args: tuple[str, ...] = (self.namespace,)
        if key is None:
            sql = "SELECT compacted FROM sf_state_meta WHERE ns = ?"
        else:
            sql = "SELECT compacted FROM sf_state WHERE ns = ? AND key = ?"
            args = (self.namespace, key)
        rows = self.db.read(sql, args)
        return int(rows[0][0]) if rows else 0

    def compacted(self) -> int:
        return self._compacted_in(None)

    def changes(
        self, after: int, *, prefix: str = "", limit: int = 100, upto: int | None = None
    ) -> list[StateChange]:
        rows = self.db.read(
            f"SELECT {LOG_COLS}, (SELECT compacted FROM sf_state_meta WHERE ns = :ns) "
            "FROM sf_state_log l WHERE l.ns = :ns AND l.revision > :after "
            "AND (:upto IS NULL OR l.revision <= :upto) AND substr(l.key, 1, :n) = :prefix "
            "ORDER BY l.revision LIMIT :limit",
            {
                "ns": self.namespace,
                "after": after,
                "upto": upto,
                "n": len(prefix),
                "prefix": prefix,
                "limit": limit,
            },
        )
        compacted = int(rows[0][-1] or 0) if rows else self.compacted()
        if after < compacted:
            oldest = self.db.read(
                "SELECT MIN(revision) FROM sf_state_log WHERE ns = ?", (self.namespace,)
            )[0][0]
            raise CompactedError(
                f"namespace {self.namespace!r}", after + 1, int(oldest or self.revision() + 1)
            )
        return [_change(r[:-1]) for r in rows]

    def watch_read(
        self, after: int, *, prefix: str = "", limit: int = 100, now: float
    ) -> WatchRead:
        """A watch's look in one statement, so from one snapshot: the namespace's revision,
        its compaction mark, whether a key is due to expire, and the changes after
        ``after`` under ``prefix`` (a row of NULL changes when there are none)."""
        rows = self.db.read(
            WATCH_READ,
            watch_params(self.namespace, after, now, prefix, limit),
        )
        head, compacted, due, oldest = rows[0][:4]
        if after < int(compacted or 0):
            raise CompactedError(
                f"namespace {self.namespace!r}", after + 1, int(oldest or int(head or 0) + 1)
            )
        got = [_change(r[4:]) for r in rows if r[4] is not None]
        scanned = got[-1].revision if len(got) >= limit else max(int(head or 0), after)
        return WatchRead(got, scanned, due is not None)

    def history(self, key: str) -> list[StateChange]:
        rows = self.db.read(HISTORY, {"ns": self.namespace, "key": key})
        return [_change(r) for r in rows]

    def read_at(self, key: str, revision: int) -> StateChange | None:
        # The log row first, the mark second (as ``changes`` does): a compaction committing
        # between the two reads can only turn a missing row into CompactedError, never
        # delete an answer already read.
        rows = self.db.read(READ_AT, {"ns": self.namespace, "key": key, "rev": revision})
        if not rows:
            if self._compacted_in(key) > 0:  # older changes were removed: the answer is gone
                kept = self.history(key)
                raise CompactedError(
                    f"key {key!r}", revision, kept[0].revision if kept else self.revision() + 1
                )
            return None
        ch = _change(rows[0])
        return ch if ch.value is not None else None

    def compact(self, *, keep: int | None, before: float | None) -> int:
        ns = self.namespace
        with self.db.write() as c:
            rows = c.execute(
                "SELECT key, revision, at FROM sf_state_log WHERE ns = ?", (ns,)
            ).fetchall()
            gone, top = compaction_victims(
                [(r[0], int(r[1]), float(r[2])) for r in rows], keep, before
            )
            if not gone:
                return 0
            c.executemany(
                "DELETE FROM sf_state_log WHERE ns = ? AND revision = ?",
                [(ns, r) for r in sorted(gone)],
            )
            c.executemany(
                "UPDATE sf_state SET compacted = MAX(compacted, ?) WHERE ns = ? AND key = ?",
                [(r, ns, k) for k, r in top.items()],
            )
            c.execute(
                "INSERT INTO sf_state_meta (ns, compacted) VALUES (?, ?) ON CONFLICT (ns) "
                "DO UPDATE SET compacted = MAX(compacted, excluded.compacted)",
                (ns, max(gone)),
            )
            return len(gone)

    def wait(self, after: int, timeout: float) -> bool:
        """Until the namespace's revision passes ``after``: read when another connection
        has committed (``PRAGMA data_version``, looked at when the file is written: see
        ``_changes``)."""
        return self.db.wait_for_commit(lambda: self.revision() > after, timeout)

    # -- writes ----------------------------------------------------------------------------

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
        ttl: float | None = None,
    ) -> StateRecord:
        limit = self.db.max_value_bytes
        if limit and len(value) * 4 > limit:  # no character is over 4 bytes: the rest fit
            check_size(self.db.url, f"the value of key {key!r}", value, limit)
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
            "exp": expires_at(now, ttl),
            "sum": key_sum(key, value),
        }
        # One statement, no read before it; nothing is written while a key is due to expire
        # (UPDATE_ONE), and then, as when it is refused, the transaction below says why.
        if expect:
            one = UPDATE_ONE_NOFENCE if fence is None else UPDATE_ONE
        else:
            one = UPSERT_ONE_NOFENCE if fence is None else UPSERT_ONE
        rows = self.db.write_returning(one, params)
        if rows:
            if not expect:
                return _record(rows[0])
            rev, lineage = rows[0]
            return _versioned(key, expect, rev, lineage, params)
        if fence is None:
            sql = UPDATE_NOFENCE if expect else UPSERT_NOFENCE
        else:
            sql = UPDATE if expect else UPSERT
        # BEGIN IMMEDIATE, the expiry check, one statement (its trigger logs the change),
        # COMMIT: run by db.transact, without a context manager on this hot path.
        out = self.db.transact(self._write_in, sql, params, key, expect, fence, now)
        if isinstance(out, ConflictError):
            raise out
        return out

    def _write_in(
        self,
        c: sqlite3.Connection,
        sql: str,
        params: dict[str, Any],
        key: str,
        expect: int | None,
        fence: tuple[str, int] | None,
        now: float,
    ) -> StateRecord | ConflictError:
        if expect:  # the one read gives the revision and lineage: no RETURNING
            ns = self.namespace
            due, top, lineage = c.execute(WRITE_READ, (ns, key, now)).fetchone()
            if due is not None:
                self._sweep_due(c, now)
                due, top, lineage = c.execute(WRITE_READ, (ns, key, None)).fetchone()
            params["rev"] = rev = (top or 0) + 1
            if c.execute(sql, params).rowcount == 1:
                return _versioned(key, expect, rev, lineage + 1, params)
            return self._refusal(c, key, expect, fence)
        if c.execute(DUE, (self.namespace, now)).fetchone() is not None:
            self._sweep_due(c, now)
        row = c.execute(sql, params).fetchone()
        if row is not None:
            return _record(row)
        # Nothing written: say why, from the same transaction, and raise it after the
        # commit: the expiry sweep above is a change of its own (as on other backends).
        return self._refusal(c, key, expect, fence)

    def _refusal(
        self, c: sqlite3.Connection, key: str, expect: int | None, fence: tuple[str, int] | None
    ) -> ConflictError:
        """The ``ConflictError`` :meth:`_refuse` raises, returned."""
        try:
            self._refuse(c, key, expect, fence)
        except ConflictError as exc:
            return exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _refuse(
        self, c: sqlite3.Connection, key: str, expect: int | None, fence: tuple[str, int] | None
    ) -> None:
        """Raise the ``ConflictError`` of a condition that failed (fence first)."""
        if fence is not None:
            lease = c.execute(CURRENT, (self.namespace, fence[0])).fetchone()
            if lease is None or lease[3] or lease[0] != fence[1]:
                raise write_conflict("fence", key, expect, fence, _shown(lease))
        cur = c.execute(CURRENT, (self.namespace, key)).fetchone()
        if cur is not None and cur[4] in LIST_OPS and not cur[3]:  # its value is its items
            rec = self._read_in(c, key)
            assert rec is not None
            cur = (cur[0], rec.value, cur[2], 0)
        raise write_conflict("conflict", key, expect, fence, _shown(cur))

    def delete(
        self,
        key: str,
        *,
        author: str,
        trust: str,
        expect: int | None,
        now: float,
        fence: tuple[str, int] | None = None,
    ) -> StateChange | None:
        with self.db.write() as c:  # a refusal is raised after the sweep commits
            self._sweep(c, now)
            refused = None
            if fence is not None:
                lease = c.execute(CURRENT, (self.namespace, fence[0])).fetchone()
                if lease is None or lease[3] or lease[0] != fence[1]:
                    refused = self._refusal(c, key, expect, fence)
            cur = c.execute(CURRENT, (self.namespace, key)).fetchone()
            dead = cur is None or cur[3] != 0
            version = cur[0] if cur is not None else 0
            if refused is None and (
                expect is not None and expect != version and not (dead and expect == 0)
            ):
                refused = self._refusal(c, key, expect, None)
            if refused is None:
                return None if dead else self._tombstone(c, key, author, trust, now, 1)
        raise refused

    def txn(
        self,
        compare: list[tuple[str, int]],
        success: list[TxnOp],
        failure: list[TxnOp],
        *,
        author: str,
        trust: str,
        now: float,
    ) -> tuple[bool, list[StateChange], tuple[str, int, str | None, str] | None]:
        limit = self.db.max_value_bytes
        for op in (*success, *failure):
            if op[0] == "put":
                check_size(self.db.url, f"the value of key {op[1]!r}", op[2], limit)
        with self.db.write() as c:  # one transaction: every compare and every operation
            self._sweep(c, now)
            failed = None
            for key, version in compare:
                cur = c.execute(CURRENT, (self.namespace, key)).fetchone()
                have = cur[0] if cur is not None and cur[3] == 0 else 0
                if have != version:
                    value = cur[1] if have else None
                    if have and cur[4] in LIST_OPS:  # its value is its items
                        rec = self._read_in(c, key)
                        value = rec.value if rec is not None else None
                    failed = (key, have, value, cur[2] if have else "")
                    break
            made = []
            for op in txn_plan(success if failed is None else failure):
                if op[0] == "delete":
                    ch = self._tombstone(c, op[1], author, trust, now, 1)
                    if ch is not None:
                        made.append(ch)
                    continue
                params = {
                    "ns": self.namespace,
                    "key": op[1],
                    "value": op[2],
                    "author": author,
                    "trust": trust,
                    "now": now,
                    "expect": None,
                    "sver": None,
                    "slin": None,
                    "exp": expires_at(now, op[3]),
                    "sum": key_sum(op[1], op[2]),
                }
                self._drop_items(c, op[1])
                rec = _record(c.execute(UPSERT_NOFENCE, params).fetchone())
                made.append(
                    StateChange(
                        rec.revision,
                        rec.key,
                        "put",
                        rec.value,
                        rec.version,
                        author,
                        trust,
                        now,
                        rec.expires_at,
                    )
                )
            return failed is None, made, failed

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
        if limit and len(arg) * 4 > limit:  # no character is over 4 bytes: the rest fit
            check_size(self.db.url, f"the contribution to key {key!r}", arg, limit)
        entry = log_entry(author, trust, now, merge_id, op, arg)
        if op in LIST_OPS:
            return self._merge_list(key, op, arg, author, trust, now, merge_id, entry)
        with self.db.write() as c:  # the file's write lock: no other writer until COMMIT
            self._sweep(c, now)
            row = c.execute(
                f"SELECT {COLS}, NULL, NULL, checksum FROM sf_state "
                "WHERE ns = ? AND key = ? AND deleted = 0",
                (self.namespace, key),
            ).fetchone()
            cur = self._checked(row) if row is not None else None  # not merged into
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
                "sum": key_sum(key, value),
            }
            rec = _record(c.execute(MERGE, params).fetchone())
            return MergeOutcome.of(rec, True)

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
        if op == "append":  # any JSON text (the codec's) appends as is: nothing to parse
            item = arg
        else:
            item = json.dumps(check_contribution(key, op, arg))
        return self.db.transact(
            self._merge_list_in, key, op, item, author, trust, now, merge_id, entry
        )

    def _merge_list_in(
        self,
        c: sqlite3.Connection,
        key: str,
        op: str,
        item: str,
        author: str,
        trust: str,
        now: float,
        merge_id: str | None,
        entry: str,
    ) -> MergeOutcome:
        ns, limit = self.namespace, self.db.max_value_bytes
        # One read: the key's row (all NULL when it has none) and whether a key is due to
        # expire; only then the sweep, and the row read again after it.
        found = c.execute(LIST_ROW, (ns, key, now)).fetchone()
        if found[8] is not None:
            self._sweep_due(c, now)
            found = c.execute(LIST_ROW, (ns, key, None)).fetchone()
        row: Any = found if found[0] is not None else None
        live = row is not None and row[7] == 0
        if live and row[2] != op:
            raise merge_refused(key, op, self.db.url, "op", self._read_in(c, key))
        size = (row[3] if live else 2) + len(item.encode("utf-8", "surrogatepass"))
        size += 1 if live and row[3] > 2 else 0  # the comma
        # The primary key (ns, key, the id or else n) and the unique index on (key, member)
        # find a duplicate.
        n = (row[0] if row is not None else 0) + 1
        added = c.execute(
            "INSERT INTO sf_state_items (ns, key, slot, n, item, entry, member) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (ns, key, n if merge_id is None else merge_id, n, item, entry,
             item if op == "set_add" else None),
        ).rowcount  # fmt: skip
        if not added:
            assert row is not None  # a duplicate needs an earlier item
            return MergeOutcome(key, row[0], row[4], row[5], row[1], row[6], False)
        if limit and size > limit:  # rolled back with the item
            raise ValueTooLargeError(self.db.url, f"the value of key {key!r}", size, limit)
        rev = (found[9] or 0) + 1
        lowered = lower_trust(row[1] if live else None, trust)
        params = {
            "ns": ns,
            "key": key,
            "rev": rev,
            "author": author,
            "trust": lowered,
            "now": now,
            "op": op,
            "size": size,
        }
        # Always applies: the next version of the key's row, or its first.
        c.execute(MERGE_LIST if row is None else MERGE_LIST_UPDATE, params)
        version = row[0] + 1 if row is not None else 1
        return MergeOutcome(key, version, rev, author, lowered, float(now), True)

    def __repr__(self) -> str:
        return f"SQLiteStateStore({self.db.path!r}, {self.namespace!r})"


def _shown(row: tuple[Any, ...] | None) -> tuple[int, str | None, str] | None:
    """A current row as ``write_conflict`` shows it: a tombstone has no value."""
    if row is None:
        return None
    return (int(row[0]), None if row[3] else row[1], str(row[2]))
