package rkeys

import "github.com/redis/go-redis/v9"

// Script return codes shared by the Lua scripts below.
const (
	codeNotFound  = -1 // the job hash does not exist (never created or expired)
	codeFinal     = -2 // the job is in a final state; the write is refused
	codeRunning   = -3 // CreateJob: a job with this ident is running
	codeRetained  = -4 // CreateJob: a finished job with this ident is retained
	codeNoop      = 0  // already applied (repeat) or nothing changed
	codeApplied   = 1  // applied
	finalStatesLu = `local function is_final(s) return s == 'finished' or s == 'aborted' or s == 'failed' end
local function inherit_ttl(job, k)
  local t = redis.call('PTTL', job)
  if t > 0 then redis.call('PEXPIRE', k, t) end
end
`
)

// createJobScript registers a job.
// KEYS: job log ignores ops logbatches pending working time-index scheduled
// scheduled-purge state:pending state:active state:draining state:finished
// state:aborted state:failed
// ARGV: ident create_op replace(0|1) queued_at not_before(” = none)
// n_ignores ignores... fields...(name value pairs)
var createJobScript = redis.NewScript(finalStatesLu + `
local job = KEYS[1]
local ident = ARGV[1]
if redis.call('EXISTS', job) == 1 then
  if redis.call('HGET', job, 'create_op') == ARGV[2] then return 0 end
  local final = is_final(redis.call('HGET', job, 'state')) or redis.call('HEXISTS', job, 'finished_at') == 1
  if not final then return -3 end
  if ARGV[3] ~= '1' then return -4 end
end
for i = 1, 5 do redis.call('DEL', KEYS[i]) end
redis.call('LREM', KEYS[6], 0, ident)
redis.call('LREM', KEYS[7], 0, ident)
redis.call('ZREM', KEYS[9], ident)
redis.call('ZREM', KEYS[10], ident)
for i = 12, 16 do redis.call('SREM', KEYS[i], ident) end
local n = tonumber(ARGV[6])
local pos = 7
for i = 1, n do
  redis.call('SADD', KEYS[3], ARGV[pos])
  pos = pos + 1
end
local fields = {}
for i = pos, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', job, unpack(fields))
redis.call('SADD', KEYS[11], ident)
redis.call('ZADD', KEYS[8], ARGV[4], ident)
if ARGV[5] ~= '' then redis.call('ZADD', KEYS[9], ARGV[5], ident) end
redis.call('LPUSH', KEYS[6], ident)
return 1
`)

// setStateScript moves a non-final job between states.
// KEYS: job pending working scheduled time-index state:pending
// state:active state:draining state:finished state:aborted state:failed
// ARGV: ident new_state ts now_float
var setStateScript = redis.NewScript(finalStatesLu + `
local job = KEYS[1]
local ident = ARGV[1]
local new = ARGV[2]
if redis.call('EXISTS', job) == 0 then return -1 end
local cur = redis.call('HGET', job, 'state')
if is_final(cur) then
  if cur == new then return 0 end
  return -2
end
local names = {'pending', 'active', 'draining', 'finished', 'aborted', 'failed'}
for i, name in ipairs(names) do
  if name == new then redis.call('SADD', KEYS[5 + i], ident)
  else redis.call('SREM', KEYS[5 + i], ident) end
end
local function ensure(list)
  if not redis.call('LPOS', list, ident) then redis.call('LPUSH', list, ident) end
end
if new == 'pending' then
  ensure(KEYS[2])
  redis.call('LREM', KEYS[3], 0, ident)
else
  redis.call('LREM', KEYS[2], 0, ident)
  ensure(KEYS[3])
  redis.call('ZREM', KEYS[4], ident)
  if redis.call('HEXISTS', job, 'started_at') == 0 then
    redis.call('HSET', job, 'started_at', ARGV[4])
  end
end
local q = redis.call('HGET', job, 'queued_at') or ARGV[3]
redis.call('ZADD', KEYS[5], 'NX', q, ident)
if cur == new then return 0 end
redis.call('HSET', job, 'state', new, 'state_changed_at', ARGV[3], 'ts', ARGV[3])
return 1
`)

