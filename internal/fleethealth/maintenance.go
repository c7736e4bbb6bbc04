package fleethealth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Maintenance is one maintenance of a host (Check HostWide) or of a
// plugin on a host, as Flapjack stores it.
type Maintenance struct {
	Host  string
	Check string // a plugin, or HostWide
	// Scheduled: created for a later start (--at); otherwise unscheduled,
	// starting now and acknowledging the problems it covers.
	Scheduled bool
	Start     time.Time
	End       time.Time
	Summary   string
}

// Reason says what the maintenance is, for a skipped hook's output and a
// drained worker's pipeline record.
func (m Maintenance) Reason() string {
	what := m.Host
	if m.Check != HostWide {
		what += ":" + m.Check
	}
	kind := "unscheduled"
	if m.Scheduled {
		kind = "scheduled"
	}
	return fmt.Sprintf("%s maintenance of %s until %s: %s", kind, what, m.End.UTC().Format(time.RFC3339), m.Summary)
}

// Known hosts and plugins, from the caller (the pipelines registered now)
// in addition to those with checks.
type Known struct {
	Hosts []string // pipeline nicknames of the running workers
}

// Start records a maintenance of m.Host (m.Check HostWide) or of plugin
// m.Check on it, from m.Start (now when unscheduled) to m.End, in one
// script: an unscheduled one sets ENTITY:CHECK:unscheduled_maintenance
// (expiring at its end; a running one is extended and the summaries glued,
// as Flapjack does), the unscheduled_maintenances zset (DURATION,
// TIMESTAMP), the summary and the sorted mirror, and acknowledges every
// failing check it covers (an acknowledgement notification, the actions
// hash); a scheduled one the scheduled_* structures. An unknown host or
// plugin, an end not after the start or an empty summary is refused and
// nothing is written. It returns how many problems were acknowledged.
func (h *Health) Start(ctx context.Context, m Maintenance, known Known) (int, error) {
	what := m.Host
	if m.Check != HostWide {
		what += " " + m.Check
	}
	now := h.opts.Now()
	if !m.Scheduled {
		m.Start = now
	}
	switch {
	case m.Host == "" || strings.ContainsAny(m.Host, ":*"):
		return 0, fmt.Errorf("maintenance of host %q: %w: a host is a worker's pipeline nickname, non-empty, without ':' or '*'", m.Host, ErrInvalid)
	case m.Check == "" || (m.Check != HostWide && strings.ContainsAny(m.Check, ":*")):
		return 0, fmt.Errorf("maintenance of %s: %w: plugin %q: must be non-empty without ':' or '*'", m.Host, ErrInvalid, m.Check)
	case !m.End.After(m.Start):
		return 0, fmt.Errorf("maintenance of %s: %w: duration %s: must be > 0", what, ErrInvalid, m.End.Sub(m.Start))
	case strings.TrimSpace(m.Summary) == "":
		return 0, fmt.Errorf("maintenance of %s: %w: summary must not be empty (say why)", what, ErrInvalid)
	case m.Scheduled && !m.End.After(now):
		return 0, fmt.Errorf("maintenance of %s: %w: it would end at %s, in the past", what, ErrInvalid, m.End.UTC().Format(time.RFC3339))
	}
	pipelineKnown := "0"
	for _, k := range known.Hosts {
		if k == m.Host {
			pipelineKnown = "1"
		}
	}
	scheduled := "0"
	if m.Scheduled {
		scheduled = "1"
	}
	outbox := ""
	if h.opts.Webhook {
		outbox = h.WebhookOutbox()
	}
	start := m.Start.Unix()
	n, err := h.store.RunScript(ctx, maintScript, nil, nil,
		h.ns, now.Unix(), m.Host, m.Check, start, m.End.Unix()-start, m.Summary, scheduled,
		pipelineKnown, h.HealthHosts(), h.FailedChecks(), h.opts.HistoryCap, h.QueueKey(), outbox).Int()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			switch msg := strings.TrimPrefix(rerr.Error(), "ERR "); {
			case strings.HasPrefix(msg, "unknown host"):
				return 0, fmt.Errorf("maintenance of %s: %w: unknown host %q: not a running worker's pipeline nickname and never ran a hook (see starter health, starter pipelines)", what, ErrInvalid, m.Host)
			case strings.HasPrefix(msg, "unknown plugin"):
				return 0, fmt.Errorf("maintenance of %s: %w: unknown plugin %q on host %s: it never ran there (%s)", what, ErrInvalid, m.Check, m.Host, strings.TrimPrefix(msg, "unknown plugin; "))
			}
		}
		return 0, fmt.Errorf("maintenance of %s: %w", what, err)
	}
	return n, nil
}

