r"""Redis ``StreamLog``: the log is a Redis Stream; ids, cursors, leases and dead letters are
small structures beside it, and every operation is one Lua script (atomic, one round trip).

Layout (``P`` is the prefix; the braces keep one stream's keys in one cluster slot)::

    P:stream:{name}:log          Redis Stream, entry id "<seq>-0", fields m (id), p, a (time)
    P:stream:{name}:last         last sequence number
    P:stream:{name}:ids          hash message id -> seq; a trimmed one's: "seq sha1 time"
    P:stream:{name}:idt          sorted set of trimmed ids, scored by their append time
    P:stream:{name}:cur          hash consumer -> position (last seq handed out)
    P:stream:{name}:rm           hash consumer -> 1: groups remove_consumer forgot
    P:stream:{name}:pv:<c>       sorted set of pending seqs, scored by when they are visible
    P:stream:{name}:pa:<c>       hash seq -> deliveries so far
    P:stream:{name}:ph:<c>       hash seq -> delivery history (JSON array)
    P:stream:{name}:dead:<c>     sorted set of dead-lettered seqs
    P:stream:{name}:dr:<c>       hash seq -> dead-letter reason

Why not consumer groups (``XREADGROUP``/``XAUTOCLAIM``)? Their idle times run on the server's
clock, while the ``StreamLog`` protocol takes ``now`` from the caller (a ``FakeClock`` in
tests, the same clock the SQLite and PostgreSQL backends use), and a nack with a delay or a
cap on deliveries that dead-letters has no consumer-group equivalent. The scripts below keep
the same pending-list model with the caller's time.

Retention: an append with limits (and ``trim``) runs the same Lua trim, which keeps what a
registered consumer (a field of ``cur``) has not settled, moves the ids of trimmed messages
younger than the dedup window to ``idt`` (with a SHA-1 of the payload, to tell a retry from a
reused id) and ``XTRIM … MINID``\s the log. A blocked ``wait`` is an ``XREAD BLOCK`` on the
log: the server wakes it when an entry past the reader's sequence number is added.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ...errors import DuplicateMessageError
from ..checks import check_size
from ..sql.stream import consumer_removed
from ..streams import (
    ClaimedMessage,
    ConsumerStats,
    DeadRecord,
    Retention,
    StreamRecord,
    StreamStats,
    check_range,
    stream_conflict,
)
from ._client import RedisDB

__all__ = ["RedisStream", "redis_streams"]

# Shared Lua: append a pre-encoded JSON object to a JSON array kept as a string, so floats
# written by Python keep their full precision (cjson would round them to 14 digits).
_HIST = """
local function hist_append(key, field, entry)
  local h = redis.call('HGET', key, field)
  if (not h) or h == '[]' then h = '[' .. entry .. ']'
  else h = string.sub(h, 1, -2) .. ',' .. entry .. ']' end
  redis.call('HSET', key, field, h)
end
local function entry_of(log, seq)
  local e = redis.call('XRANGE', log, seq .. '-0', seq .. '-0')[1]
  local f = e[2]
  local out = {}
  for i = 1, #f, 2 do out[f[i]] = f[i + 1] end
  return out
end
"""

# Trim by retention. KEYS: log ids last cur idt ; targs: max age_cut forget base (max and
# age_cut may be ''). Keeps the last message and everything a registered consumer owes.
_TRIM = """
local function forget_ids(ids, idt, forget)
  for _, mid in ipairs(redis.call('ZRANGEBYSCORE', idt, '-inf', '(' .. forget)) do
    redis.call('HDEL', ids, mid)
  end
  redis.call('ZREMRANGEBYSCORE', idt, '-inf', '(' .. forget)
