"""PostgreSQL ``StateStore``: versioned keys, one function call (one round trip) per write.

A write is ``SELECT * FROM sf_state_write(…)``, a PL/pgSQL function created by the migration.
It first locks the namespace's revision row, so writers of one namespace take turns (as
SQLite's write lock makes them), and every statement after the lock sees the other writers'
committed work (READ COMMITTED takes a snapshot per statement). Then it checks the fence and
the expected version, bumps the namespace's revision and upserts the key. Revisions have no
gaps and no duplicates, and a failed condition writes nothing and returns the current row.
"""

from __future__ import annotations

import time
from typing import Any

from ...errors import CompactedError, ConflictError, ValueTooLargeError
from ..checks import check_size
from ..history import WatchRead, compaction_victims, txn_plan, watch_params
from ..merges import check_contribution, log_entry, merge_refused
from ..state import MergeOutcome, StateChange, StateRecord, TxnOp, expires_at, write_conflict
from ._db import NOT_APPLIED, Listener, PostgresDB
from ._state_schema import MIGRATIONS

__all__ = ["MIGRATIONS", "PostgresStateStore"]

_COLS = (
    "key, value, version, revision, author, trust, written_at, lineage, merge_op, merge_log, "
    "expires_at"
)
_LIVE = "deleted = 0 AND (%(at)s::float8 IS NULL OR expires_at IS NULL OR expires_at > %(at)s)"
_LOG_COLS = "revision, key, kind, value, version, author, trust, at, expires_at"
_LOCK = (
    "INSERT INTO sf_state_ns AS n (ns, revision) VALUES (%s, 0) "
    "ON CONFLICT (ns) DO UPDATE SET revision = n.revision"
)
# What a watch needs per look, in one statement (one snapshot, one round trip): the
# namespace's revision and compaction mark, whether a key's TTL ran out, the oldest kept
# revision (only when the watcher is behind the mark), and the changes themselves.
_WATCH_READ = f"""
SELECT n.revision, n.compacted,
       EXISTS (SELECT 1 FROM sf_state WHERE ns = q.ns AND expires_at <= %(now)s),
       CASE WHEN %(after)s < n.compacted
            THEN (SELECT MIN(revision) FROM sf_state_log WHERE ns = q.ns) END,
       {", ".join("l." + c for c in _LOG_COLS.split(", "))}
FROM (SELECT %(ns)s::text AS ns) q
LEFT JOIN sf_state_ns n ON n.ns = q.ns
LEFT JOIN LATERAL (
    SELECT {_LOG_COLS} FROM sf_state_log
    WHERE ns = q.ns AND revision > %(after)s AND revision <= n.revision
      AND left(key, %(n)s) = %(prefix)s
    ORDER BY revision LIMIT %(limit)s
) l ON true
ORDER BY l.revision
"""

# Whether a write whose answer was lost is in the log (see ``write``): its version, revision,
# author and lineage, as ``sf_state_write`` answers.
_LANDED = """
SELECT l.version, l.revision, l.author, COALESCE(s.lineage, l.version)
FROM sf_state_log l
LEFT JOIN sf_state s ON s.ns = l.ns AND s.key = l.key AND s.revision = l.revision
WHERE l.ns = %(ns)s AND l.key = %(key)s AND l.kind = 'put' AND l.value = %(value)s
  AND l.author = %(author)s AND l.at = %(at)s
  AND (%(expect)s::bigint IS NULL OR %(expect)s = 0 OR l.version = %(expect)s + 1)
ORDER BY l.revision DESC LIMIT 1
"""

# Whether a merge whose answer was lost is in: the key's row when its merge log holds the
# contribution's entry, in the shape ``sf_state_merge`` answers.
_MERGED = """
SELECT value, version, revision, author, trust, written_at, lineage, merge_op, merge_log
FROM sf_state WHERE ns = %s AND key = %s AND deleted = 0
  AND merge_log::jsonb @> jsonb_build_array(%s::jsonb)
"""