// maintScript records a maintenance; see Start. ARGV: 1 ns, 2 now,
// 3 host, 4 check, 5 start, 6 duration, 7 summary, 8 scheduled,
// 9 host known by a pipeline, 10 health_hosts, 11 failed_checks, 12 cap,
// 13 queue, 14 outbox.
var maintScript = rkeys.NewScript(nil, luaCommon+`
local host, check, start, dur, summary = ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
if ARGV[9] ~= '1' and not redis.call('ZSCORE', ARGV[10], host) then
  return redis.error_reply('unknown host')
end
if check ~= '*' and not redis.call('ZSCORE', NS .. 'all_checks:' .. host, check) then
  local names = redis.call('ZRANGE', NS .. 'all_checks:' .. host, 0, 49)
  local list = 'known: none'
  if #names > 0 then list = 'known: ' .. table.concat(names, ', ') end
  return redis.error_reply('unknown plugin; ' .. list)
end
local k = ck(host, check)
if ARGV[8] == '1' then
  redis.call('ZADD', k .. ':scheduled_maintenances', dur, start)
  redis.call('SET', k .. ':' .. start .. ':scheduled_maintenance:summary', summary)
  redis.call('ZADD', k .. ':sorted_scheduled_maintenance_timestamps', start, start)
  if start <= NOW then redis.call('SET', k .. ':scheduled_maintenance', start, 'EX', start + dur - NOW) end
  return 0
end
local cur = redis.call('GET', k .. ':unscheduled_maintenance')
if cur then
  -- Extend the running one: its start stays, the summaries are glued.
  local prev = redis.call('GET', k .. ':' .. cur .. ':unscheduled_maintenance:summary') or ''
  start = tonumber(cur)
  dur = NOW + dur - start
  summary = prev .. '; ' .. summary
end
redis.call('SET', k .. ':unscheduled_maintenance', start, 'EX', start + dur - NOW)
redis.call('ZADD', k .. ':unscheduled_maintenances', dur, start)
redis.call('SET', k .. ':' .. start .. ':unscheduled_maintenance:summary', summary)
redis.call('ZADD', k .. ':sorted_unscheduled_maintenance_timestamps', start, start)
-- Acknowledge the failing checks it covers.
local checks = {check}
if check == '*' then checks = redis.call('ZRANGE', NS .. 'all_checks:' .. host, 0, -1) end
local acked = 0
for _, c in ipairs(checks) do
  if redis.call('ZSCORE', ARGV[11], host .. ':' .. c) then
    local state = redis.call('HGET', hk(host, c), 'state') or 'critical'
    redis.call('HSET', ck(host, c) .. ':actions', NOW, 'acknowledgement')
    notify(host, c, 'acknowledgement', state, summary, state, '', start + dur - NOW, tonumber(ARGV[12]), ARGV[13], ARGV[14])
    acked = acked + 1
  end
end
return acked
`)

// Active returns the maintenance in force now of plugin on host (its own,
// or the host's when check is a plugin), or of the whole host (check
// HostWide), and whether there is one. A scheduled one whose window has
// begun gets its scheduled_maintenance key.
func (h *Health) Active(ctx context.Context, host, check string) (Maintenance, bool, error) {
	res, err := h.store.RunScript(ctx, activeScript, nil, nil, h.ns, h.opts.Now().Unix(), host, check).Slice()
	if errors.Is(err, redis.Nil) {
		return Maintenance{}, false, nil
	}
	if err != nil {
		return Maintenance{}, false, fmt.Errorf("maintenance of %s %s: %w", host, check, err)
	}
	if len(res) != 5 {
		return Maintenance{}, false, fmt.Errorf("maintenance of %s %s: %d values: want 5", host, check, len(res))
	}
	start, _ := res[0].(int64)
	end, _ := res[1].(int64)
	sum, _ := res[2].(string)
	kind, _ := res[3].(string)
	cc, _ := res[4].(string)
	return Maintenance{Host: host, Check: cc, Scheduled: kind == "scheduled", Start: time.Unix(start, 0), End: time.Unix(end, 0), Summary: sum}, true, nil
}

// activeScript: ARGV 1 ns, 2 now, 3 host, 4 check.
var activeScript = rkeys.NewScript(nil, luaCommon+`
local s, e, sum, kind, cc = active_maint(ARGV[3], ARGV[4])
if not s then return false end
return {s, e, sum, kind, cc}
`)
