package hostbudget

import "github.com/archiveflow/archiveflow/internal/luascript"

// luaNow is Redis' clock in ms: every time of the budget is Redis', so
// workers with skewed clocks agree.
const luaNow = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// LuaHostWait defines host_wait(prefix, url, now, extra, conc) for other
// scripts (the frontier's claim): the ms until the URL's host may start a
// fetch (0: now), -1 when it is at its concurrency counting extra fetches
// the caller already planned. prefix is rkeys.Keys.HostBudgetPrefix; conc
// the default concurrency, used until a fetch recorded the host's own.
// host_of(url) is internal/hostname's rule (hostname.Of): the host name
// in lower case, no port, no brackets.
const LuaHostWait = `
local function host_of(u)
  local a = string.match(u, '^[%a][%w+.-]*://([^/?#]*)')
  if not a then return nil end
  a = string.gsub(a, '^.*@', '')
  local h = string.match(a, '^%[(.*)%]')
  if not h then h = string.match(a, '^([^:]*)') end
  if not h or h == '' then return nil end
  return string.lower(h)
end

local function host_wait(prefix, h, now, extra, conc)
  local k = prefix .. h
  local v = redis.call('HMGET', k, 'next', 'until', 'conc')
  local w = 0
  local u = tonumber(v[2] or 0)
  if u > now then w = u - now end
  local nx = tonumber(v[1] or 0)
  if nx - now > w then w = nx - now end
  if w > 0 then return w end
  conc = tonumber(v[3] or conc)
  if conc and conc > 0 then
    local busy = redis.call('ZCOUNT', k .. ':inflight', now, '+inf') + extra
    if busy >= conc then return -1 end
  end
  return 0
end
`

// acquireScript takes a fetch slot on a host when its turn has come, or
// asks again for a turn the caller holds (its token in the in-flight set:
// it does not count against itself; a refused one is taken out).
// KEYS: state inflight overrides. ARGV: host token conc delay_ms lease_ms
// holds reuse_ms. A refusal for concurrency of a caller that holds no
// turn of the host records it as waiting ('waited'), so holders stop
// reusing their turns for reuse_ms.
// Reply: {granted, now, at (0 = unknown), reason, since, reusable}:
// reusable when the host has no delay, no rate-limit streak and no other
// caller waited within reuse_ms.
var acquireScript = luascript.New(luaNow, []string{"state", "inflight", "overrides"}, `
local now = now_ms()
local conc, delay, lease = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local o = redis.call('HGET', overrides, ARGV[1])
if o then
  local c, d = string.match(o, '^(%d+) (%d+)$')
  if c then conc, delay = tonumber(c), tonumber(d) end
end
redis.call('ZREMRANGEBYSCORE', inflight, '-inf', '(' .. now)
local mine = redis.call('ZSCORE', inflight, ARGV[2])
local function refuse(at, why, since)
  if mine then redis.call('ZREM', inflight, ARGV[2]) end
  if why == 'busy' and tonumber(ARGV[6]) == 0 then
    redis.call('HSET', state, 'waited', now)
    if redis.call('PTTL', state) < 0 then redis.call('PEXPIRE', state, lease + 86400000) end
  end
  return {0, now, at, why, since, 0}
end
local v = redis.call('HMGET', state, 'next', 'until', 'since', 'crawl_delay', 'waited')
local since = tonumber(v[3] or 0)
delay = math.max(delay, tonumber(v[4] or 0))
local u = tonumber(v[2] or 0)
if u > now then return refuse(u, 'backoff', since) end
local nx = tonumber(v[1] or 0)
if nx > now then return refuse(nx, 'delay', since) end
local busy = redis.call('ZCARD', inflight)
if mine then busy = busy - 1 end
if busy >= conc then return refuse(0, 'busy', since) end
redis.call('ZADD', inflight, now + lease, ARGV[2])
redis.call('HSET', state, 'next', now + delay, 'conc', conc)
local keep = math.max(u - now, delay, lease) + 86400000
redis.call('PEXPIRE', state, keep)
redis.call('PEXPIRE', inflight, lease + 1000)
local reusable = 0
if delay == 0 and since == 0 and tonumber(v[5] or 0) + tonumber(ARGV[7]) <= now then reusable = 1 end
return {1, now, 0, '', since, reusable}
`)

// renewScript extends a slot's lease. KEYS: inflight. ARGV: token lease_ms.
var renewScript = luascript.New(luaNow, []string{"inflight"}, `
local now = now_ms()
local lease = tonumber(ARGV[2])
if redis.call('ZADD', inflight, 'XX', 'CH', now + lease, ARGV[1]) == 1 then
  if redis.call('PTTL', inflight) < lease + 1000 then redis.call('PEXPIRE', inflight, lease + 1000) end
end
return 0
`)

// backoffScript backs a host off after a rate-limit answer.
// KEYS: state. ARGV: retry_after_ms (-1: none) base_ms max_ms.
// Reply: {now, until, since}.
var backoffScript = luascript.New(luaNow, []string{"state"}, `
local now = now_ms()
local ra, base, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local v = redis.call('HMGET', state, 'until', 'level', 'since')
local level = tonumber(v[2] or 0)
local since = tonumber(v[3] or 0)
if since == 0 then since = now end
local wait
if ra >= 0 then wait = ra else wait = math.min(base * math.pow(2, math.min(level, 40)), cap) end
local u = math.max(tonumber(v[1] or 0), now + wait)
redis.call('HSET', state, 'until', u, 'level', level + 1, 'since', since)
redis.call('PEXPIRE', state, u - now + 86400000)
return {now, u, since}
`)
