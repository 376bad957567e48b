"""Redis ``StateStore``: versioned keys in one hash per namespace, written by one Lua script.

Layout (``P`` is the URL's prefix, ``ns`` the namespace; the braces keep a namespace's keys in
one cluster slot)::

    P:state:{ns}        hash   key -> JSON [value, version, revision, author, trust, written_at,
                               lineage]   (no lineage, from before it was kept: = version)
    P:state:{ns}:rev    string the namespace's global revision (INCR)
    P:state:{ns}:lost   string the namespace's lost updates, sum of version - lineage (INCRBY)

    P:state:{ns}:ttl    zset   key -> when it expires (keys written with a TTL)
    P:state:{ns}:log    stream the change log: one entry per revision, id ``<revision>-1``,
                               fields k (key), t (kind), v (value; none for a tombstone),
                               n (version), a (author), r (trust), at, x (expires at)
    P:state:{ns}:meta   hash   compacted (highest revision compaction removed), c:<key> (the
                               same per key), log (1: the log was kept from the start),
                               index (1: every kept change is in the index)
    P:state:{ns}:index  zset   ``key NUL revision`` (20 digits) per kept change, scores 0:
                               a key's revisions in order, so history and read_at read only
                               that key's changes, not the namespace's log

A deleted or expired key is a tombstone: ``[null, version, revision, author, trust, at,
lineage, "$dead", kind]``, so its version keeps counting. A namespace written before the log
existed (no ``log`` mark) reads as compacted up to its revision then: its earlier changes
were never logged; one whose log was kept before the index (no ``index`` mark) has its kept
changes indexed in one script when it is opened (key layout 2 marks the prefix, so an older
surefoot, which would log without indexing, refuses it). Watches block on ``XREAD`` of the
log (no consumer group) and read with one ``MULTI`` (``watch_read``).

A key made by merges has five more elements: its merge op, its log (JSON text), the ids
its log holds, and (``set_add``) its members or (``merge``) its fields, each field's value
kept as JSON text: the script splices text and never re-encodes a user's value, so numbers
and empty lists come back exactly as they went in.

The compare-version-and-set, the fence check, the revision bump, the write, its log entry and
its index entry are one script (``_state_lua``), so they are atomic on the server and cost one
round trip.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import CompactedError, StoreError, ValueTooLargeError
from ..checks import check_size
from ..history import WatchRead, compaction_victims, txn_plan
from ..merges import check_contribution, log_entry, merge_refused
from ..state import MergeOutcome, StateChange, StateRecord, TxnOp, expires_at, write_conflict
from ._client import NOT_APPLIED, RedisDB
from ._state_lua import COMPACT, DELETE, HISTORY, MARK, MERGE, READ_AT, SWEEP, TXN, WRITE

__all__ = ["RedisStateStore"]


def _record(key: str, raw: str, exp: float | None = None) -> StateRecord:
    value, version, revision, author, trust, written_at, *rest = json.loads(raw)
    lineage = int(rest[0]) if rest else int(version)
    op, log = (rest[1], rest[2]) if len(rest) > 2 else (None, None)
    return StateRecord(
        key,
        value,
        int(version),
        int(revision),
        author,
        trust,
        float(written_at),
        lineage,
        op,
        log,
        exp,
    )


def _dead(raw: str) -> bool:
    """A tombstone record (a deleted or expired key)."""
    return '"$dead"' in raw and json.loads(raw)[7:8] == ["$dead"]


def _change(entry_id: str, fields: dict[str, str]) -> StateChange:
    x = fields.get("x", "")
    return StateChange(
        int(entry_id.split("-")[0]),
        fields["k"],
        fields["t"],
        fields.get("v"),
        int(fields["n"]),
        fields["a"],
        fields["r"],
        float(fields["at"]),
        float(x) if x else None,
    )


def _fields(flat: list[str]) -> dict[str, str]:
    """A log entry's fields as a script returns them (a flat list), as a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _num(x: float | None) -> str:
    return "" if x is None else repr(float(x))