end
local function trim(log, ids, lastk, cur, idt, maxn, agecut, forget, base)
  forget_ids(ids, idt, forget)
  local last = tonumber(redis.call('GET', lastk) or '0')
  if last == 0 then return 0 end
  local head = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)[1]
  if not head then return 0 end
  local first = tonumber(string.sub(head[1], 1, -3))
  local first_at = tonumber(head[2][6])
  local keep = 0
  if maxn ~= '' then keep = last + 1 - tonumber(maxn) end
  if first >= keep and (agecut == '' or first_at >= tonumber(agecut)) then return 0 end
  if agecut ~= '' then
    local young = nil
    local cut = tonumber(agecut)
    local from = '-'
    while not young do  -- in pages, oldest first, until the first young message
      local page = redis.call('XRANGE', log, from, '+', 'COUNT', 100)
      if #page == 0 then young = last break end
      for _, e in ipairs(page) do
        if tonumber(e[2][6]) >= cut then young = tonumber(string.sub(e[1], 1, -3)) break end
      end
      from = '(' .. page[#page][1]
    end
    if young > keep then keep = young end
  end
  if keep > last then keep = last end
  local cons = redis.call('HGETALL', cur)
  for i = 1, #cons, 2 do
    local c = cons[i]
    local p = tonumber(cons[i + 1]) + 1
    if p < keep then keep = p end
    for _, seq in ipairs(redis.call('ZRANGE', base .. ':pv:' .. c, 0, -1)) do
      if tonumber(seq) < keep then keep = tonumber(seq) end
    end
    local d = redis.call('ZRANGE', base .. ':dead:' .. c, 0, 0)[1]
    if d and tonumber(d) < keep then keep = tonumber(d) end
  end
  if keep <= first then return 0 end
  local gone = redis.call('XRANGE', log, '-', '(' .. keep .. '-0')
  local cutf = tonumber(forget)
  for _, e in ipairs(gone) do
    local seq = string.sub(e[1], 1, -3)
    local mid, at = e[2][2], e[2][6]
    if tonumber(at) >= cutf then
      redis.call('HSET', ids, mid, seq .. ' ' .. redis.sha1hex(e[2][4]) .. ' ' .. at)
      redis.call('ZADD', idt, at, mid)
    else
      redis.call('HDEL', ids, mid)
    end
  end
  redis.call('XTRIM', log, 'MINID', keep .. '-0')
  return #gone
end
"""

# KEYS: log ids last cur idt ; ARGV: id payload now expect trim(1|0) max age_cut forget base
_APPEND = """
if ARGV[5] == '1' then forget_ids(KEYS[2], KEYS[5], ARGV[8]) end
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then
  local sp = string.find(old, ' ')
  if sp then
    local seq, digest, at = string.match(old, '^(%d+) (%x+) (.+)$')
    if digest == redis.sha1hex(ARGV[2]) then return {'dup', seq, ARGV[2], at} end
    return {'dup', seq, false, at}
  end
  local e = entry_of(KEYS[1], old)
  return {'dup', old, e['p'], e['a']}
end
local last = tonumber(redis.call('GET', KEYS[3]) or '0')
if ARGV[4] ~= '' and tonumber(ARGV[4]) ~= last then
  return {'conflict', tostring(last)}
end
local seq = last + 1
redis.call('XADD', KEYS[1], seq .. '-0', 'm', ARGV[1], 'p', ARGV[2], 'a', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], seq)
redis.call('SET', KEYS[3], seq)
if ARGV[5] == '1' then
  trim(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
end
return {'ok', tostring(seq)}
"""

_TRIM_CALL = """
return trim(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
"""

# KEYS: log cur last rm ; ARGV: consumer. A removed group starts after the last message.
_REGISTER = """
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
if redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], tonumber(redis.call('GET', KEYS[3]) or '0'))
  return 1
end
local head = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
local first = 1
if head then first = tonumber(string.sub(head[1], 1, -3)) end
redis.call('HSET', KEYS[2], ARGV[1], first - 1)
return 1
"""

# KEYS: cur rm pv pa ph dead dr ; ARGV: consumer. Mark it removed only if it existed.
_REMOVE = """
local a = redis.call('HDEL', KEYS[1], ARGV[1])
local b = redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
if a + b > 0 then redis.call('HSET', KEYS[2], ARGV[1], 1) return 1 end
return 0
"""

# KEYS: log last idt cur ; ARGV: base
_STATS = """
local head = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
local first = 0
if head then first = tonumber(string.sub(head[1], 1, -3)) end
local out = {redis.call('XLEN', KEYS[1]), first, tonumber(redis.call('GET', KEYS[2]) or '0'),
  redis.call('ZCARD', KEYS[3])}
local cons = redis.call('HGETALL', KEYS[4])
for i = 1, #cons, 2 do
  local c = cons[i]
  table.insert(out, {c, tonumber(cons[i + 1]), redis.call('ZCARD', ARGV[1] .. ':pv:' .. c),
    redis.call('ZCARD', ARGV[1] .. ':dead:' .. c)})
