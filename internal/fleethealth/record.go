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
// RecordResult) and crawl page hooks alike (a page sink flush's together:
// RecordBatchOp).
func (h *Health) Record(ctx context.Context, o Outcome) (bool, error) {
	op, result, err := h.RecordOp(ctx, o)
	if err != nil {
		return false, err
	}
	return result(op(h.store.Client()))
}

// RecordOp is Record as an op of a pipeline (luascript.Pipeline: many
// outcomes in one round trip); result reads its command once the
// pipeline ran. It is RecordBatchOp of one outcome.
func (h *Health) RecordOp(ctx context.Context, o Outcome) (op luascript.Op, result func(redis.Cmder) (bool, error), err error) {
	op, results, err := h.RecordBatchOp(ctx, []Outcome{o})
	if err != nil {
		return nil, nil, err
	}
	return op, func(c redis.Cmder) (bool, error) {
		applied, err := results(c)
		if err != nil {
			return false, err
		}
		return applied[0], nil
	}, nil
}

// RecordBatchOp records outcomes of one job in one script, in order, each
// as Record does alone (a page sink flush's: jobstore CrawlStore): the
// check hashes they touch are read once and written once for all of them
// (`count`, `last_update`, `recent`), so a check's outcome count moves by
// one HINCRBY's worth per batch instead of per outcome. result reads the
// op's command once the pipeline ran: whether each outcome was applied.
// An outcome Record would refuse fails the whole batch (ErrInvalid), as
// do outcomes of several jobs.
func (h *Health) RecordBatchOp(ctx context.Context, os []Outcome) (op luascript.Op, result func(redis.Cmder) ([]bool, error), err error) {
	if len(os) == 0 {
		return nil, nil, fmt.Errorf("record health: %w: no outcomes", ErrInvalid)
	}
	ident := os[0].Ident
	args := []any{h.ns, h.opts.Now().Unix(), h.opts.OKAfter, h.opts.CriticalAfter, h.opts.HistoryCap,
		h.QueueKey(), "", int64(h.opts.JobTTL / time.Second), feedArg(h.opts.Feed), ident}
	if h.opts.Webhook {
		args[6] = h.WebhookOutbox()
	}
	for _, o := range os {
		if o.Ident != ident {
			return nil, nil, fmt.Errorf("record health of job %s hook %s: %w: a batch is of one job, not also %s", o.Ident, o.Result.Hook, ErrInvalid, ident)
		}
		if args, err = h.appendOutcome(args, o); err != nil {
			return nil, nil, err
		}
	}
	keys := h.store.Keys()
	named := map[string]string{"job": keys.Job(ident), "ops": keys.Ops(ident)}
	op = func(c redis.Cmdable) redis.Cmder {
		return h.store.RunScriptOn(ctx, c, recordScript, named, nil, args...)
	}
	result = func(c redis.Cmder) ([]bool, error) {
		what := fmt.Sprintf("record health of job %s hook %s", ident, os[0].Result.Hook)
		if len(os) > 1 {
			what = fmt.Sprintf("record health of %d outcomes of job %s", len(os), ident)
		}
		v, err := c.(*redis.Cmd).Result()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if code, ok := v.(int64); ok && code == rkeys.CodeNotFound {
			return nil, fmt.Errorf("%s: %w", what, rkeys.ErrJobNotFound)
		}
		codes, ok := v.([]any)
		if !ok || len(codes) != len(os) {
			return nil, fmt.Errorf("%s: unexpected reply %v", what, v)
		}
		applied := make([]bool, len(os))
		for i, code := range codes {
			applied[i] = code != int64(rkeys.CodeNoop)
		}
		return applied, nil
	}
	return op, result, nil
}

// outcomeArgs is the number of recordScript's arguments per outcome.
const (
	outcomeArgs    = 11
	outcomeArgsLua = "11"
)

