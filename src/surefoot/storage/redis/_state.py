"""Redis ``StateStore``: versioned keys in one hash per namespace, written by one Lua script.

Layout (``P`` is the URL's prefix, ``ns`` the namespace; the braces keep a namespace's keys in
one cluster slot)::

    P:state:{ns}        hash   key -> JSON [value, version, revision, author, trust, written_at,
                               lineage]   (no lineage, from before it was kept: = version)
    P:state:{ns}:rev    string the namespace's global revision (INCR)
    P:state:{ns}:lost   string the namespace's lost updates, sum of version - lineage (INCRBY)

The compare-version-and-set, the fence check, the revision bump and the write are one script,
so they are atomic on the server and cost one round trip.
"""

from __future__ import annotations

import json
from typing import Any

from ..base import StateRecord, check_size, write_conflict
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


def _record(key: str, raw: str) -> StateRecord:
    value, version, revision, author, trust, written_at, *rest = json.loads(raw)
    lineage = int(rest[0]) if rest else int(version)
    return StateRecord(
        key, value, int(version), int(revision), author, trust, float(written_at), lineage
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