end
return out
"""

# KEYS: log cur pv pa ph dead dr rm ; ARGV: consumer limit now visible_until max_attempts
# worker. A group remove_consumer forgot is refused ('removed'), not re-created.
_CLAIM = """
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 and redis.call('HEXISTS', KEYS[8], ARGV[1]) == 1
then return 'removed' end
local limit = tonumber(ARGV[2])
local maxa = tonumber(ARGV[5])
local out = {}
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[3])
table.sort(due, function(a, b) return tonumber(a) < tonumber(b) end)
for _, seq in ipairs(due) do
  if #out >= limit then break end
  local attempts = tonumber(redis.call('HGET', KEYS[4], seq))
  if attempts >= maxa then
    redis.call('ZREM', KEYS[3], seq)
    redis.call('ZADD', KEYS[6], seq, seq)
    redis.call('HSET', KEYS[7], seq, 'max_attempts')
  else
    attempts = attempts + 1
    redis.call('HSET', KEYS[4], seq, attempts)
    redis.call('ZADD', KEYS[3], ARGV[4], seq)
    hist_append(KEYS[5], seq, '{"attempt": ' .. attempts .. ', "at": ' .. ARGV[3] ..
      ', "worker": ' .. ARGV[6] .. '}')
    local e = entry_of(KEYS[1], seq)
    table.insert(out, {seq, attempts, e['m'], e['p'], e['a']})
  end