// appendOutcome checks o and appends its arguments of recordScript.
func (h *Health) appendOutcome(args []any, o Outcome) ([]any, error) {
	r := o.Result
	switch {
	case o.Ident == "":
		return nil, fmt.Errorf("record health of hook %s: %w: job ident must not be empty", r.Hook, ErrInvalid)
	case o.OpID == "" && !o.Once:
		return nil, fmt.Errorf("record health of job %s hook %s: %w: op id must not be empty (repeat-safety key)", o.Ident, r.Hook, ErrInvalid)
	case r.Hook == "" || strings.Contains(r.Hook, ":"):
		return nil, fmt.Errorf("record health of job %s: %w: hook %q: must be non-empty without ':'", o.Ident, ErrInvalid, r.Hook)
	case o.Host != "" && (r.Plugin == "" || strings.ContainsAny(r.Plugin, ":*") || strings.ContainsAny(o.Host, ":*")):
		return nil, fmt.Errorf("record health of job %s hook %s: %w: host %q and plugin %q: must be non-empty without ':' or '*'", o.Ident, r.Hook, ErrInvalid, o.Host, r.Plugin)
	}
	if _, err := model.ParseStatus(string(r.Status)); err != nil {
		return nil, fmt.Errorf("record health of job %s hook %s: %w: %w", o.Ident, r.Hook, ErrInvalid, err)
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
				return nil, err
			}
		}
		if jobEv, err = json.Marshal(event{Type: "service", State: jobState, Entity: o.Ident, Check: r.Hook,
			Time: at.Unix(), Summary: sum, Details: r.Plugin, Tags: []string{"archiveflow", "job"}, Duration: dur}); err != nil {
			return nil, err
		}
	}
	return append(args, at.Unix(), opKey(o), o.Host, r.Plugin, string(class), sum, r.Hook, jobState,
		latency, string(hostEv), string(jobEv)), nil
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

