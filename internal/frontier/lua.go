package frontier

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/luascript"
)

// Encoding constants shared by Go and Lua (the prelude is generated from
// them). See the package doc for why the encoding is what it is.
const (
	// pagesPerBucket pages share one record string, one URL list and one
	// relation list: 1000 × 32 bytes + the string header fits jemalloc's
	// 32 KiB size class with 2 % slack.
	pagesPerBucket = 1000
	// recordSize is the packed page record (recordFormat).
	recordSize = 32
	// recordFormat is the record's Lua struct format (big-endian): state
	// flags status later (later retries taken, Config.RetryLater) | attempts done_attempt remaining links_chunk |
	// depth parent rules links_batch last_segment. decodeRecord reads it.
	recordFormat = ">BBBBHHHHI4I4I4I4I4"
	// lhLoad is the mean number of fingerprints per dedupe bucket before
	// linear hashing splits one: well under Redis' default
	// hash-max-listpack-entries (128), so buckets stay listpack-encoded.
	lhLoad = 48
)

// Record field codes.
const (
	codeReady    = 1
	codeClaimed  = 2
	codeSkipped  = 3
	codeDone     = 4
	codeDeferred = 5

	statusNone      = 0
	statusSucceeded = 1
	statusFailed    = 2
	statusTransient = 3
	statusSkipped   = 4
	statusPostponed = 5
	statusWaiting   = 6

	flagNoRecurse = 1
	flagRequisite = 2
	flagNote      = 4
	// flagCharged: the page counts against a page budget (ClaimWithin):
	// claimed as a page, not a requisite, and not given back unfetched.
	flagCharged = 8
)

// Script return codes (first element of every reply).
const (
	retApplied      = 1
	retRepeat       = 0
	retNoFrontier   = -1
	retUnknownPage  = -2
	retNotClaimed   = -3
	retOutOfOrder   = -4
	retConflict     = -5
	retInvalidState = -6
	retNoJob        = -7
	retLeftover     = -8
)