end
if #out < limit then
  local pos = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '-1')
  if pos < 0 then  -- a new group's first claim registers it before the first kept message
    local head = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
    pos = 0
    if head then pos = tonumber(string.sub(head[1], 1, -3)) - 1 end
    redis.call('HSET', KEYS[2], ARGV[1], pos)
  end
  local fresh = redis.call('XRANGE', KEYS[1], (pos + 1) .. '-0', '+', 'COUNT', limit - #out)
  local first = '[{"attempt": 1, "at": ' .. ARGV[3] .. ', "worker": ' .. ARGV[6] .. '}]'
  local seq = nil
  for _, e in ipairs(fresh) do
    seq = string.sub(e[1], 1, -3)
    local f = {}
    for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
    redis.call('HSET', KEYS[4], seq, 1)
    redis.call('ZADD', KEYS[3], ARGV[4], seq)
    redis.call('HSET', KEYS[5], seq, first)
    table.insert(out, {seq, 1, f['m'], f['p'], f['a']})
  end
  if seq then redis.call('HSET', KEYS[2], ARGV[1], seq) end
end
return out
"""

# KEYS: pv pa ph ; ARGV: seq... (one or many)
_ACK = """
local n = 0
for i = 1, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('HDEL', KEYS[3], ARGV[i])
    n = n + 1
  end
end
return n
"""

# KEYS: pv ; ARGV: seq visible_at
_NACK = """
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
"""

# KEYS: pv ph dead dr ; ARGV: seq reason entry
_REJECT = """
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
hist_append(KEYS[2], ARGV[1], ARGV[3])
return 1
"""

# KEYS: log pa ph dead dr
_DEAD = """
local out = {}
for _, seq in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  local e = entry_of(KEYS[1], seq)
  table.insert(out, {seq, e['m'], e['p'], e['a'], redis.call('HGET', KEYS[5], seq),
    redis.call('HGET', KEYS[2], seq), redis.call('HGET', KEYS[3], seq)})
end
return out
"""

# KEYS: pv pa ph dead dr ; ARGV: now all(1|0) seqs...
_REDRIVE = """
local n = 0
local chosen
if ARGV[2] == '1' then chosen = redis.call('ZRANGE', KEYS[4], 0, -1)
else chosen = {} for i = 3, #ARGV do table.insert(chosen, ARGV[i]) end end
for _, seq in ipairs(chosen) do
  if redis.call('ZSCORE', KEYS[4], seq) then
    local reason = redis.call('HGET', KEYS[5], seq) or ''
    redis.call('ZREM', KEYS[4], seq)
    redis.call('HDEL', KEYS[5], seq)
    redis.call('HSET', KEYS[2], seq, 0)
    redis.call('ZADD', KEYS[1], ARGV[1], seq)
    hist_append(KEYS[3], seq, '{"redriven_at": ' .. ARGV[1] .. ', "reason": ' ..
      cjson.encode(reason) .. '}')
    n = n + 1
  end
end
return n
"""


def _num(x: float) -> str:
    """A float as JSON/Redis text with full precision."""
    return repr(float(x))


class RedisStream:
    """One named stream on Redis, shared by agents in many processes.

    Args:
        db: the shared client.
        name: the stream's name.
    """

    def __init__(self, db: RedisDB, name: str) -> None:
        self.db = db
        self.name = name
        base = db.key("stream", "{" + name + "}")
        self._log, self._last, self._ids, self._cur, self._idt = (
            f"{base}:log",
            f"{base}:last",
            f"{base}:ids",
            f"{base}:cur",
            f"{base}:idt",
        )
        self._rm = f"{base}:rm"
        self._base = base
        self._s = {
            n: db.script(f"stream_{n}", _HIST + _TRIM + src)
            for n, src in (
                ("append", _APPEND),
                ("trim", _TRIM_CALL),
                ("register", _REGISTER),
                ("remove", _REMOVE),
                ("stats", _STATS),
                ("claim", _CLAIM),
                ("ack", _ACK),
                ("nack", _NACK),
                ("reject", _REJECT),
                ("dead", _DEAD),
                ("redrive", _REDRIVE),
            )
        }

    def _c(self, kind: str, consumer: str) -> str:
        return f"{self._base}:{kind}:{consumer}"

    def _run(
        self, name: str, keys: list[str], args: list[Any], *, write: bool = True, idem: bool = False
    ) -> Any:
        script = self._s[name]
        return self.db.call(
            lambda c: script(keys=keys, args=args, client=c), write=write, idempotent=idem
        )

    def _trim_keys(self) -> list[str]:
        return [self._log, self._ids, self._last, self._cur, self._idt]

    def _trim_args(self, retention: Retention, now: float) -> list[str]:
        m = retention.max_messages
        age = retention.max_age
        return [
            "" if m is None else str(int(m)),
            "" if age is None else _num(now - age),
            _num(now - retention.dedup_window),
            self._base,
        ]

    def append(
        self,
        message_id: str,
        payload: str,
        *,
        now: float,
        expect_last_seq: int | None = None,
        retention: Retention | None = None,
    ) -> StreamRecord:
        what = f"message {message_id!r} of stream {self.name!r}"
        check_size(self.db.url, what, payload, self.db.max_value_bytes)
        expect = "" if expect_last_seq is None else str(int(expect_last_seq))
        trim = (
            ["0", "", "", "", ""] if retention is None else ["1", *self._trim_args(retention, now)]
        )
        out = self._run(
            "append",
            self._trim_keys(),
            [message_id, payload, _num(now), expect, *trim],
            idem=True,  # a retry finds its own message id and returns it as a duplicate
        )
        if out[0] == "ok":
            return StreamRecord(int(out[1]), message_id, payload, float(now))
        if out[0] == "dup":
            if out[2] != payload:
                raise DuplicateMessageError(message_id, self.name)
            return StreamRecord(int(out[1]), message_id, out[2], float(out[3]), True)
        raise stream_conflict(self.name, int(expect_last_seq or 0), int(out[1]))

    def trim(self, retention: Retention, *, now: float) -> int:
        return int(self._run("trim", self._trim_keys(), self._trim_args(retention, now), idem=True))

    def last_seq(self) -> int:
        raw = self.db.call(lambda c: c.get(self._last), write=False)
        return int(raw) if raw is not None else 0

    def register(self, consumer: str) -> None:
        self._run("register", [self._log, self._cur, self._last, self._rm], [consumer], idem=True)

    def remove_consumer(self, consumer: str) -> bool:
        keys = [self._cur, self._rm] + [
            self._c(k, consumer) for k in ("pv", "pa", "ph", "dead", "dr")
        ]
        return bool(self._run("remove", keys, [consumer], idem=True))

    def stats(self) -> StreamStats:
        out = self._run(
            "stats", [self._log, self._last, self._idt, self._cur], [self._base], write=False
        )
        n, first, last, ids = (int(x) for x in out[:4])
        consumers = tuple(
            sorted(
                (
                    ConsumerStats(str(c), int(p), int(k), int(d), max(0, last - int(p)))
                    for c, p, k, d in out[4:]
                ),
                key=lambda s: s.name,
            )
        )
        return StreamStats(self.name, n, first, last, ids, consumers)

    def next_visible(self, consumer: str) -> float | None:
        rows = self.db.call(
            lambda c: c.zrange(self._c("pv", consumer), 0, 0, withscores=True), write=False
        )
        return float(rows[0][1]) if rows else None

    def wait(self, after_seq: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        # One XREAD BLOCK at a time, shorter than the socket timeout so it never trips it.
        step = max(0.05, self.db.socket_timeout / 2)
        while True:
            if self.last_seq() > after_seq:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ms = max(1, int(min(left, step) * 1000))

            def read(c: Any, ms: int = ms) -> Any:
                return c.xread({self._log: f"{int(after_seq)}-0"}, count=1, block=ms)

            if self.db.call(read, write=False):
                return True

    def range(self, after: int = 0, limit: int = 100) -> list[StreamRecord]:
        check_range(self.name, after, limit)
        if limit == 0:
            return []
        rows = self.db.call(
            lambda c: c.xrange(self._log, min=f"{int(after) + 1}-0", max="+", count=limit),
            write=False,
        )
        return [StreamRecord(int(i.split("-")[0]), f["m"], f["p"], float(f["a"])) for i, f in rows]

    def claim(
        self,
        consumer: str,
        *,
        limit: int,
        now: float,
        visibility_timeout: float,
        max_attempts: int,
        worker: str = "",
    ) -> list[ClaimedMessage]:
        keys = [self._log, self._cur] + [
            self._c(k, consumer) for k in ("pv", "pa", "ph", "dead", "dr")
        ]
        keys.append(self._rm)
        args = [
            consumer,
            int(limit),
            _num(now),
            _num(now + visibility_timeout),
            int(max_attempts),
            json.dumps(worker),
        ]
        rows = self._run("claim", keys, args)
        if isinstance(rows, bytes | str):  # 'removed'
            raise consumer_removed(self.name, consumer)
        return [
            ClaimedMessage(StreamRecord(int(s), m, p, float(a)), int(n)) for s, n, m, p, a in rows
        ]

    def ack(self, consumer: str, seq: int) -> bool:
        keys = [self._c(k, consumer) for k in ("pv", "pa", "ph")]
        return bool(self._run("ack", keys, [int(seq)], idem=True))

    def ack_many(self, consumer: str, seqs: list[int]) -> int:
        if not seqs:
            return 0
        keys = [self._c(k, consumer) for k in ("pv", "pa", "ph")]
        return int(self._run("ack", keys, sorted({int(s) for s in seqs}), idem=True))

    def nack(self, consumer: str, seq: int, *, now: float, delay: float = 0.0) -> bool:
        return bool(self._run("nack", [self._c("pv", consumer)], [int(seq), _num(now + delay)]))

    def reject(self, consumer: str, seq: int, *, reason: str, now: float) -> bool:
        keys = [self._c(k, consumer) for k in ("pv", "ph", "dead", "dr")]
        entry = '{"rejected": ' + json.dumps(reason) + ', "at": ' + _num(now) + "}"
        return bool(self._run("reject", keys, [int(seq), reason, entry]))

    def dead_letters(self, consumer: str) -> list[DeadRecord]:
        keys = [self._log] + [self._c(k, consumer) for k in ("pa", "ph", "dead", "dr")]
        rows = self._run("dead", keys, [], write=False)
        return [
            DeadRecord(
                StreamRecord(int(s), m, p, float(a)),
                consumer,
                reason,
                int(attempts),
                json.loads(history),
            )
            for s, m, p, a, reason, attempts, history in rows
        ]

    def redrive(self, consumer: str, seqs: list[int] | None, *, now: float) -> int:
        keys = [self._c(k, consumer) for k in ("pv", "pa", "ph", "dead", "dr")]
        chosen = [] if seqs is None else [int(s) for s in seqs]
        args: list[Any] = [_num(now), "1" if seqs is None else "0", *chosen]
        return int(self._run("redrive", keys, args))

    def position(self, consumer: str) -> int:
        raw = self.db.call(lambda c: c.hget(self._cur, consumer), write=False)
        return int(raw) if raw is not None else 0

    def pending(self, consumer: str) -> int:
        return int(self.db.call(lambda c: c.zcard(self._c("pv", consumer)), write=False))

    def __repr__(self) -> str:
        return f"RedisStream({self.name!r}, prefix={self.db.prefix!r})"


def redis_streams(db: RedisDB) -> dict[str, int]:
    """Every stream under the prefix with its kept message count (SCAN; nothing if none)."""
    head = db.key("stream", "{")
    names: set[str] = set()

    def keys(c: Any) -> list[str]:
        return [k for p in ("last", "cur") for k in c.scan_iter(match=f"{head}*}}:{p}", count=500)]

    for k in db.call(keys, write=False):
        names.add(k[len(head) : k.rindex("}:")])
    logs = [db.key("stream", "{" + name + "}") + ":log" for name in sorted(names)]

    def counts(c: Any) -> list[int]:
        pipe = c.pipeline(transaction=False)
        for log in logs:
            pipe.xlen(log)
        return [int(n) for n in pipe.execute()]

    return dict(zip(sorted(names), db.call(counts, write=False), strict=True))
