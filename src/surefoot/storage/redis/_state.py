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
                               same per key), log (1: the log was kept from the start)

A deleted or expired key is a tombstone: ``[null, version, revision, author, trust, at,
lineage, "$dead", kind]``, so its version keeps counting. A namespace written before the log
existed (no ``log`` mark) reads as compacted up to its revision then: its earlier changes
were never logged. Watches block on ``XREAD`` of the log (no consumer group).

A key made by merges has five more elements: its merge op, its log (JSON text), the ids
its log holds, and (``set_add``) its members or (``merge``) its fields, each field's value
kept as JSON text: the script splices text and never re-encodes a user's value, so numbers
and empty lists come back exactly as they went in.

The compare-version-and-set, the fence check, the revision bump and the write are one script,
so they are atomic on the server and cost one round trip.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import CompactedError, ValueTooLargeError
from ..base import (
    MergeOutcome,
    StateChange,
    StateRecord,
    TxnOp,
    check_size,
    expires_at,
    write_conflict,
)
from ..history import compaction_victims, txn_plan
from ..merges import check_contribution, log_entry, merge_refused
from ._client import RedisDB

__all__ = ["RedisStateStore"]

_PRELUDE = """
local function tombstone(key, author, trust, now, kind)
  local raw = redis.call('HGET', KEYS[1], key)
  if not raw then return nil end
  local rec = cjson.decode(raw)
  if rec[8] == '$dead' then return nil end
  local rev = redis.call('INCR', KEYS[2])
  local version, lineage = rec[2] + 1, (rec[7] or rec[2]) + 1
  redis.call('HSET', KEYS[1], key, cjson.encode({'null', version, rev, author, trust, now,
                                                  lineage, '$dead', kind}))
  redis.call('ZREM', KEYS[4], key)
  redis.call('XADD', KEYS[5], rev .. '-1', 'k', key, 't', kind, 'n', version, 'a', author,
             'r', trust, 'at', now)
  return {rev, version}
end
local function sweep(now)
  local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
  for _, key in ipairs(due) do tombstone(key, 'system', 'system', now, 'expire') end
end
local function logged(key, kind, value, version, rev, author, trust, at, exp)
  if exp ~= '' then redis.call('ZADD', KEYS[4], exp, key) end
  redis.call('XADD', KEYS[5], rev .. '-1', 'k', key, 't', kind, 'v', value, 'n', version,
             'a', author, 'r', trust, 'at', at, 'x', exp)
end
local function put(key, value, author, trust, at, exp, expect, sver, slin)
  local raw = redis.call('HGET', KEYS[1], key)
  local version, lineage, dead = 0, 0, true
  if raw then
    local rec = cjson.decode(raw)
    version, lineage, dead = tonumber(rec[2]), tonumber(rec[7] or rec[2]), rec[8] == '$dead'
  end
  if expect ~= '' and tonumber(expect) ~= version and not (dead and tonumber(expect) == 0) then
    return nil, {'conflict', key, version, raw or ''}
  end
  local new_lineage = lineage + 1
  if expect == '' and sver ~= '' and tonumber(sver) < version then
    new_lineage = tonumber(slin) + 1  -- a stale write descends from what its writer read
  end
  local delta = (version + 1 - new_lineage) - (version - lineage)
  if delta ~= 0 then redis.call('INCRBY', KEYS[3], delta) end
  local rev = redis.call('INCR', KEYS[2])
  local rec = cjson.encode({value, version + 1, rev, author, trust, at, new_lineage})
  redis.call('HSET', KEYS[1], key, rec)
  if exp == '' then redis.call('ZREM', KEYS[4], key) end
  logged(key, 'put', value, version + 1, rev, author, trust, at, exp)
  return rec, nil
end
"""

# KEYS: hash, rev, lost, ttl, log. ARGV: key, value, author, trust, expect, now, fence key,
# fence version, seen version, seen lineage, expires at.
_WRITE = (
    _PRELUDE
    + """
sweep(ARGV[6])
if ARGV[7] ~= '' then
  local lease = redis.call('HGET', KEYS[1], ARGV[7])
  local held = 0
  if lease then held = tonumber(cjson.decode(lease)[2]) end
  -- a missing (or deleted) lease never matches
  if (not lease) or cjson.decode(lease)[8] == '$dead' or held ~= tonumber(ARGV[8]) then
    return {'fence', ARGV[7], held, lease or ''}
  end
end
local rec, refused = put(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[6], ARGV[11], ARGV[5],
                         ARGV[9], ARGV[10])
if refused then return refused end
return {'ok', rec}
"""
)