def _change(row: tuple[Any, ...]) -> StateChange:
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


def _record(row: tuple[Any, ...]) -> StateRecord:
    k, v, ver, rev, author, trust, at, lineage, op, log, *exp = row
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
        float(exp[0]) if exp and exp[0] is not None else None,
    )


class PostgresStateStore:
    """Versioned keys of one namespace in PostgreSQL, shared by many processes and machines.

    Args:
        db: the database (``PostgresDB``), shared with the other protocol objects.
        namespace: keys of different namespaces never meet.
    """

    def __init__(self, db: PostgresDB, namespace: str = "default") -> None:
        self.db = db
        self.namespace = namespace
        db.migrate("statestore", MIGRATIONS)

    def read(self, key: str, now: float | None = None) -> StateRecord | None:
        rows = self.db.execute(
            f"SELECT {_COLS} FROM sf_state WHERE ns = %(ns)s AND key = %(key)s AND {_LIVE}",
            {"ns": self.namespace, "key": key, "at": now},
            write=False,
        )
        return _record(rows[0]) if rows else None

    # -- the log ---------------------------------------------------------------------------

    def expire(self, now: float) -> int:
        due = self.db.execute(
            "SELECT 1 FROM sf_state WHERE ns = %s AND expires_at <= %s LIMIT 1",
            (self.namespace, now),
            write=False,
        )
        if not due:  # nothing to sweep: no write transaction
            return 0

        def sweep(conn: Any) -> int:
            conn.execute(_LOCK, (self.namespace,))
            row = conn.execute("SELECT sf_state_sweep(%s, %s)", (self.namespace, now)).fetchone()
            return int(row[0])

        return self.db.run(sweep, tx=True)

    def compacted(self) -> int:
        rows = self.db.execute(
            "SELECT compacted FROM sf_state_ns WHERE ns = %s", (self.namespace,), write=False
        )
        return int(rows[0][0]) if rows else 0

    def changes(
        self, after: int, *, prefix: str = "", limit: int = 100, upto: int | None = None
    ) -> list[StateChange]:
        rows = self.db.execute(
            f"SELECT {_LOG_COLS} FROM sf_state_log WHERE ns = %(ns)s AND revision > %(after)s "
            "AND (%(upto)s::bigint IS NULL OR revision <= %(upto)s) "
            "AND left(key, %(n)s) = %(prefix)s ORDER BY revision LIMIT %(limit)s",
            {
                "ns": self.namespace,
                "after": after,
                "upto": upto,
                "n": len(prefix),
                "prefix": prefix,
                "limit": limit,
            },
            write=False,
        )
        compacted = self.compacted()
        if after < compacted:
            oldest = self.db.execute(
                "SELECT MIN(revision) FROM sf_state_log WHERE ns = %s",
                (self.namespace,),
                write=False,
            )[0][0]
            raise CompactedError(
                f"namespace {self.namespace!r}", after + 1, int(oldest or self.revision() + 1)
            )
        return [_change(r) for r in rows]

    def watch_read(
        self, after: int, *, prefix: str = "", limit: int = 100, now: float
    ) -> WatchRead:
        rows = self.db.execute(
            _WATCH_READ,
            watch_params(self.namespace, after, now, prefix, limit),
            write=False,
        )
        head, compacted, due, oldest = rows[0][:4]
        if after < int(compacted or 0):
            raise CompactedError(
                f"namespace {self.namespace!r}", after + 1, int(oldest or int(head) + 1)
            )
        got = [_change(r[4:]) for r in rows if r[4] is not None]
        scanned = got[-1].revision if len(got) >= limit else max(int(head or 0), after)
        return WatchRead(got, scanned, bool(due))

    def history(self, key: str) -> list[StateChange]:
        rows = self.db.execute(
            f"SELECT {_LOG_COLS} FROM sf_state_log WHERE ns = %s AND key = %s ORDER BY revision",
            (self.namespace, key),
            write=False,
        )
        return [_change(r) for r in rows]

    def read_at(self, key: str, revision: int) -> StateChange | None:
        # The log row first, the mark second (as ``changes`` does): a compaction committing
        # between the two reads can only turn a missing row into CompactedError, never
        # delete an answer already read.
        rows = self.db.execute(
            f"SELECT {_LOG_COLS} FROM sf_state_log WHERE ns = %s AND key = %s "
            "AND revision <= %s ORDER BY revision DESC LIMIT 1",
            (self.namespace, key, revision),
            write=False,
        )
        if not rows:
            mark = self.db.execute(
                "SELECT compacted FROM sf_state WHERE ns = %s AND key = %s",
                (self.namespace, key),
                write=False,
            )
            if mark and int(mark[0][0]) > 0:  # older changes were removed: the answer is gone
                kept = self.history(key)
                raise CompactedError(
                    f"key {key!r}", revision, kept[0].revision if kept else self.revision() + 1
                )
            return None
        ch = _change(rows[0])
        return ch if ch.value is not None else None

    def compact(self, *, keep: int | None, before: float | None) -> int:
        ns = self.namespace

        def trim(conn: Any) -> int:
            conn.execute(_LOCK, (ns,))
            rows = conn.execute(
                "SELECT key, revision, at FROM sf_state_log WHERE ns = %s", (ns,)
            ).fetchall()
            gone, top = compaction_victims(
                [(r[0], int(r[1]), float(r[2])) for r in rows], keep, before
            )
            if not gone:
                return 0
            conn.execute(
                "DELETE FROM sf_state_log WHERE ns = %s AND revision = ANY(%s)",
                (ns, sorted(gone)),
            )
            for key, rev in top.items():
                conn.execute(
                    "UPDATE sf_state SET compacted = GREATEST(compacted, %s) "
                    "WHERE ns = %s AND key = %s",
                    (rev, ns, key),
                )
            conn.execute(
                "UPDATE sf_state_ns SET compacted = GREATEST(compacted, %s) WHERE ns = %s",
                (max(gone), ns),
            )
            return len(gone)

        return self.db.run(trim, tx=True)

    def wait(self, after: int, timeout: float) -> bool:
        """LISTEN on the schema's ``state`` channel (the log's trigger NOTIFYs it at
        commit), on a connection opened for this wait; a watch keeps one open instead
        (:meth:`waiter`)."""
        waiter = _Waiter(self, probe=True)
        try:
            return waiter.wait(after, timeout)
        finally:
            waiter.close()

    def waiter(self) -> _Waiter:
        """A waiter that keeps its LISTEN connection between waits (close it when done)."""
        return _Waiter(self)

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
        ns = self.namespace

        def remove(conn: Any) -> StateChange | ConflictError | None:
            # A refusal is returned, not raised: the expiry sweep commits (its own change).
            conn.execute(_LOCK, (ns,))
            conn.execute("SELECT sf_state_sweep(%s, %s)", (ns, now))
            cur_sql = (
                "SELECT version, value, author, deleted FROM sf_state WHERE ns = %s AND key = %s"
            )
            if fence is not None:
                lease = conn.execute(cur_sql, (ns, fence[0])).fetchone()
                if lease is None or lease[3] or lease[0] != fence[1]:
                    return write_conflict("fence", key, expect, fence, _shown(lease))
            cur = conn.execute(cur_sql, (ns, key)).fetchone()
            dead = cur is None or cur[3] != 0
            version = int(cur[0]) if cur is not None else 0
            if expect is not None and expect != version and not (dead and expect == 0):
                return write_conflict("conflict", key, expect, fence, _shown(cur))
            if dead:
                return None
            ver, rev = conn.execute(
                "SELECT * FROM sf_state_tombstone(%s, %s, %s, %s, %s, 1::SMALLINT)",
                (ns, key, author, trust, now),
            ).fetchone()
            return StateChange(int(rev), key, "delete", None, int(ver), author, trust, now)

        out = self.db.run(remove, tx=True)
        if isinstance(out, ConflictError):
            raise out
        return out

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
        """One transaction: the namespace lock, then each compared key's row locked in key
        order, then the chosen branch's writes through the same functions as single ones."""
        limit = self.db.max_value_bytes
        for op in (*success, *failure):
            if op[0] == "put":
                check_size(self.db.url, f"the value of key {op[1]!r}", op[2], limit)
        ns = self.namespace

        def run(conn: Any) -> Any:
            conn.execute(_LOCK, (ns,))
            conn.execute("SELECT sf_state_sweep(%s, %s)", (ns, now))
            keys = sorted({k for k, _ in compare})
            rows = conn.execute(
                "SELECT key, version, value, author, deleted FROM sf_state "
                'WHERE ns = %s AND key = ANY(%s) ORDER BY key COLLATE "C" FOR UPDATE',
                (ns, keys),
            ).fetchall()
            found = {r[0]: r for r in rows}
            failed = None
            for key, version in compare:
                r = found.get(key)
                have = int(r[1]) if r is not None and r[4] == 0 else 0
                if have != version:
                    failed = (
                        (key, have, r[2], r[3]) if r is not None and have else (key, 0, None, "")
                    )
                    break
            made = []
            for op in txn_plan(success if failed is None else failure):
                if op[0] == "delete":
                    out = conn.execute(
                        "SELECT * FROM sf_state_tombstone(%s, %s, %s, %s, %s, 1::SMALLINT)",
                        (ns, op[1], author, trust, now),
                    ).fetchone()
                    if out is not None:
                        made.append(
                            StateChange(
                                int(out[1]), op[1], "delete", None, int(out[0]), author, trust, now
                            )
                        )
                    continue
                exp = expires_at(now, op[3])
                _, _, _, ver, rev, _, _ = conn.execute(
                    "SELECT * FROM sf_state_write(%s, %s, %s, %s, %s, NULL, %s, NULL, NULL, "
                    "NULL, NULL, %s)",
                    (ns, op[1], op[2], author, trust, float(now), exp),
                ).fetchone()
                made.append(
                    StateChange(int(rev), op[1], "put", op[2], int(ver), author, trust, now, exp)
                )
            return failed is None, made, failed

        out: tuple[bool, list[StateChange], tuple[str, int, str | None, str] | None]
        out = self.db.run(run, tx=True)
        return out

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
        check_size(self.db.url, f"the value of key {key!r}", value, self.db.max_value_bytes)
        exp = expires_at(now, ttl)
        params = (
            self.namespace,
            key,
            value,
            author,
            trust,
            expect,
            float(now),
            fence[0] if fence else None,
            fence[1] if fence else None,
            seen[0] if seen else None,
            seen[1] if seen else None,
            exp,
        )

        def send(conn: Any) -> Any:
            self.db.round_trips += 1
            return conn.execute(
                "SELECT * FROM sf_state_write(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                params,
            ).fetchone()

        def landed(conn: Any) -> Any:
            # The write is recognised in the log by what it wrote: key, value, author and
            # the writer's timestamp (and, over a version, the version it made).
            found = conn.execute(
                _LANDED,
                {
                    "ns": self.namespace,
                    "key": key,
                    "value": value,
                    "author": author,
                    "at": float(now),
                    "expect": expect,
                },
            ).fetchone()
            return NOT_APPLIED if found is None else ("ok", key, value, *found)

        row = self.db.run(send, resolve=landed)
        kind, _, cur_value, version, revision, cur_author, lineage = row
        if kind == "ok":
            return StateRecord(
                key,
                value,
                int(version),
                int(revision),
                author,
                trust,
                float(now),
                int(lineage),
                expires_at=exp,
            )
        raise write_conflict(kind, key, expect, fence, (version, cur_value, cur_author))

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
        check_contribution(key, op, arg)
        if op == "reduce":
            raise merge_refused(key, op, self.db.url)
        entry = log_entry(author, trust, now, merge_id, op, arg)
        params = (self.namespace, key, op, arg, author, trust, float(now), merge_id, entry, limit)

        def send(conn: Any) -> Any:
            self.db.round_trips += 1
            return conn.execute(
                "SELECT * FROM sf_state_merge(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", params
            ).fetchone()

        def landed(conn: Any) -> Any:
            # The contribution's own log entry (author, trust, timestamp, id) in the key's
            # merge log: the key as it is now, with it in.
            found = conn.execute(_MERGED, (self.namespace, key, entry)).fetchone()
            return NOT_APPLIED if found is None else ("ok", *found)

        # With an id, sending it again is safe: the store drops a contribution it has.
        row = self.db.run(send, idempotent=merge_id is not None, resolve=landed)
        kind, *cols = row
        if kind == "size":
            raise ValueTooLargeError(self.db.url, f"the value of key {key!r}", int(cols[1]), limit)
        rec = _record((key, *cols)) if cols[0] is not None else None
        if kind in ("ok", "dup") and rec is not None:
            return MergeOutcome.of(rec, kind == "ok")
        raise merge_refused(key, op, self.db.url, kind, rec)

    def snapshot(self, now: float | None = None) -> dict[str, StateRecord]:
        rows = self.db.execute(
            f'SELECT {_COLS} FROM sf_state WHERE ns = %(ns)s AND {_LIVE} ORDER BY key COLLATE "C"',
            {"ns": self.namespace, "at": now},
            write=False,
        )
        return {r[0]: _record(r) for r in rows}

    def revision(self) -> int:
        rows = self.db.execute(
            "SELECT revision FROM sf_state_ns WHERE ns = %s", (self.namespace,), write=False
        )
        return int(rows[0][0]) if rows else 0

    def lost_updates(self) -> int:
        rows = self.db.execute(
            "SELECT COALESCE(SUM(version - lineage), 0) FROM sf_state WHERE ns = %s",
            (self.namespace,),
            write=False,
        )
        return int(rows[0][0])

    def __repr__(self) -> str:
        return f"PostgresStateStore({self.db.url!r}, {self.namespace!r})"


