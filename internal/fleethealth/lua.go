package fleethealth

// luaCommon are the Lua helpers the scripts share. Every key is derived
// from NS (the namespace) as Flapjack names it; ARGV[1] is NS, ARGV[2] the
// time (unix seconds) of the write.
const luaCommon = `
local NS = ARGV[1]
local NOW = tonumber(ARGV[2])
local function ck(e, c) return NS .. e .. ':' .. c end
local function hk(e, c) return NS .. 'check:' .. e .. ':' .. c end

-- active_maint returns start, end, summary, kind of the maintenance of
-- ENTITY:CHECK (or of the whole entity, CHECK '*') in force at NOW, or nil.
-- A scheduled one whose window has begun gets its scheduled_maintenance
-- key, as Flapjack's processor makes it.
local function active_maint(e, c)
  local checks = {c}
  if c ~= '*' then checks[2] = '*' end
  for _, cc in ipairs(checks) do
    local k = ck(e, cc)
    local start = redis.call('GET', k .. ':unscheduled_maintenance')
    if start then
      local dur = tonumber(redis.call('ZSCORE', k .. ':unscheduled_maintenances', start) or '0')
      if tonumber(start) + dur > NOW then
        local sum = redis.call('GET', k .. ':' .. start .. ':unscheduled_maintenance:summary') or ''
        return tonumber(start), tonumber(start) + dur, sum, 'unscheduled', cc
      end
    end
    local recent = redis.call('ZREVRANGEBYSCORE', k .. ':sorted_scheduled_maintenance_timestamps', NOW, '-inf', 'LIMIT', 0, 8)
    for _, s in ipairs(recent) do
      local dur = tonumber(redis.call('ZSCORE', k .. ':scheduled_maintenances', s) or '0')
      local fin = tonumber(s) + dur
      if fin > NOW then
        if redis.call('EXISTS', k .. ':scheduled_maintenance') == 0 then
          redis.call('SET', k .. ':scheduled_maintenance', s, 'EX', fin - NOW)
        end
        local sum = redis.call('GET', k .. ':' .. s .. ':scheduled_maintenance:summary') or ''
        return tonumber(s), fin, sum, 'scheduled', cc
      end
    end
  end
  return nil
end

-- notify records a notification of kind (problem, recovery,
-- acknowledgement) of ENTITY:CHECK: last_KIND_notification, the capped
-- KIND_notifications list, and the JSON (as Flapjack serialises a
-- notification) pushed to the queue and the webhook outbox.
local function notify(e, c, kind, state, summary, last_state, last_summary, duration, cap, queue, outbox)
  local k = ck(e, c)
  redis.call('SET', k .. ':last_' .. kind .. '_notification', NOW)
  redis.call('RPUSH', k .. ':' .. kind .. '_notifications', NOW)
  redis.call('LTRIM', k .. ':' .. kind .. '_notifications', -cap, -1)
  local body = cjson.encode({
    event_id = e .. ':' .. c, entity = e, check = c, type = kind, state = state,
    summary = summary, time = NOW, duration = duration,
    last_state = last_state, last_summary = last_summary,
  })
  redis.call('RPUSH', queue, body)
  if outbox ~= '' then redis.call('RPUSH', outbox, body) end
end
`
