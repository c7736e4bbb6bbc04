package fleethealth

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/luascript"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Outcome is one final hook outcome.
type Outcome struct {
	// Host is the worker host that ran the hook (its pipeline nickname);
	// empty: no host × plugin check is written.
	Host string
	// Ident is the job; its IDENT hash must exist.
	Ident string
	// OpID is the outcome's idempotency key (the hook's key in its
	// workflow run): a repeat changes nothing.
	OpID string
	// Once: the caller records this outcome once by itself (a crawl page's
	// hooks, with the outcome the frontier applied), so no repeat-safety
	// key is kept for it (OpID may be empty).
	Once   bool
	Result model.ArchiveResult
	// NotStarted: the hook could not start (a configuration error); a
	// hard failure whatever its exit code says.
	NotStarted bool
}

// maxSummary bounds a state change's summary (bytes).
const maxSummary = 512

// summary is the Flapjack summary of a result: its status and the output
// or error, capped.
func summary(r model.ArchiveResult) string {
	s := string(r.Status)
	if r.Error != "" {
		s += ": " + r.Error
	} else if r.OutputStr != "" {
		s += ": " + r.OutputStr
	}
	if len(s) > maxSummary {
		s = strings.ToValidUTF8(s[:maxSummary], "")
	}
	return s
}

// event is an outcome in Flapjack's EVENT format, for flapjack.feed.
type event struct {
	Type     string   `json:"type"`
	State    string   `json:"state"`
	Entity   string   `json:"entity"`
	Check    string   `json:"check"`
	Time     int64    `json:"time"`
	Summary  string   `json:"summary"`
	Details  string   `json:"details,omitempty"`
	Perfdata string   `json:"perfdata,omitempty"`
	Tags     []string `json:"tags"`
	Duration int64    `json:"duration,omitempty"`
}

// hostState is the state a single outcome of its class suggests, for the
// feed (Flapjack's processor derives the rest).
func hostState(c Class) string {
	switch c {
	case ClassHard:
		return StateCritical
	case ClassSoft:
		return StateWarning
	default:
		return StateOK
	}
}

// Record writes one final outcome, in one round trip, exactly once per
// o.OpID: the host × plugin check (when o.Host is set) and the job × hook
// check, their histories on a state change, failed_checks, and a problem
// or recovery notification when the host check enters or leaves
// failed_checks (no problem notification during a maintenance). With the
// feed on, it pushes the two events to Flapjack's events queue instead.
// It reports whether this call applied the outcome. This is the function
// every final hook outcome goes through: snapshot hooks (internal/jobstore
// RecordResult) and crawl page hooks alike.
func (h *Health) Record(ctx context.Context, o Outcome) (bool, error) {
	op, result, err := h.RecordOp(ctx, o)
	if err != nil {
		return false, err
	}
	return result(op(h.store.Client()))
}