// recordScript writes outcomes of one job, in order; see Record and
// RecordBatchOp. ARGV: 1 ns, 2 now (each outcome's time in turn), 3
// ok_after, 4 critical_after, 5 cap, 6 queue, 7 webhook outbox, 8 job ttl
// s, 9 feed, 10 ident; then per outcome (outcomeArgs): time, op ("": none
// kept), host, plugin, class, summary, hook, job state, latency (whole
// seconds), host event, job event. Reply: CODE_NOT_FOUND, or a code per
// outcome (CODE_APPLIED, CODE_NOOP: its op was kept before).
// The names of events, failed_checks and health_hosts are NS-prefixed
// constants (keyFailedChecks, keyHealthHosts, EventsKey).
var recordScript = rkeys.NewScript([]string{"job", "ops"}, luaCommon+`
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
local OKN, CRITK, CAP = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local QUEUE, OUTBOX, FAILED = ARGV[6], ARGV[7], NS .. '`+keyFailedChecks+`'
local JOB_TTL, FEED, ident = tonumber(ARGV[8]), ARGV[9], ARGV[10]

-- The check hashes the outcomes touch, read once (check) and their
-- count, last_update and recent written once, after them all (flush).
local checks, order = {}, {}
local function check(h)
  local ch = checks[h]
  if not ch then
    local v = redis.call('HMGET', h, 'state', 'last_update', 'count', 'recent')
    ch = {state = v[1], last_update = v[2], count = tonumber(v[3] or '0'), recent = v[4], set = {}}
    checks[h], order[#order + 1] = ch, h
  end
  return ch
end
local function flush()
  for _, h in ipairs(order) do
    local ch, args = checks[h], {}
    for _, f in ipairs({'count', 'last_update', 'recent'}) do
      if ch.set[f] then args[#args + 1], args[#args + 2] = f, ch[f] end
    end
    if #args > 0 then redis.call('HSET', h, unpack(args)) end
  end
end

-- touch counts an outcome of ENTITY:CHECK and marks it current and
-- known; it returns the old state, the check's outcome count and whether
-- an earlier outcome already did so this second (last_update is NOW: the
-- sorted mirrors' scores and the name maps would not change, so they are
-- not written again).
local function touch(e, c)
  local ch = check(hk(e, c))
  ch.count, ch.set.count = ch.count + 1, true
  if ch.last_update == tostring(NOW) then return ch.state, ch.count, true end
  ch.last_update, ch.set.last_update = tostring(NOW), true
  redis.call('ZADD', NS .. 'current_checks:' .. e, NOW, c)
  redis.call('ZADD', NS .. 'current_entities', NOW, e)
  redis.call('ZADD', NS .. 'all_checks', NOW, c)
  redis.call('ZADD', NS .. 'all_checks:' .. e, NOW, c)
  redis.call('HSET', NS .. 'all_entity_names_by_id', e, e)
  redis.call('HSET', NS .. 'all_entity_ids_by_name', e, e)
  return ch.state, ch.count, false
end

-- change appends a state change to the check's history, capped; it
-- returns the keys it wrote (for a job's expiry). As Flapjack's own
-- update_state, it writes no key for a field without a value: no
-- check_latency when the outcome is recorded within its second (a stale
-- check_latency of an earlier change at the same second is deleted).
local function change(e, c, state, summary, n, latency)
  local k = ck(e, c)
  redis.call('HSET', hk(e, c), 'state', state, 'last_change', NOW)
  check(hk(e, c)).state = state
  local list = k .. ':states'
  if redis.call('LINDEX', list, -1) ~= tostring(NOW) then redis.call('RPUSH', list, NOW) end
  local p = k .. ':' .. NOW .. ':'
  local written = {p .. 'state', p .. 'summary', p .. 'count'}
  redis.call('SET', written[1], state)
  redis.call('SET', written[2], summary)
  redis.call('SET', written[3], n)
  if latency ~= '0' then
    written[4] = p .. 'check_latency'
    redis.call('SET', written[4], latency)
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

-- record writes the outcome whose arguments start at ARGV[a].
local function record(a)
  NOW = tonumber(ARGV[a])
  local op = ARGV[a + 1]
  if op ~= '' then
    if redis.call('SADD', ops, op) == 0 then return CODE_NOOP end
    inherit_ttl(job, ops)
  end
  local host, plugin, class, summary = ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
  local hook, jstate, latency = ARGV[a + 6], ARGV[a + 7], ARGV[a + 8]
  if FEED == '1' then
    if ARGV[a + 9] ~= '' then redis.call('RPUSH', NS .. '`+keyEvents+`', ARGV[a + 9]) end
    redis.call('RPUSH', NS .. '`+keyEvents+`', ARGV[a + 10])
    return CODE_APPLIED
  end

  -- The host × plugin check.
  if host ~= '' then
    local h = hk(host, plugin)
    local old, n, seen = touch(host, plugin)
    if not seen then redis.call('ZADD', NS .. '`+keyHealthHosts+`', NOW, host) end
    local ch = check(h)
    local recent = ch.recent or ''
    local state = old or 'ok'
    if class ~= 'n' then
      local w = math.max(OKN, CRITK)
      recent = string.sub(recent .. class, -w)
      ch.recent, ch.set.recent = recent, true
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
      change(host, plugin, state, summary, n, latency)
      local moved = failed(host, plugin, state)
      if moved == 1 then
        if not active_maint(host, plugin) then
          notify(host, plugin, 'problem', state, summary, old or 'ok', last_summary, 0, CAP, QUEUE, OUTBOX)
          redis.call('HSET', h, 'notified', '1')
        end
      elseif moved == -1 then
        if redis.call('HDEL', h, 'notified') == 1 then
          notify(host, plugin, 'recovery', state, summary, old or 'ok', last_summary, 0, CAP, QUEUE, OUTBOX)
        end
      end
    end
  end

  -- The job × hook check: its state is the hook's final status; its keys
  -- expire with the job (or after the job ttl while it runs).
  local old, n, seen = touch(ident, hook)
  local keys = {hk(ident, hook), NS .. 'current_checks:' .. ident, NS .. 'all_checks:' .. ident}
  if jstate == old and seen then return CODE_APPLIED end -- its keys' expiry was set this second
  if jstate ~= old then
    for _, k in ipairs(change(ident, hook, jstate, summary, n, latency)) do keys[#keys + 1] = k end
    keys[#keys + 1] = ck(ident, hook) .. ':states'
    keys[#keys + 1] = ck(ident, hook) .. ':sorted_state_timestamps'
    failed(ident, hook, jstate)
  end
  -- A new check's hash exists already: change wrote its state.
  local ttl = redis.call('PTTL', job)
  if ttl <= 0 then ttl = JOB_TTL * 1000 end
  for _, k in ipairs(keys) do redis.call('PEXPIRE', k, ttl) end
  return CODE_APPLIED
end

local codes = {}
for a = 11, #ARGV, `+outcomeArgsLua+` do codes[#codes + 1] = record(a) end
flush()
return codes
`)