// setFieldsScript sets absolute hash fields on an existing job.
// KEYS: job. ARGV: name value pairs.
var setFieldsScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
`)

// heartbeatScript bumps ArchiveBot's heartbeat counter on an existing job.
// KEYS: job. ARGV: ts.
var heartbeatScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'heartbeat_at', ARGV[1])
return redis.call('HINCRBY', KEYS[1], 'heartbeat', 1)
`)

// recordResultScript counts one final ArchiveResult exactly once.
// KEYS: job ops events_archive event_counters instance_event_counters
// ARGV: op_key status output_bytes items own(0|1) r1xx r2xx r3xx r4xx r5xx
// runk errors event_json events_ttl ts
var recordResultScript = redis.NewScript(finalStatesLu + `
local job = KEYS[1]
if redis.call('EXISTS', job) == 0 then return -1 end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
inherit_ttl(job, KEYS[2])
local status = ARGV[2]
redis.call('HINCRBY', job, 'hooks_' .. status, 1)
redis.call('HINCRBY', job, 'bytes_downloaded', ARGV[3])
redis.call('HINCRBY', job, 'items_queued', ARGV[4])
redis.call('HINCRBY', job, 'items_downloaded', ARGV[4])
if ARGV[5] == '1' then
  local names = {'r1xx', 'r2xx', 'r3xx', 'r4xx', 'r5xx', 'runk', 'error_count'}
  for i, name in ipairs(names) do
    local v = tonumber(ARGV[5 + i])
    if v ~= 0 then redis.call('HINCRBY', job, name, v) end
  end
end
redis.call('HSET', job, 'ts', ARGV[15])
redis.call('RPUSH', KEYS[3], ARGV[13])
redis.call('EXPIRE', KEYS[3], ARGV[14])
for i = 4, 5 do
  redis.call('HINCRBY', KEYS[i], 'all', 1)
  redis.call('HINCRBY', KEYS[i], status, 1)
end
return 1
`)

// appendLogScript appends a batch of packets with ArchiveBot's logger
// semantics, trims the log to its cap and publishes once.
// KEYS: job log logbatches
// ARGV: ident channel cap batch_id window own(0|1) packets...
var appendLogScript = redis.NewScript(finalStatesLu + `
local job = KEYS[1]
if redis.call('EXISTS', job) == 0 then return -1 end
local batch = ARGV[4]
if batch ~= '' and redis.call('ZSCORE', KEYS[3], batch) then return 0 end
local score = 0
for i = 7, #ARGV do
  score = redis.call('HINCRBY', job, 'log_score', 1)
  redis.call('ZADD', KEYS[2], score, ARGV[i])
end
local cap = tonumber(ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(cap + 1))
inherit_ttl(job, KEYS[2])
if ARGV[6] == '1' and score > 0 then
  redis.call('HSET', job, 'last_analyzed_log_entry', score)
end
if batch ~= '' then
  redis.call('ZADD', KEYS[3], score, batch)
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -(tonumber(ARGV[5]) + 1))
  inherit_ttl(job, KEYS[3])
end
redis.call('PUBLISH', ARGV[2], ARGV[1])
return score
`)