class RedisStateStore:
    """Versioned keys of one namespace on Redis; every write is one Lua script.

    Args:
        db: the shared client.
        namespace: the namespace.
    """

    def __init__(self, db: RedisDB, namespace: str = "default") -> None:
        self.db = db
        self.namespace = namespace
        self._hash = db.key("state", "{" + namespace + "}")
        self._rev = self._hash + ":rev"
        self._lost = self._hash + ":lost"
        self._ttl = self._hash + ":ttl"
        self._logkey = self._hash + ":log"
        self._meta = self._hash + ":meta"
        self._index = self._hash + ":index"
        self._keys = [self._hash, self._rev, self._lost, self._ttl, self._logkey, self._index]
        self._write = db.script("state_write_v3", WRITE)
        self._merge = db.script("state_merge_v3", MERGE)
        self._delete = db.script("state_delete_v2", DELETE)
        self._txn = db.script("state_txn_v2", TXN)
        self._compact = db.script("state_compact_v2", COMPACT)
        self._sweep = db.script("state_sweep_v2", SWEEP)
        self._history = db.script("state_history", HISTORY)
        self._read_at = db.script("state_read_at", READ_AT)
        mark = db.script("state_log_mark_v2", MARK)
        keys = [self._rev, self._meta, self._hash, self._logkey, self._index]
        import redis  # redis-py is loaded by now (the client above uses it)

        try:
            db.call(lambda c: mark(keys=keys, client=c), write=False)
        except redis.ResponseError as exc:
            # the log is ahead of the marks that say how far it was migrated: the server
            # lost some of this namespace's keys (a restart without persistence, a FLUSH)
            raise StoreError(
                db.url,
                f"the Redis state of namespace {namespace!r} is incomplete: its change log "
                f"exists but the marks beside it ({self._meta!r}) were lost ({exc}). The "
                "server lost data (a restart without appendonly, a deleted key); restore it "
                "from a backup, or delete the namespace's keys to start it empty.",
            ) from exc

    # -- reads ---------------------------------------------------------------------------

    def read(self, key: str, now: float | None = None) -> StateRecord | None:
        def get(c: Any) -> list[Any]:
            p = c.pipeline(transaction=False)
            p.hget(self._hash, key)
            p.zscore(self._ttl, key)
            return list(p.execute())

        raw, exp = self.db.call(get, write=False)
        if raw is None or _dead(raw) or (exp is not None and now is not None and exp <= now):
            return None
        return _record(key, raw, exp)

    def snapshot(self, now: float | None = None) -> dict[str, StateRecord]:
        def get(c: Any) -> list[Any]:
            p = c.pipeline(transaction=False)
            p.hgetall(self._hash)
            p.zrange(self._ttl, 0, -1, withscores=True)
            return list(p.execute())

        rows, ttls = self.db.call(get, write=False)
        exps = dict(ttls)
        out = {}
        for k in sorted(rows):
            exp = exps.get(k)
            if _dead(rows[k]) or (exp is not None and now is not None and exp <= now):
                continue
            out[k] = _record(k, rows[k], exp)
        return out

    def revision(self) -> int:
        raw = self.db.call(lambda c: c.get(self._rev), write=False)
        return int(raw) if raw is not None else 0

    def lost_updates(self) -> int:
        raw = self.db.call(lambda c: c.get(self._lost), write=False)
        return int(raw) if raw is not None else 0

    # -- the log ---------------------------------------------------------------------------

    def expire(self, now: float) -> int:
        due = self.db.call(lambda c: c.zcount(self._ttl, "-inf", now), write=False)
        if not due:  # nothing to sweep: no script
            return 0
        out = self.db.call(
            lambda c: self._sweep(keys=self._keys, args=[repr(float(now))], client=c)
        )
        return int(out)

    def compacted(self) -> int:
        raw = self.db.call(lambda c: c.hget(self._meta, "compacted"), write=False)
        return int(raw) if raw is not None else 0

    def _range(self, after: int, count: int | None = None) -> list[StateChange]:
        entries = self.db.call(
            lambda c: c.xrange(self._logkey, min=f"({after}-1" if after else "-", count=count),
            write=False,
        )
        return [_change(i, f) for i, f in entries]

    def changes(
        self, after: int, *, prefix: str = "", limit: int = 100, upto: int | None = None
    ) -> list[StateChange]:
        out: list[StateChange] = []
        cursor = after
        while len(out) < limit:
            batch = self._range(cursor, count=max(limit, 100))
            if not batch:
                break
            for ch in batch:
                if upto is not None and ch.revision > upto:
                    break
                if ch.key.startswith(prefix):
                    out.append(ch)
                    if len(out) >= limit:
                        break
            else:
                cursor = batch[-1].revision
                continue
            break
        compacted = self.compacted()
        if after < compacted:
            first = self._range(0, count=1)
            oldest = first[0].revision if first else self.revision() + 1
            raise CompactedError(f"namespace {self.namespace!r}", after + 1, oldest)
        return out

    def watch_read(
        self, after: int, *, prefix: str = "", limit: int = 100, now: float
    ) -> WatchRead:
        """One ``MULTI``: due expiries, the revision, the compaction mark, the oldest kept
        change and a batch of the log after ``after`` (read on only when that batch was
        all other keys' changes)."""
        count = max(limit, 100)
        start = f"({after}-1" if after else "-"

        def look(c: Any) -> list[Any]:
            p = c.pipeline(transaction=True)
            p.zcount(self._ttl, "-inf", now)
            p.get(self._rev)
            p.hget(self._meta, "compacted")
            p.xrange(self._logkey, count=1)
            p.xrange(self._logkey, min=start, count=count)
            return list(p.execute())

        due, head, compacted, first, batch = self.db.call(look, write=False)
        head = int(head or 0)
        if after < int(compacted or 0):
            oldest = int(first[0][0].split("-")[0]) if first else head + 1
            raise CompactedError(f"namespace {self.namespace!r}", after + 1, oldest)
        out: list[StateChange] = []
        while True:
            for entry_id, fields in batch:
                if fields["k"].startswith(prefix):
                    out.append(_change(entry_id, fields))
                    if len(out) >= limit:
                        return WatchRead(out, out[-1].revision, bool(due))
            if len(batch) < count:  # read to the end of the log: up to the head
                return WatchRead(out, max(head, after), bool(due))
            # a whole batch of other keys' changes: read on, up to the head read above
            batch = [
                e
                for e in self._range_from(f"({batch[-1][0]}", count)
                if int(e[0].split("-")[0]) <= head
            ]
            if not batch:
                return WatchRead(out, max(head, after), bool(due))

    def _range_from(self, start: str, count: int) -> list[Any]:
        return list(
            self.db.call(lambda c: c.xrange(self._logkey, min=start, count=count), write=False)
        )

    def history(self, key: str) -> list[StateChange]:
        """The key's kept changes, through its index: one script reading only them."""
        entries = self.db.call(
            lambda c: self._history(keys=[self._index, self._logkey], args=[key], client=c),
            write=False,
        )
        return [_change(i, _fields(f)) for i, f in entries]

    def read_at(self, key: str, revision: int) -> StateChange | None:
        found, mark, oldest, head = self.db.call(
            lambda c: self._read_at(
                keys=[self._index, self._logkey, self._meta, self._rev],
                args=[key, f"{int(revision):020d}"],
                client=c,
            ),
            write=False,
        )
        if not found:
            if int(mark) > 0:  # older changes were removed: the answer is gone
                raise CompactedError(
                    f"key {key!r}", revision, int(oldest) if oldest else int(head) + 1
                )
            return None
        ch = _change(found[0], _fields(found[1]))
        return ch if ch.value is not None else None

    def compact(self, *, keep: int | None, before: float | None) -> int:
        rows = self._range(0)
        gone, top = compaction_victims([(ch.key, ch.revision, ch.at) for ch in rows], keep, before)
        if not gone:
            return 0
        args = [json.dumps([[ch.revision, ch.key] for ch in rows if ch.revision in gone])]
        for key, rev in top.items():
            args += [key, str(rev)]
        out = self.db.call(
            lambda c: self._compact(
                keys=[self._logkey, self._meta, self._index], args=args, client=c
            )
        )
        return int(out)

    def wait(self, after: int, timeout: float) -> bool:
        """``XREAD BLOCK`` on the log after revision ``after`` (no consumer group)."""
        block = max(1, int(min(timeout, self.db.socket_timeout / 2) * 1000))
        got = self.db.call(
            lambda c: c.xread({self._logkey: f"{after}-1"}, count=1, block=block), write=False
        )
        return bool(got) or self.revision() > after

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
        check_size(self.db.url, f"the value of key {key!r}", value, self.db.max_value_bytes)
        exp = expires_at(now, ttl)
        args = [
            key,
            value,
            author,
            trust,
            "" if expect is None else str(int(expect)),
            repr(float(now)),
            fence[0] if fence is not None else "",
            str(int(fence[1])) if fence is not None else "",
            str(int(seen[0])) if seen is not None else "",
            str(int(seen[1])) if seen is not None else "",
            _num(exp),
        ]
        at = float(now)

        def landed() -> Any:
            # The write is recognised in the key's history by what it wrote: value, author
            # and the writer's timestamp (and, over a version, the version it made).
            for ch in reversed(self.history(key)):
                if (
                    ch.kind == "put"
                    and (ch.value, ch.author, ch.at) == (value, author, at)
                    and (not expect or ch.version == expect + 1)
                ):
                    cur = self.read(key)
                    same = cur is not None and cur.revision == ch.revision
                    lineage = cur.lineage if same and cur is not None else ch.version
                    rec = StateRecord(
                        key,
                        value,
                        ch.version,
                        ch.revision,
                        author,
                        trust,
                        at,
                        lineage,
                        expires_at=exp,
                    )
                    return ["found", rec]
            return NOT_APPLIED

        out: list[Any] = self.db.call(
            lambda c: self._write(keys=self._keys, args=args, client=c), resolve=landed
        )
        if out[0] == "found":
            found: StateRecord = out[1]
            return found
        if out[0] == "ok":
            return _record(key, out[1], exp)
        raise self._refused(key, expect, fence, out)

    def _refused(
        self, key: str, expect: int | None, fence: tuple[str, int] | None, out: list[Any]
    ) -> Exception:
        kind, which, version, raw = out
        cur = _record(which, raw) if raw else None
        shown = None if cur is None or _dead(raw) else cur.value
        current = (int(version), shown, cur.author) if cur is not None else None
        return write_conflict(kind, key, expect, fence, current)

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
        args = [
            key,
            author,
            trust,
            "" if expect is None else str(int(expect)),
            repr(float(now)),
            fence[0] if fence is not None else "",
            str(int(fence[1])) if fence is not None else "",
        ]
        out: list[Any] = self.db.call(lambda c: self._delete(keys=self._keys, args=args, client=c))
        if out[0] == "none":
            return None
        if out[0] == "ok":
            return StateChange(int(out[1]), key, "delete", None, int(out[2]), author, trust, now)
        raise self._refused(key, expect, fence, out)

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
        branches: dict[str, list[list[str]]] = {"success": [], "failure": []}
        exps: dict[tuple[str, str], float | None] = {}
        for name, ops in (("success", success), ("failure", failure)):
            for op in txn_plan(ops):
                if op[0] == "put":
                    check_size(self.db.url, f"the value of key {op[1]!r}", op[2], limit)
                    exp = expires_at(now, op[3])
                    exps[(name, op[1])] = exp
                    branches[name].append(["put", op[1], op[2], _num(exp)])
                else:
                    branches[name].append(["delete", op[1]])
        body = json.dumps({"compare": [[k, int(v)] for k, v in compare], **branches})
        args = [repr(float(now)), author, trust, body]
        out: list[Any] = self.db.call(lambda c: self._txn(keys=self._keys, args=args, client=c))
        ok = out[0] == "ok"
        branch = "success" if ok else "failure"
        values = {op[1]: op[2] for op in (success if ok else failure) if op[0] == "put"}
        made = []
        for item in out[2:]:
            kind, key, rev, ver = json.loads(item)
            made.append(
                StateChange(
                    int(rev),
                    key,
                    kind,
                    values.get(key) if kind == "put" else None,
                    int(ver),
                    author,
                    trust,
                    now,
                    exps.get((branch, key)) if kind == "put" else None,
                )
            )
        failed = None
        if not ok:
            key, have, value, by = json.loads(out[1])
            failed = (key, int(have), value or None, by)
        return ok, made, failed

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
        data = check_contribution(key, op, arg)
        if op == "reduce":
            raise merge_refused(key, op, self.db.url)
        if op == "set_add":
            arg = json.dumps(data)  # one spelling per member: it is the member's identity
        fields: list[str] = []
        if op == "merge":
            for name, item in data.items():
                fields += [name, json.dumps(item, separators=(",", ":"))]
        args = [
            key,
            op,
            arg,
            author,
            trust,
            repr(float(now)),
            merge_id or "",
            log_entry(author, trust, now, merge_id, op, arg),
            str(limit),
            *fields,
        ]
        entry = json.loads(args[7])

        def landed() -> Any:
            # The contribution's own log entry (author, trust, timestamp, id) in the key's
            # merge log: the key as it is now, with it in.
            cur = self.read(key)
            if cur is None or not cur.merge_log or entry not in json.loads(cur.merge_log):
                return NOT_APPLIED
            return ["found", cur]

        # With an id, sending it again is safe: the store drops a contribution it has.
        out: list[Any] = self.db.call(
            lambda c: self._merge(keys=self._keys, args=args, client=c),
            idempotent=merge_id is not None,
            resolve=landed,
        )
        if out[0] == "found":
            return MergeOutcome.of(out[1], True)
        kind = out[0]
        if kind == "size":
            raise ValueTooLargeError(self.db.url, f"the value of key {key!r}", int(out[1]), limit)
        rec = _record(key, out[1]) if out[1] else None
        if kind in ("ok", "dup") and rec is not None:
            return MergeOutcome.of(rec, kind == "ok")
        raise merge_refused(key, op, self.db.url, kind, rec)

    def __repr__(self) -> str:
        return f"RedisStateStore({self.namespace!r}, prefix={self.db.prefix!r})"