def _shown(row: tuple[Any, ...] | None) -> tuple[int, str | None, str] | None:
    """A current row as ``write_conflict`` shows it: a tombstone has no value."""
    if row is None:
        return None
    return (int(row[0]), None if row[3] else row[1], str(row[2]))


class _Waiter:
    """Waits on the ``state`` channel, whose payload is the namespace that changed.

    A notification for this namespace is the wake-up; no query runs for it (a watch's next
    read, ``watch_read``, is its one round trip). A commit made before the connection
    listened is not announced to it, so a fresh LISTEN connection (the first wait, or one
    after the connection was lost) returns at once for the caller to read again; with
    ``probe`` it looks at the revision instead (a one-off ``wait`` reads nothing after).
    """

    def __init__(self, store: PostgresStateStore, *, probe: bool = False) -> None:
        self.store = store
        self.probe = probe
        self.listener: Listener | None = None
        self._connections = 0

    def wait(self, after: int, timeout: float) -> bool:
        if self.listener is None:
            self.listener = self.store.db.listener("state")
        listener = self.listener
        deadline = time.monotonic() + timeout
        left = 0.0  # first take what is queued (and connect), without blocking
        while True:
            got = listener.wait(left)
            if listener.connections != self._connections:  # listening since just now
                self._connections = listener.connections
                if not self.probe or self.store.revision() > after:
                    return True
            elif got and self.store.namespace in listener.payloads:
                return True
            left = deadline - time.monotonic()
            if left <= 0:  # nothing, or only other namespaces changed
                return False

    def close(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()
