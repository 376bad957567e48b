"""The Lua scripts of the Redis ``StateStore``: each change is one script, so the version
check, the revision bump, the write, its log entry and its index entry are atomic on the
server and cost one round trip. The layout they work on is drawn in ``_state.py``.

A key's index entry is ``key NUL revision`` (20 digits) in one sorted set per namespace, all
scores 0, so a lexicographic range lists a key's revisions in order (keys hold no NUL).
"""

from __future__ import annotations

__all__ = [
    "COMPACT",
    "DELETE",
    "HISTORY",
    "MARK",
    "MERGE",
    "PRELUDE",
    "READ_AT",
    "SWEEP",
    "TXN",
    "WRITE",
]

PRELUDE = """
local function indexed(key, rev)
  redis.call('ZADD', KEYS[6], 0, key .. '\\0' .. string.format('%020d', rev))
end
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
  indexed(key, rev)
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
  indexed(key, rev)
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

# KEYS: hash, rev, lost, ttl, log, index. ARGV: key, value, author, trust, expect, now, fence key,
# fence version, seen version, seen lineage, expires at.
WRITE = (
    PRELUDE
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
DELETE = (
    PRELUDE
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
TXN = (
    PRELUDE
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

# KEYS: log, meta, index. ARGV: the changes to remove as JSON [[revision, key], ...]; then
# key, revision pairs (the highest removed per key).
COMPACT = """
local gone = cjson.decode(ARGV[1])
local top = 0
for _, c in ipairs(gone) do
  local rev = c[1]
  redis.call('XDEL', KEYS[1], rev .. '-1')
  redis.call('ZREM', KEYS[3], c[2] .. '\\0' .. string.format('%020d', rev))
  if rev > top then top = rev end
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

# KEYS: rev, meta, hash, log, index. Run at every open; changes something once per namespace:
# 1. A namespace written before the log existed (no ``log`` mark): its log starts with each
#    key's current version, as the SQL migrations start it, and reads as compacted up to its
#    revision then. 2. A namespace whose log was kept before the index existed (no ``index``
#    mark): every kept change is indexed, in one script, so no write lands in between.
MARK = """
local function indexed(key, rev)
  redis.call('ZADD', KEYS[5], 0, key .. '\\0' .. string.format('%020d', rev))
end
if not redis.call('HGET', KEYS[2], 'log') then
  local rev = redis.call('GET', KEYS[1])
  if rev then redis.call('HSET', KEYS[2], 'compacted', rev) end
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
    indexed(c[2], c[1])
  end
  redis.call('HSET', KEYS[2], 'log', 1, 'index', 1)
  return 1
end
if redis.call('HGET', KEYS[2], 'index') then return 0 end
local from = '-'
while true do
  local batch = redis.call('XRANGE', KEYS[4], from, '+', 'COUNT', 1000)
  if #batch == 0 then break end
  for _, e in ipairs(batch) do
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'k' then indexed(f[i + 1], tonumber(string.match(e[1], '^(%d+)'))) break end
    end
  end
  from = '(' .. batch[#batch][1]
end
redis.call('HSET', KEYS[2], 'index', 1)
return 2
"""

SWEEP = (
    PRELUDE
    + """
local before = tonumber(redis.call('GET', KEYS[2]) or '0')
sweep(ARGV[1])
return tonumber(redis.call('GET', KEYS[2]) or '0') - before
"""
)


MERGE = (
    PRELUDE
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


# The kept changes of one key, through its index: O(versions of the key), not of the log.
# KEYS: index, log. ARGV: key.
HISTORY = """
local out = {}
local members = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. ARGV[1] .. '\\0',
                           '(' .. ARGV[1] .. '\\1')
for _, m in ipairs(members) do
  local id = string.match(string.sub(m, -20), '^0*(%d+)$') .. '-1'
  local e = redis.call('XRANGE', KEYS[2], id, id)
  if e[1] then out[#out + 1] = e[1] end
end
return out
"""

# One key as it was at a revision: its last change at or before it (through the index), the
# key's compacted mark, its oldest kept revision and the namespace's revision, read at once.
# KEYS: index, log, meta, rev. ARGV: key, the revision as 20 digits.
READ_AT = """
local low = '[' .. ARGV[1] .. '\\0'
local found = false
local m = redis.call('ZREVRANGEBYLEX', KEYS[1], low .. ARGV[2], low, 'LIMIT', 0, 1)
if m[1] then
  local id = string.match(string.sub(m[1], -20), '^0*(%d+)$') .. '-1'
  found = redis.call('XRANGE', KEYS[2], id, id)[1] or false
end
local first = redis.call('ZRANGEBYLEX', KEYS[1], low, '(' .. ARGV[1] .. '\\1', 'LIMIT', 0, 1)
local oldest = false
if first[1] then oldest = string.match(string.sub(first[1], -20), '^0*(%d+)$') end
return {found, redis.call('HGET', KEYS[3], 'c:' .. ARGV[1]) or '0', oldest,
        redis.call('GET', KEYS[4]) or '0'}
"""