# ARGV: key, author, trust, expect, now, fence key, fence version.
_DELETE = (
    _PRELUDE
    + """
sweep(ARGV[5])
if ARGV[6] ~= '' then
  local lease = redis.call('HGET', KEYS[1], ARGV[6])
  local held = 0
  if lease then held = tonumber(cjson.decode(lease)[2]) end
  if (not lease) or cjson.decode(lease)[8] == '$dead' or held ~= tonumber(ARGV[7]) then
    return {'fence', ARGV[6], held, lease or ''}
  end
end
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local version, dead = 0, true
if raw then
  local rec = cjson.decode(raw)
  version, dead = tonumber(rec[2]), rec[8] == '$dead'
end
if ARGV[4] ~= '' and tonumber(ARGV[4]) ~= version and not (dead and tonumber(ARGV[4]) == 0) then
  return {'conflict', ARGV[1], version, raw or ''}
end
if dead then return {'none'} end
local out = tombstone(ARGV[1], ARGV[2], ARGV[3], ARGV[5], 'delete')
return {'ok', out[1], out[2]}
"""
)

# ARGV: now, author, trust, the transaction as JSON {compare, success, failure}.
_TXN = (
    _PRELUDE
    + """
local now, author, trust = ARGV[1], ARGV[2], ARGV[3]
sweep(now)
local t = cjson.decode(ARGV[4])
local failed = nil
for _, c in ipairs(t.compare) do
  local raw = redis.call('HGET', KEYS[1], c[1])
  local have, value, by = 0, '', ''
  if raw then
    local rec = cjson.decode(raw)
    if rec[8] ~= '$dead' then have, value, by = tonumber(rec[2]), rec[1], rec[4] end
  end
  if have ~= tonumber(c[2]) then failed = {c[1], have, value, by}; break end
end
local ops = t.success
if failed then ops = t.failure end
local made = {}
for _, op in ipairs(ops) do
  if op[1] == 'delete' then
    local out = tombstone(op[2], author, trust, now, 'delete')
    if out then made[#made + 1] = cjson.encode({'delete', op[2], out[1], out[2]}) end
  else
    local rec = put(op[2], op[3], author, trust, now, op[4], '', '', '')
    local r = cjson.decode(rec)
    made[#made + 1] = cjson.encode({'put', op[2], r[3], r[2]})
  end
end
if failed then return {'failed', cjson.encode(failed), unpack(made)} end
return {'ok', '', unpack(made)}
"""
)

# ARGV: revisions to remove, as JSON; then key, revision pairs (the highest removed per key).
_COMPACT = """
local gone = cjson.decode(ARGV[1])
local top = 0
for _, rev in ipairs(gone) do
  redis.call('XDEL', KEYS[1], rev .. '-1')
  if tonumber(rev) > top then top = tonumber(rev) end
end
for i = 2, #ARGV, 2 do
  local f = 'c:' .. ARGV[i]
  local cur = tonumber(redis.call('HGET', KEYS[2], f) or '0')
  if tonumber(ARGV[i + 1]) > cur then redis.call('HSET', KEYS[2], f, ARGV[i + 1]) end
end
local cur = tonumber(redis.call('HGET', KEYS[2], 'compacted') or '0')
if top > cur then redis.call('HSET', KEYS[2], 'compacted', top) end
return #gone
"""

# Mark a namespace's log as kept from now on; one written before gets compacted = its revision.
_MARK = """
if redis.call('HGET', KEYS[2], 'log') then return 0 end
local rev = redis.call('GET', KEYS[1])
if rev then redis.call('HSET', KEYS[2], 'compacted', rev) end
-- The log starts with each key's current version, as the SQL migrations start it.
local rows = redis.call('HGETALL', KEYS[3])
local current = {}
for i = 1, #rows, 2 do
  local rec = cjson.decode(rows[i + 1])
  current[#current + 1] = {tonumber(rec[3]), rows[i], rec}
  if tonumber(rec[2]) > 1 then redis.call('HSET', KEYS[2], 'c:' .. rows[i], rec[3]) end
end
table.sort(current, function(a, b) return a[1] < b[1] end)
for _, c in ipairs(current) do
  local rec, kind = c[3], 'put'
  if rec[8] then kind = 'merge' end
  redis.call('XADD', KEYS[4], c[1] .. '-1', 'k', c[2], 't', kind, 'v', rec[1], 'n', rec[2],
             'a', rec[4], 'r', rec[5], 'at', rec[6], 'x', '')
end
redis.call('HSET', KEYS[2], 'log', 1)
return 1
"""

_SWEEP = (
    _PRELUDE
    + """
local before = tonumber(redis.call('GET', KEYS[2]) or '0')
sweep(ARGV[1])
return tonumber(redis.call('GET', KEYS[2]) or '0') - before
"""
)