// finishScript moves a job to its final state exactly once.
// KEYS: job log ignores ops logbatches pending working jobs_counter
// finish_notifications scheduled scheduled-purge state:pending state:active
// state:draining state:finished state:aborted state:failed
// ARGV: ident state finished_at retention_seconds purge_at channel
var finishScript = redis.NewScript(finalStatesLu + `
local job = KEYS[1]
local ident = ARGV[1]
local state = ARGV[2]
if redis.call('EXISTS', job) == 0 then return -1 end
local cur = redis.call('HGET', job, 'state')
if is_final(cur) then return 0 end
redis.call('HSET', job, 'state', state, 'finished_at', ARGV[3], 'state_changed_at', ARGV[3], 'ts', ARGV[3])
if state == 'aborted' then redis.call('HSET', job, 'aborted', 'true') end
if state == 'failed' then redis.call('HSET', job, 'failed', 'true') end
redis.call('LREM', KEYS[6], 0, ident)
redis.call('LREM', KEYS[7], 0, ident)
redis.call('INCR', KEYS[8])
local info = {ident = ident, state = state, aborted = (state == 'aborted'), failed = (state == 'failed'),
  finished_at = tonumber(ARGV[3])}
for _, f in ipairs({'fetch_depth', 'pipeline_id', 'queued_at', 'started_by', 'started_in', 'url', 'workflow_id', 'run_id'}) do
  local v = redis.call('HGET', job, f)
  if v then info[f] = v end
end
redis.call('RPUSH', KEYS[9], cjson.encode(info))
redis.call('ZREM', KEYS[10], ident)
redis.call('ZADD', KEYS[11], ARGV[5], ident)
local names = {'pending', 'active', 'draining', 'finished', 'aborted', 'failed'}
for i, name in ipairs(names) do
  if name == state then redis.call('SADD', KEYS[11 + i], ident)
  else redis.call('SREM', KEYS[11 + i], ident) end
end
for i = 1, 5 do redis.call('EXPIRE', KEYS[i], ARGV[4]) end
redis.call('PUBLISH', ARGV[6], ident)
return 1
`)

// setSettingsScript writes absolute settings and bumps settings_age only
// when something changed.
// KEYS: job ignores
// ARGV: job_channel ts replace_ignores(0|1) n_fields name value ... ignores...
var setSettingsScript = redis.NewScript(finalStatesLu + `
local job = KEYS[1]
if redis.call('EXISTS', job) == 0 then return -1 end
local changed = false
local n = tonumber(ARGV[4])
local pos = 5
for i = 1, n do
  local name, value = ARGV[pos], ARGV[pos + 1]
  pos = pos + 2
  local cur = redis.call('HGET', job, name)
  if value == '' then
    if cur then redis.call('HDEL', job, name); changed = true end
  elseif cur ~= value then
    redis.call('HSET', job, name, value); changed = true
  end
end
if ARGV[3] == '1' then
  local want = {}
  local nwant = 0
  for i = pos, #ARGV do
    if not want[ARGV[i]] then want[ARGV[i]] = true; nwant = nwant + 1 end
  end
  local have = redis.call('SMEMBERS', KEYS[2])
  local same = #have == nwant
  if same then
    for _, m in ipairs(have) do if not want[m] then same = false; break end end
  end
  if not same then
    redis.call('DEL', KEYS[2])
    for m in pairs(want) do redis.call('SADD', KEYS[2], m) end
    inherit_ttl(job, KEYS[2])
    changed = true
  end
end
if not changed then return 0 end
local age = redis.call('HINCRBY', job, 'settings_age', 1)
redis.call('HSET', job, 'ts', ARGV[2])
redis.call('PUBLISH', ARGV[1], age)
return age
`)

// ignoreScript adds or removes one ignore pattern; settings_age moves only
// when the set changed.
// KEYS: job ignores. ARGV: add|rm pattern job_channel ts
var ignoreScript = redis.NewScript(finalStatesLu + `
local job = KEYS[1]
if redis.call('EXISTS', job) == 0 then return -1 end
local n
if ARGV[1] == 'add' then n = redis.call('SADD', KEYS[2], ARGV[2])
else n = redis.call('SREM', KEYS[2], ARGV[2]) end
if n == 0 then return 0 end
inherit_ttl(job, KEYS[2])
local age = redis.call('HINCRBY', job, 'settings_age', 1)
redis.call('HSET', job, 'ts', ARGV[4])
redis.call('PUBLISH', ARGV[3], age)
return age
`)