// RecordOp is Record as an op of a pipeline (luascript.Pipeline: many
// outcomes in one round trip); result reads its command once the
// pipeline ran.
func (h *Health) RecordOp(ctx context.Context, o Outcome) (op luascript.Op, result func(redis.Cmder) (bool, error), err error) {
	r := o.Result
	switch {
	case o.Ident == "":
		return nil, nil, fmt.Errorf("record health of hook %s: %w: job ident must not be empty", r.Hook, ErrInvalid)
	case o.OpID == "" && !o.Once:
		return nil, nil, fmt.Errorf("record health of job %s hook %s: %w: op id must not be empty (repeat-safety key)", o.Ident, r.Hook, ErrInvalid)
	case r.Hook == "" || strings.Contains(r.Hook, ":"):
		return nil, nil, fmt.Errorf("record health of job %s: %w: hook %q: must be non-empty without ':'", o.Ident, ErrInvalid, r.Hook)
	case o.Host != "" && (r.Plugin == "" || strings.ContainsAny(r.Plugin, ":*") || strings.ContainsAny(o.Host, ":*")):
		return nil, nil, fmt.Errorf("record health of job %s hook %s: %w: host %q and plugin %q: must be non-empty without ':' or '*'", o.Ident, r.Hook, ErrInvalid, o.Host, r.Plugin)
	}
	if _, err := model.ParseStatus(string(r.Status)); err != nil {
		return nil, nil, fmt.Errorf("record health of job %s hook %s: %w: %w", o.Ident, r.Hook, ErrInvalid, err)
	}
	at := r.EndedAt
	if at.IsZero() {
		at = h.opts.Now()
	}
	// Flapjack's times are whole seconds, and so is the latency: a check
	// recorded within its second has none (no check_latency key).
	latency := max(int64(h.opts.Now().Sub(at)/time.Second), 0)
	class := Classify(r)
	if o.NotStarted && r.Status == model.StatusFailed {
		class = ClassHard
	}
	sum := summary(r)
	jobState := rkeys.FlapjackState(r.Status)
	var hostEv, jobEv []byte
	if h.opts.Feed {
		var dur int64
		if !r.StartedAt.IsZero() && !r.EndedAt.IsZero() {
			dur = int64(r.EndedAt.Sub(r.StartedAt) / time.Second)
		}
		var err error
		if o.Host != "" {
			if hostEv, err = json.Marshal(event{Type: "service", State: hostState(class), Entity: o.Host, Check: r.Plugin,
				Time: at.Unix(), Summary: sum, Tags: []string{"archiveflow", "host"}, Duration: dur}); err != nil {
				return nil, nil, err
			}
		}
		if jobEv, err = json.Marshal(event{Type: "service", State: jobState, Entity: o.Ident, Check: r.Hook,
			Time: at.Unix(), Summary: sum, Details: r.Plugin, Tags: []string{"archiveflow", "job"}, Duration: dur}); err != nil {
			return nil, nil, err
		}
	}
	outbox := ""
	if h.opts.Webhook {
		outbox = h.WebhookOutbox()
	}
	keys := h.store.Keys()
	args := []any{h.ns, at.Unix(), opKey(o), h.opts.OKAfter, h.opts.CriticalAfter, h.opts.HistoryCap,
		h.QueueKey(), outbox, int64(h.opts.JobTTL / time.Second), feedArg(h.opts.Feed),
		o.Host, r.Plugin, string(class), sum, o.Ident, r.Hook, jobState,
		latency, string(hostEv), string(jobEv)}
	named := map[string]string{"job": keys.Job(o.Ident), "ops": keys.Ops(o.Ident)}
	op = func(c redis.Cmdable) redis.Cmder {
		return h.store.RunScriptOn(ctx, c, recordScript, named, nil, args...)
	}
	result = func(c redis.Cmder) (bool, error) {
		code, err := c.(*redis.Cmd).Int()
		if err != nil {
			return false, fmt.Errorf("record health of job %s hook %s: %w", o.Ident, r.Hook, err)
		}
		switch code {
		case rkeys.CodeNotFound:
			return false, fmt.Errorf("record health of job %s hook %s: %w", o.Ident, r.Hook, rkeys.ErrJobNotFound)
		case rkeys.CodeNoop:
			return false, nil
		}
		return true, nil
	}
	return op, result, nil
}

// opKey is the outcome's entry in the job's ops set; "" keeps none.
func opKey(o Outcome) string {
	if o.Once {
		return ""
	}
	return "health:" + o.OpID
}

func feedArg(feed bool) string {
	if feed {
		return "1"
	}
	return "0"
}