_MERGE = (
    _PRELUDE
    + """
sweep(ARGV[6])
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local op, arg, id = ARGV[2], ARGV[3], ARGV[7]
local rec, dead
local v, log, ids, extra = nil, '[]', {}, {}
if raw then
  rec = cjson.decode(raw)
  if rec[8] == '$dead' then dead, rec, raw = rec, nil, nil end
end
if raw then
  if rec[8] ~= op then return {'op', raw} end
  v, log, ids, extra = rec[1], rec[9], rec[10], rec[11]
end
if id ~= '' and ids[id] then return {'dup', raw} end
local function splice(items, item)
  if (not items) or items == '[]' then return '[' .. item .. ']' end
  return string.sub(items, 1, -2) .. ',' .. item .. ']'
end
local function num(n, float)
  if (not float) and n == math.floor(n) and math.abs(n) < 9007199254740992 then
    return string.format('%d', n)
  end
  local s = string.format('%.17g', n)
  if not string.find(s, '[%.eEn]') then s = s .. '.0' end
  return s
end
if op == 'append' or op == 'set_add' then
  if v and string.sub(v, 1, 1) ~= '[' then return {'kind', raw} end
  if op == 'set_add' then
    if extra[arg] then return {'dup', raw} end
    extra[arg] = 1
  end
  v = splice(v, arg)
elseif op == 'add' or op == 'max' or op == 'min' then
  local a = tonumber(arg)
  if v then
    local c = tonumber(v)
    if not c then return {'kind', raw} end
    local float = string.find(v, '[%.eE]') or string.find(arg, '[%.eE]')
    if op == 'add' then v = num(c + a, float)
    elseif (op == 'max' and a > c) or (op == 'min' and a < c) then v = arg end
  else
    v = arg
  end
elseif op == 'merge' then
  if v and string.sub(v, 1, 1) ~= '{' then return {'kind', raw} end
  for i = 10, #ARGV, 2 do extra[ARGV[i]] = ARGV[i + 1] end
  local names = {}
  for name in pairs(extra) do names[#names + 1] = name end
  table.sort(names)
  local parts = {}
  for i, name in ipairs(names) do parts[i] = cjson.encode(name) .. ':' .. extra[name] end
  v = '{' .. table.concat(parts, ',') .. '}'
else
  return {'unsupported', raw or ''}
end
local limit = tonumber(ARGV[9])
if limit > 0 and string.len(v) > limit then return {'size', string.len(v)} end
if id ~= '' then ids[id] = 1 end
log = splice(log, ARGV[8])
local trust = ARGV[5]
if rec then
  if rec[5] == 'untrusted' or trust == 'untrusted' then trust = 'untrusted'
  elseif rec[5] == 'trusted' or trust == 'trusted' then trust = 'trusted' end
end
local version, lineage = 1, 1
local was = rec or dead
if was then version, lineage = was[2] + 1, (was[7] or was[2]) + 1 end
local rev = redis.call('INCR', KEYS[2])
local new = cjson.encode({v, version, rev, ARGV[4], trust, ARGV[6], lineage, op, log, ids,
                          extra})
redis.call('HSET', KEYS[1], ARGV[1], new)
logged(ARGV[1], 'merge', v, version, rev, ARGV[4], trust, ARGV[6], '')
return {'ok', new}
"""
)


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
        self._keys = [self._hash, self._rev, self._lost, self._ttl, self._logkey]
        self._write = db.script("state_write_v2", _WRITE)
        self._merge = db.script("state_merge_v2", _MERGE)
        self._delete = db.script("state_delete", _DELETE)
        self._txn = db.script("state_txn", _TXN)
        self._compact = db.script("state_compact", _COMPACT)
        self._sweep = db.script("state_sweep", _SWEEP)
        mark = db.script("state_log_mark", _MARK)
        db.call(
            lambda c: mark(keys=[self._rev, self._meta, self._hash, self._logkey], client=c),
            write=False,
        )

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

    def history(self, key: str) -> list[StateChange]:
        """The key's kept changes: one pass over the namespace's log."""
        return [ch for ch in self._range(0) if ch.key == key]

    def read_at(self, key: str, revision: int) -> StateChange | None:
        # The log first, the mark second (as ``changes`` does): a compaction committing
        # between the two reads can only turn a missing change into CompactedError, never
        # delete an answer already read.
        kept = self.history(key)
        found = None
        for ch in kept:
            if ch.revision > revision:
                break
            found = ch
        if found is None:
            raw = self.db.call(lambda c: c.hget(self._meta, "c:" + key), write=False)
            if raw is not None and int(raw) > 0:  # older changes were removed: the answer is gone
                oldest = kept[0].revision if kept else self.revision() + 1
                raise CompactedError(f"key {key!r}", revision, oldest)
            return None
        return found if found.value is not None else None

    def compact(self, *, keep: int | None, before: float | None) -> int:
        rows = self._range(0)
        gone, top = compaction_victims([(ch.key, ch.revision, ch.at) for ch in rows], keep, before)
        if not gone:
            return 0
        args = [json.dumps(sorted(gone))]
        for key, rev in top.items():
            args += [key, str(rev)]
        out = self.db.call(
            lambda c: self._compact(keys=[self._logkey, self._meta], args=args, client=c)
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
        out: list[Any] = self.db.call(lambda c: self._write(keys=self._keys, args=args, client=c))
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
        out: list[Any] = self.db.call(lambda c: self._merge(keys=self._keys, args=args, client=c))
        kind = out[0]
        if kind == "size":
            raise ValueTooLargeError(self.db.url, f"the value of key {key!r}", int(out[1]), limit)
        rec = _record(key, out[1]) if out[1] else None
        if kind in ("ok", "dup") and rec is not None:
            return MergeOutcome.of(rec, kind == "ok")
        raise merge_refused(key, op, self.db.url, kind, rec)

    def __repr__(self) -> str:
        return f"RedisStateStore({self.namespace!r}, prefix={self.db.prefix!r})"
