"""Redis ``StateStore``: versioned keys in one hash per namespace, written by one Lua script.

Layout (``P`` is the URL's prefix, ``ns`` the namespace; the braces keep a namespace's keys in
one cluster slot)::

    P:state:{ns}        hash   key -> JSON [value, version, revision, author, trust, written_at,
                               lineage]   (no lineage, from before it was kept: = version)
    P:state:{ns}:rev    string the namespace's global revision (INCR)
    P:state:{ns}:lost   string the namespace's lost updates, sum of version - lineage (INCRBY)

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

from ...errors import ValueTooLargeError
from ..base import MergeOutcome, StateRecord, check_size, write_conflict
from ..merges import check_contribution, log_entry, merge_refused
from ._client import RedisDB

__all__ = ["RedisStateStore"]

_WRITE = """
local function version_of(raw)
  if raw then return tonumber(cjson.decode(raw)[2]) end
  return 0
end
if ARGV[7] ~= '' then
  local lease = redis.call('HGET', KEYS[1], ARGV[7])
  local held = version_of(lease)
  if (not lease) or held ~= tonumber(ARGV[8]) then  -- a missing lease never matches
    return {'fence', ARGV[7], held, lease or ''}
  end
end
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local version = version_of(raw)
if ARGV[5] ~= '' and tonumber(ARGV[5]) ~= version then
  return {'conflict', ARGV[1], version, raw or ''}
end
local lineage = 0
if raw then lineage = tonumber(cjson.decode(raw)[7] or version) end
local new_lineage = lineage + 1
if ARGV[5] == '' and ARGV[9] ~= '' and tonumber(ARGV[9]) < version then
  new_lineage = tonumber(ARGV[10]) + 1  -- a stale write descends from what its writer read
end
local delta = (version + 1 - new_lineage) - (version - lineage)
if delta ~= 0 then redis.call('INCRBY', KEYS[3], delta) end
local rev = redis.call('INCR', KEYS[2])
local rec = cjson.encode({ARGV[2], version + 1, rev, ARGV[3], ARGV[4], ARGV[6], new_lineage})
redis.call('HSET', KEYS[1], ARGV[1], rec)
return {'ok', rec}
"""


_MERGE = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local op, arg, id = ARGV[2], ARGV[3], ARGV[7]
local rec
local v, log, ids, extra = nil, '[]', {}, {}
if raw then
  rec = cjson.decode(raw)
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
if rec then version, lineage = rec[2] + 1, (rec[7] or rec[2]) + 1 end
local rev = redis.call('INCR', KEYS[2])
local new = cjson.encode({v, version, rev, ARGV[4], trust, ARGV[6], lineage, op, log, ids,
                          extra})
redis.call('HSET', KEYS[1], ARGV[1], new)
return {'ok', new}
"""


def _record(key: str, raw: str) -> StateRecord:
    value, version, revision, author, trust, written_at, *rest = json.loads(raw)
    lineage = int(rest[0]) if rest else int(version)
    op, log = (rest[1], rest[2]) if len(rest) > 2 else (None, None)
    return StateRecord(
        key, value, int(version), int(revision), author, trust, float(written_at), lineage, op, log
    )


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
        self._write = db.script("state_write", _WRITE)
        self._merge = db.script("state_merge", _MERGE)

    def read(self, key: str) -> StateRecord | None:
        raw = self.db.call(lambda c: c.hget(self._hash, key), write=False)
        return _record(key, raw) if raw is not None else None

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
        ]
        out: list[Any] = self.db.call(
            lambda c: self._write(keys=[self._hash, self._rev, self._lost], args=args, client=c)
        )
        if out[0] == "ok":
            return _record(key, out[1])
        kind, which, version, raw = out
        cur = _record(which, raw) if raw else None
        current = (int(version), cur.value, cur.author) if cur is not None else None
        raise write_conflict(kind, key, expect, fence, current)

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
        out: list[Any] = self.db.call(
            lambda c: self._merge(keys=[self._hash, self._rev], args=args, client=c)
        )
        kind = out[0]
        if kind == "size":
            raise ValueTooLargeError(self.db.url, f"the value of key {key!r}", int(out[1]), limit)
        rec = _record(key, out[1]) if out[1] else None
        if kind in ("ok", "dup") and rec is not None:
            return MergeOutcome.of(rec, kind == "ok")
        raise merge_refused(key, op, self.db.url, kind, rec)

    def snapshot(self) -> dict[str, StateRecord]:
        rows: dict[str, str] = self.db.call(lambda c: c.hgetall(self._hash), write=False)
        return {k: _record(k, rows[k]) for k in sorted(rows)}

    def revision(self) -> int:
        raw = self.db.call(lambda c: c.get(self._rev), write=False)
        return int(raw) if raw is not None else 0

    def lost_updates(self) -> int:
        raw = self.db.call(lambda c: c.get(self._lost), write=False)
        return int(raw) if raw is not None else 0

    def __repr__(self) -> str:
        return f"RedisStateStore({self.namespace!r}, prefix={self.db.prefix!r})"