// luaPrelude is shared by every frontier script: constants, the record
// codec, state tallies, ready queues, the fingerprint table (linear
// hashing), depth lowering and propagation, and TTL inheritance. A script
// body calls load_meta() first and finish() after its writes.
var luaPrelude = fmt.Sprintf(`
local PB, RS, LH_LOAD = %d, %d, %d
local REC = '%s'
local READY, CLAIMED, SKIPPED, DONE, DEFERRED = %d, %d, %d, %d, %d
local ST_NONE, ST_SUCCEEDED, ST_FAILED, ST_TRANSIENT, ST_SKIPPED, ST_POSTPONED, ST_WAITING = %d, %d, %d, %d, %d, %d, %d
local F_NORECURSE, F_REQUISITE, F_NOTE, F_CHARGED = %d, %d, %d, %d
local APPLIED, REPEAT, NO_FRONTIER, UNKNOWN_PAGE, NOT_CLAIMED = %d, %d, %d, %d, %d
local OUT_OF_ORDER, CONFLICT, INVALID_STATE, NO_JOB, LEFTOVER = %d, %d, %d, %d, %d
local STATE_NAMES = {%s}
`,
	pagesPerBucket, recordSize, lhLoad, recordFormat,
	codeReady, codeClaimed, codeSkipped, codeDone, codeDeferred,
	statusNone, statusSucceeded, statusFailed, statusTransient, statusSkipped, statusPostponed, statusWaiting,
	flagNoRecurse, flagRequisite, flagNote, flagCharged,
	retApplied, retRepeat, retNoFrontier, retUnknownPage, retNotClaimed,
	retOutOfOrder, retConflict, retInvalidState, retNoJob, retLeftover, luaStateNames()) + `
local cfg = {}
local queued = 0    -- change in the pages waiting (READY or CLAIMED): QueuedField
local promoted = 0  -- DEFERRED pages moved into the depth limit
local delta = {}    -- count field -> increment, flushed by finish()
local touched = {}  -- keys this call may have created (TTL inheritance)

local function touch(k) touched[k] = true end

-- load_meta reads the configuration; false when there is no frontier or
-- it is being deleted.
local function load_meta()
  local v = redis.call('HMGET', meta, 'max_depth', 'max_attempts', 'queued_field', 'lh_level', 'lh_split', 'lh_n', 'deleting', 'retry_later')
  if not v[1] or v[7] then return false end
  cfg.later = {}
  for ms in string.gmatch(v[8] or '', '[^,]+') do cfg.later[#cfg.later + 1] = tonumber(ms) end
  cfg.max_depth, cfg.max_attempts = tonumber(v[1]), tonumber(v[2])
  cfg.queued_field = v[3] or ''
  cfg.lh_level, cfg.lh_split, cfg.lh_n = tonumber(v[4]), tonumber(v[5]), tonumber(v[6])
  cfg.lh_dirty = false
  return true
end

local function within(d) return cfg.max_depth < 0 or d <= cfg.max_depth end
local function bucket(id) return math.floor((id - 1) / PB) end
local function slot(id) return (id - 1) % PB end

-- Page records: RS bytes at slot*RS of the bucket's string.
local function get(id)
  if id < 1 then return nil end
  local off = slot(id) * RS
  local s = redis.call('GETRANGE', pages_p .. bucket(id), off, off + RS - 1)
  if #s < RS then return nil end
  local st, fl, stat, lat, att, da, rem, lch, depth, parent, rules, lb, ls = struct.unpack(REC, s)
  if st == 0 then return nil end
  return {id = id, state = st, flags = fl, status = stat, later = lat, attempts = att, done_attempt = da,
    remaining = rem, lchunk = lch, depth = depth, parent = parent, rules = rules, lbatch = lb, lastseg = ls}
end

local function encode(p)
  return struct.pack(REC, p.state, p.flags, p.status, p.later or 0, p.attempts, p.done_attempt, p.remaining,
    p.lchunk, p.depth, p.parent, p.rules, p.lbatch, p.lastseg)
end

local function put(p)
  redis.call('SETRANGE', pages_p .. bucket(p.id), slot(p.id) * RS, encode(p))
end

local function url_of(id)
  return redis.call('LINDEX', urls_p .. bucket(id), slot(id))
end

-- page_reply is what Go decodes into a Page.
local function page_reply(p) return {p.id, url_of(p.id), encode(p)} end

-- counts_reply: the metadata hash, the propagation backlog, the pages
-- waiting for a later retry and the earliest one's due time (ms).
local function counts_reply()
  local first = redis.call('ZRANGE', retry, 0, 0, 'WITHSCORES')
  return {redis.call('HGETALL', meta), redis.call('LLEN', prop), redis.call('ZCARD', retry), first[2] or ''}
end

-- Counts: n:STATE and dDEPTH:STATE (plus succeeded/failed for DONE).
local function add(f, n) delta[f] = (delta[f] or 0) + n end
local function tally(p, sign)
  if p.state == READY or p.state == CLAIMED then queued = queued + sign end
  local names = {STATE_NAMES[p.state]}
  if p.state == DONE then
    if p.status == ST_SUCCEEDED then names[2] = 'succeeded' else names[2] = 'failed' end
  end
  for _, n in ipairs(names) do
    add('n:' .. n, sign)
    add('d' .. p.depth .. ':' .. n, sign)
  end
end

-- Ready queues: one list of ids per depth; readyz holds the depths whose
-- list exists. Entries whose page is no longer READY at that depth are
-- stale and dropped by claim. A charged page (F_CHARGED) is also listed
-- in again, so a claim at its page budget still finds it.
local function enqueue(p, head)
  local q = ready_p .. p.depth
  local n
  if head then n = redis.call('LPUSH', q, p.id) else n = redis.call('RPUSH', q, p.id) end
  if n == 1 then
    redis.call('ZADD', readyz, p.depth, p.depth)
    touch(q); touch(readyz)
  end
  if bit.band(p.flags, F_CHARGED) ~= 0 then
    redis.call('RPUSH', again, p.id)
    touch(again)
  end
end

-- Page budget (ClaimWithin): 'charged' in meta counts the pages claimed
-- as pages (not requisites). A page given back before any attempt of it
-- completed (release, skip) is uncharged: it was not fetched.
local function charged(p) return bit.band(p.flags, F_CHARGED) ~= 0 end
local function charge(p)
  if charged(p) or bit.band(p.flags, F_REQUISITE) ~= 0 then return false end
  p.flags = bit.bor(p.flags, F_CHARGED)
  add('charged', 1)
  return true
end
local function uncharge_unfetched(p)
  if charged(p) and p.done_attempt == 0 then
    p.flags = bit.band(p.flags, bit.bnot(F_CHARGED))
    add('charged', -1)
  end
end

-- Fingerprint table: linear hashing over hashes fp_p..N, so every bucket
-- stays small (listpack) however many URLs the job has.
local function fp_bucket(fp)
  local h = struct.unpack('>I4', fp)
  local m = 2 ^ cfg.lh_level
  local a = h % m
  if a < cfg.lh_split then a = h % (m * 2) end
  return fp_p .. a
end

local function lh_split()
  local m = 2 ^ cfg.lh_level
  local s = cfg.lh_split
  local src, dst = fp_p .. s, fp_p .. (s + m)
  local all = redis.call('HGETALL', src)
  local keep, move = {}, {}
  for i = 1, #all, 2 do
    local t = move
    if (struct.unpack('>I4', all[i])) % (m * 2) == s then t = keep end
    t[#t + 1] = all[i]
    t[#t + 1] = all[i + 1]
  end
  redis.call('DEL', src)
  if #keep > 0 then redis.call('HSET', src, unpack(keep)); touch(src) end
  if #move > 0 then redis.call('HSET', dst, unpack(move)); touch(dst) end
  s = s + 1
  if s >= m then cfg.lh_level = cfg.lh_level + 1; s = 0 end
  cfg.lh_split = s
  cfg.lh_dirty = true
end

-- find returns the page id of url (nil when new) and whether its
-- fingerprint is free. A fingerprint hit is verified against the stored
-- URL; URLs whose fingerprint belongs to another URL live in fpx.
local function find(url, fp)
  local v = redis.call('HGET', fp_bucket(fp), fp)
  if not v then return nil, true end
  local id = tonumber(v)
  if url_of(id) == url then return id, false end
  local x = redis.call('HGET', fpx, url)
  if x then return tonumber(x), false end
  return nil, false
end

local function create(url, fp, fp_free, depth, parent, flags)
  local id = redis.call('HINCRBY', meta, 'next_id', 1)
  local ukey = urls_p .. bucket(id)
  local n = redis.call('RPUSH', ukey, url)
  if n ~= slot(id) + 1 then error('frontier: ' .. ukey .. ' out of step with page ids (corrupt frontier)') end
  if n == 1 then
    touch(ukey)
    local pk = pages_p .. bucket(id)
    redis.call('SETRANGE', pk, PB * RS - 1, '\0')
    touch(pk)
  end
  if fp_free then
    local b = fp_bucket(fp)
    redis.call('HSET', b, fp, id)
    touch(b)
    cfg.lh_n = cfg.lh_n + 1
    cfg.lh_dirty = true
    if cfg.lh_n > LH_LOAD * (2 ^ cfg.lh_level + cfg.lh_split) then lh_split() end
  else
    redis.call('HSET', fpx, url, id)
    touch(fpx)
  end
  local p = {id = id, state = DEFERRED, flags = flags, status = ST_NONE, attempts = 0, done_attempt = 0,
    remaining = cfg.max_attempts, lchunk = 0, depth = depth, parent = parent, rules = 0, lbatch = 0, lastseg = 0}
  if within(depth) then p.state = READY end
  put(p)
  tally(p, 1)
  add('n:total', 1)
  if p.state == READY then enqueue(p, false) end
  return p
end

-- waits_later: p waits for a later retry, out of the ready queues (in
-- retry: see retry_later).
local function waits_later(p) return p.state == READY and p.status == ST_WAITING end

-- lower moves page c to depth d found through parent: a DEFERRED page
-- inside the limit becomes READY, a READY page joins its new depth's
-- queue, and a page that delivered links is queued for propagation.
local function lower(c, d, parent)
  tally(c, -1)
  c.depth, c.parent = d, parent
  if c.state == DEFERRED and within(d) then
    c.state = READY
    promoted = promoted + 1
  end
  if c.state == READY and not waits_later(c) then enqueue(c, false) end
  tally(c, 1)
  put(c)
  if c.lastseg > 0 then
    redis.call('RPUSH', prop, struct.pack('>I4I4', c.id, 0))
    touch(prop)
  end
end

local function relax(p, c)
  if p.depth + 1 < c.depth then
    lower(c, p.depth + 1, p.id)
    return true
  end
  return false
end

-- settle applies queued propagation: for each (page, cursor) entry it walks
-- the page's relation segments (newest first, each links to the previous)
-- and relaxes every child. It stops after the segment that reaches budget
-- relations (a segment holds at most MaxChunk), so every call makes
-- progress; an unfinished entry goes back to the head with its cursor.
local function settle(budget)
  local visited = 0
  while visited < budget do
    local e = redis.call('LPOP', prop)
    if not e then break end
    visited = visited + 1
    local pid, cursor = struct.unpack('>I4I4', e)
    local p = get(pid)
    if p then
      if cursor == 0 then cursor = p.lastseg end
      local lk = links_p .. bucket(pid)
      while cursor > 0 do
        local seg = redis.call('LINDEX', lk, cursor - 1)
        if not seg then error('frontier: relation segment ' .. cursor .. ' of page ' .. pid .. ' missing (corrupt frontier)') end
        cursor = struct.unpack('>I4', seg)
        for off = 5, #seg, 4 do
          local c = get((struct.unpack('>I4', seg, off)))
          if c then relax(p, c) end
          visited = visited + 1
        end
        if visited >= budget then break end
      end
      if cursor > 0 then
        redis.call('LPUSH', prop, struct.pack('>I4I4', pid, cursor))
        touch(prop)
      end
    end
  end
  return visited
end

-- Claims: p:ID -> token and t:TOKEN -> packed ids of the token's pages.
local function detach(id)
  local pf = 'p:' .. id
  local tok = redis.call('HGET', claims, pf)
  if not tok then return end
  redis.call('HDEL', claims, pf)
  local tf = 't:' .. tok
  local held = redis.call('HGET', claims, tf)
  if not held then return end
  local rest = {}
  for off = 1, #held, 4 do
    if struct.unpack('>I4', held, off) ~= id then rest[#rest + 1] = string.sub(held, off, off + 3) end
  end
  if #rest == 0 then redis.call('HDEL', claims, tf) else redis.call('HSET', claims, tf, table.concat(rest)) end
end

-- Postponed pages: READY but out of the ready queues until their time
-- (later: id -> not-before ms, Redis' clock); promote_due puts those due
-- back at the head of their depth's queue.
local function postpone(p, at)
  redis.call('ZADD', later, at, p.id)
  touch(later)
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- promote_due puts the pages of later and retry that are due at the head
-- of their depth's queue; a page back from waiting for a later retry is
-- transient again (its last outcome).
local function promote_due(now, limit)
  for _, z in ipairs({later, retry}) do
    local due = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, limit)
    for i = #due, 1, -1 do
      redis.call('ZREM', z, due[i])
      local p = get(tonumber(due[i]))
      if p and p.state == READY then
        if z == retry and p.status == ST_WAITING then
          p.status = ST_TRANSIENT
          put(p)
        end
        enqueue(p, true)
      end
    end
  end
end

-- Later retries (Config.RetryLater): retry_later makes p, whose attempts
-- ran out on transient outcomes, wait READY with status waiting and
-- fresh attempts, out of the ready queues, in retry (id -> due ms) until
-- promote_due puts it back; p.later counts the later retries it took.
-- False when no delay is left (the page fails).
local function retry_later(p)
  local n = (p.later or 0) + 1
  if n > #cfg.later or n > 255 then return false end
  p.later, p.state, p.status, p.remaining = n, READY, ST_WAITING, cfg.max_attempts
  redis.call('ZADD', retry, now_ms() + cfg.later[n], p.id)
  touch(retry)
  return true
end

local function set_note(p, note)
  if note ~= '' then
    redis.call('HSET', notes, p.id, note)
    touch(notes)
    p.flags = bit.bor(p.flags, F_NOTE)
  elseif bit.band(p.flags, F_NOTE) ~= 0 then
    redis.call('HDEL', notes, p.id)
    p.flags = bit.band(p.flags, bit.bnot(F_NOTE))
  end
end

-- finish flushes counts, the linear-hash state and the QueuedField
-- counter, and gives keys created by this call the frontier's TTL.
local function finish()
  for f, n in pairs(delta) do
    if n ~= 0 and redis.call('HINCRBY', meta, f, n) == 0 then redis.call('HDEL', meta, f) end
  end
  if cfg.lh_dirty then
    redis.call('HSET', meta, 'lh_level', cfg.lh_level, 'lh_split', cfg.lh_split, 'lh_n', cfg.lh_n)
  end
  if queued ~= 0 and cfg.queued_field ~= '' and redis.call('EXISTS', job) == 1 then
    redis.call('HINCRBY', job, cfg.queued_field, queued)
  end
  local t = redis.call('PTTL', meta)
  if t > 0 then
    for k in pairs(touched) do
      if redis.call('PTTL', k) == -1 then redis.call('PEXPIRE', k, t) end
    end
  end
end
`

// luaStateNames renders States (in record code order) as a Lua list.
func luaStateNames() string {
	names := make([]string, len(States))
	for i, st := range States {
		names[i] = strconv.Quote(string(st))
	}
	return strings.Join(names, ", ")
}

// newScript declares a frontier script: every named key of scriptKeys
// bound to a Lua local (luascript), then the prelude, then body.
func newScript(body string) *luascript.Script {
	return luascript.New(luaPrelude, scriptKeyNames, body)
}

// run runs a frontier script for one job with every named key.
func (f *Frontier) run(ctx context.Context, sc *luascript.Script, ident string, args ...any) *redis.Cmd {
	return f.runOn(ctx, f.rdb, sc, ident, args...)
}

// runOn is run on c: the client, or a pipeline (DiscoverOps, CompleteOp).
func (f *Frontier) runOn(ctx context.Context, c redis.Scripter, sc *luascript.Script, ident string, args ...any) *redis.Cmd {
	return sc.Run(ctx, c, f.keyNames(ident), nil, args...)
}