// recordScript writes one outcome; see Record. ARGV: 1 ns, 2 time,
// 3 op ("": none kept), 4 ok_after, 5 critical_after, 6 cap, 7 queue, 8 webhook outbox,
// 9 job ttl s, 10 feed, 11 host, 12 plugin, 13 class, 14 summary,
// 15 ident, 16 hook, 17 job state, 18 latency (whole seconds), 19 host
// event, 20 job event.
// The names of events, failed_checks and health_hosts are NS-prefixed
// constants (keyFailedChecks, keyHealthHosts, EventsKey).
var recordScript = rkeys.NewScript([]string{"job", "ops"}, luaCommon+`
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
if ARGV[3] ~= '' then
  if redis.call('SADD', ops, ARGV[3]) == 0 then return CODE_NOOP end
  inherit_ttl(job, ops)
end
if ARGV[10] == '1' then
  if ARGV[19] ~= '' then redis.call('RPUSH', NS .. '`+keyEvents+`', ARGV[19]) end
  redis.call('RPUSH', NS .. '`+keyEvents+`', ARGV[20])
  return CODE_APPLIED
end
local OKN, CRITK, CAP = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local QUEUE, OUTBOX, FAILED = ARGV[7], ARGV[8], NS .. '`+keyFailedChecks+`'

-- touch counts an outcome of ENTITY:CHECK and marks it current and
-- known; it returns the old state, the check's outcome count and whether
-- an earlier outcome already did so this second (last_update is NOW: the
-- sorted mirrors' scores and the name maps would not change, so they are
-- not written again).
local function touch(e, c)
  local h = hk(e, c)
  local cur = redis.call('HMGET', h, 'state', 'last_update')
  local n = redis.call('HINCRBY', h, 'count', 1)
  if cur[2] == tostring(NOW) then return cur[1], n, true end
  redis.call('HSET', h, 'last_update', NOW)
  redis.call('ZADD', NS .. 'current_checks:' .. e, NOW, c)
  redis.call('ZADD', NS .. 'current_entities', NOW, e)
  redis.call('ZADD', NS .. 'all_checks', NOW, c)
  redis.call('ZADD', NS .. 'all_checks:' .. e, NOW, c)
  redis.call('HSET', NS .. 'all_entity_names_by_id', e, e)
  redis.call('HSET', NS .. 'all_entity_ids_by_name', e, e)
  return cur[1], n, false
end

-- change appends a state change to the check's history, capped; it
-- returns the keys it wrote (for a job's expiry). As Flapjack's own
-- update_state, it writes no key for a field without a value: no
-- check_latency when the outcome is recorded within its second (a stale
-- check_latency of an earlier change at the same second is deleted).
local function change(e, c, state, summary, n)
  local k = ck(e, c)
  redis.call('HSET', hk(e, c), 'state', state, 'last_change', NOW)
  local list = k .. ':states'
  if redis.call('LINDEX', list, -1) ~= tostring(NOW) then redis.call('RPUSH', list, NOW) end
  local p = k .. ':' .. NOW .. ':'
  local written = {p .. 'state', p .. 'summary', p .. 'count'}
  redis.call('SET', written[1], state)
  redis.call('SET', written[2], summary)
  redis.call('SET', written[3], n)
  if ARGV[18] ~= '0' then
    written[4] = p .. 'check_latency'
    redis.call('SET', written[4], ARGV[18])
  else
    redis.call('DEL', p .. 'check_latency')
  end
  redis.call('ZADD', k .. ':sorted_state_timestamps', NOW, NOW)
  while redis.call('LLEN', list) > CAP do
    local old = redis.call('LPOP', list)
    redis.call('DEL', k .. ':' .. old .. ':state', k .. ':' .. old .. ':summary', k .. ':' .. old .. ':count', k .. ':' .. old .. ':check_latency')
    redis.call('ZREM', k .. ':sorted_state_timestamps', old)
  end
  return written
end

-- failed moves ENTITY:CHECK into failed_checks when it goes critical and
-- out when it recovers; it returns 1 entered, -1 left, 0 neither.
local function failed(e, c, state)
  if state == 'critical' then
    return redis.call('ZADD', FAILED, 'NX', NOW, e .. ':' .. c)
  elseif state == 'ok' then
    return -redis.call('ZREM', FAILED, e .. ':' .. c)
  end
  return 0
end

-- The host × plugin check.
local host, plugin, class = ARGV[11], ARGV[12], ARGV[13]
if host ~= '' then
  local h = hk(host, plugin)
  local old, n, seen = touch(host, plugin)
  if not seen then redis.call('ZADD', NS .. '`+keyHealthHosts+`', NOW, host) end
  local recent = redis.call('HGET', h, 'recent') or ''
  local state = old or 'ok'
  if class ~= 'n' then
    local w = math.max(OKN, CRITK)
    recent = string.sub(recent .. class, -w)
    redis.call('HSET', h, 'recent', recent)
    if #recent >= CRITK and string.sub(recent, -CRITK) == string.rep('c', CRITK) then
      state = 'critical'
    elseif string.sub(recent, -OKN) == string.rep('o', math.min(OKN, #recent)) then
      state = 'ok'
    else
      state = 'warning'
    end
  end
  if state ~= old then
    local last_summary = ''
    if old then
      local prev = redis.call('LINDEX', ck(host, plugin) .. ':states', -1)
      if prev then last_summary = redis.call('GET', ck(host, plugin) .. ':' .. prev .. ':summary') or '' end
    end
    change(host, plugin, state, ARGV[14], n)
    local moved = failed(host, plugin, state)
    if moved == 1 then
      if not active_maint(host, plugin) then
        notify(host, plugin, 'problem', state, ARGV[14], old or 'ok', last_summary, 0, CAP, QUEUE, OUTBOX)
        redis.call('HSET', h, 'notified', '1')
      end
    elseif moved == -1 then
      if redis.call('HDEL', h, 'notified') == 1 then
        notify(host, plugin, 'recovery', state, ARGV[14], old or 'ok', last_summary, 0, CAP, QUEUE, OUTBOX)
      end
    end
  end
end

-- The job × hook check: its state is the hook's final status; its keys
-- expire with the job (or after the job ttl while it runs).
local ident, hook, jstate = ARGV[15], ARGV[16], ARGV[17]
local old, n, seen = touch(ident, hook)
local keys = {hk(ident, hook), NS .. 'current_checks:' .. ident, NS .. 'all_checks:' .. ident}
if jstate == old and seen then return CODE_APPLIED end -- its keys' expiry was set this second
if jstate ~= old then
  for _, k in ipairs(change(ident, hook, jstate, ARGV[14], n)) do keys[#keys + 1] = k end
  keys[#keys + 1] = ck(ident, hook) .. ':states'
  keys[#keys + 1] = ck(ident, hook) .. ':sorted_state_timestamps'
  failed(ident, hook, jstate)
end
local ttl = redis.call('PTTL', job)
if ttl <= 0 then ttl = tonumber(ARGV[9]) * 1000 end
for _, k in ipairs(keys) do redis.call('PEXPIRE', k, ttl) end
return CODE_APPLIED
`)
