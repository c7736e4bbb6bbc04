package rkeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/luascript"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Event is the Flapjack-style JSON event appended to events_archive:HOUR
// for every final ArchiveResult.
type Event struct {
	// Flapjack event fields.
	Entity  string `json:"entity"`  // the job ident
	Check   string `json:"check"`   // the hook file name
	Type    string `json:"type"`    // always "service"
	State   string `json:"state"`   // ok | warning | critical (see FlapjackState)
	Summary string `json:"summary"` // status plus output or error
	Time    int64  `json:"time"`    // unix seconds of the hook's end
	// archiveflow fields.
	Status     model.Status `json:"status"`
	Plugin     string       `json:"plugin"`
	Step       int          `json:"step"`
	Attempts   int          `json:"attempts"`
	DurationMS int64        `json:"duration_ms"`
	Bytes      int64        `json:"bytes"`
	Responses  int          `json:"responses"`
	Host       string       `json:"host"`
	PID        int          `json:"pid"`
	OpID       string       `json:"op_id"`
	// Page is the crawl page's URL of a page hook's event (the entity is
	// its crawl).
	Page string `json:"page,omitempty"`
}

// FlapjackState maps a hook status to Flapjack's state vocabulary (the
// events and the job × hook checks of internal/fleethealth).
func FlapjackState(s model.Status) string {
	switch s {
	case model.StatusSucceeded, model.StatusSkipped:
		return "ok"
	case model.StatusNoResults:
		return "warning"
	default:
		return "critical"
	}
}

const maxSummary = 1024

func (s *Store) event(ident, opID string, r model.ArchiveResult, responses int) Event {
	summary := string(r.Status)
	if r.Error != "" {
		summary += ": " + r.Error
	} else if r.OutputStr != "" {
		summary += ": " + r.OutputStr
	}
	summary = truncateUTF8(summary, maxSummary)
	end := r.EndedAt
	if end.IsZero() {
		end = s.now()
	}
	var dur int64
	if !r.StartedAt.IsZero() && !r.EndedAt.IsZero() {
		dur = r.EndedAt.Sub(r.StartedAt).Milliseconds()
	}
	return Event{
		Entity: ident, Check: r.Hook, Type: "service", State: FlapjackState(r.Status),
		Summary: summary, Time: end.Unix(),
		Status: r.Status, Plugin: r.Plugin, Step: r.Step, Attempts: r.Attempts, DurationMS: dur,
		Bytes: r.OutputBytes, Responses: responses, Host: s.opts.Host, PID: s.opts.PID, OpID: opID,
	}
}

// RecordResult counts one final ArchiveResult in one round trip (one Lua
// script): hooks_STATUS, bytes_downloaded (the bytes its Responses
// fetched, not its output files' sizes), items_queued and items_downloaded
// (both by its 2xx/3xx Responses, model.ResponseCounts.Downloaded: what a
// single-page job fetched is downloaded as soon as it is counted, so
// ArchiveBot's queued figure, their difference, stays 0), r1xx..r5xx/runk/
// error_count when the Store owns response counters, the snapshot title
// the hook set (job hash title), its Tag records (IDENT_tags), its count
// of unknown records (unknown_records), a Flapjack event in
// events_archive:HOUR (expiry refreshed) and event_counters /
// event_counters:HOST:PID (which expires after EventsTTL, like
// executive_instance:HOST:PID). opID is the idempotency key (e.g. the activity's
// workflow-unique hook id): a repeat with the same opID changes nothing.
// It reports whether this call applied the result.
func (s *Store) RecordResult(ctx context.Context, ident, opID string, r model.ArchiveResult, responses []model.Response) (bool, error) {
	if opID == "" {
		return false, fmt.Errorf("record result of job %s hook %s: %w: op id must not be empty (repeat-safety key)", ident, r.Hook, ErrInvalid)
	}
	if _, err := model.ParseStatus(string(r.Status)); err != nil {
		return false, fmt.Errorf("record result of job %s hook %s: %w: %w", ident, r.Hook, ErrInvalid, err)
	}
	if r.OutputBytes < 0 {
		return false, fmt.Errorf("record result of job %s hook %s: %w: output bytes %d: must be >= 0", ident, r.Hook, ErrInvalid, r.OutputBytes)
	}
	// The responses themselves (the hook's activity holds them) or, when
	// the workflow records the result, the summary the result carries.
	c := model.CountResponses(responses)
	if len(responses) == 0 && r.Responses != nil {
		c = *r.Responses
	}
	if c.Bytes < 0 {
		return false, fmt.Errorf("record result of job %s hook %s: %w: response bytes %d: must be >= 0", ident, r.Hook, ErrInvalid, c.Bytes)
	}
	ev := s.event(ident, opID, r, int(c.Count))
	evJSON, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("record result of job %s hook %s: encode event: %w", ident, r.Hook, err)
	}
	own := "0"
	if *s.opts.OwnResponseCounters {
		own = "1"
	}
	end := r.EndedAt
	if end.IsZero() {
		end = s.now()
	}
	keys := map[string]string{"job": s.keys.Job(ident), "ops": s.keys.Ops(ident), "events": s.keys.EventsArchive(end),
		"counters": s.keys.EventCounters(), "instance_counters": s.keys.InstanceEventCounters(s.opts.Host, s.opts.PID),
		"tags": s.keys.Tags(ident)}
	args := []any{"result:" + opID, string(r.Status), c.Bytes, c.Downloaded(), own,
		c.R1xx, c.R2xx, c.R3xx, c.R4xx, c.R5xx, c.Runk, c.Errors,
		string(evJSON), seconds(s.opts.EventsTTL), unixInt(s.now()), r.Title, r.Unknown}
	for _, t := range r.Tags {
		args = append(args, t)
	}
	code, err := s.run(ctx, recordResultScript, keys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("record result of job %s hook %s: %w", ident, r.Hook, err)
	}
	if err := codeErr(code, "record result of job %s hook %s", ident, r.Hook); err != nil {
		return false, err
	}
	return code == codeApplied, nil
}

// recordResultScript counts one final ArchiveResult exactly once.
// ARGV: op_key status bytes_fetched downloaded own(0|1) r1xx r2xx r3xx r4xx r5xx
// runk errors event_json events_ttl ts title unknown tags...
var recordResultScript = newScript([]string{"job", "ops", "events", "counters", "instance_counters", "tags"}, false, luaCountEvents+`
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
if redis.call('SADD', ops, ARGV[1]) == 0 then return CODE_NOOP end
inherit_ttl(job, ops)
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
if ARGV[16] ~= '' then redis.call('HSET', job, '`+FieldTitle+`', ARGV[16]) end
if ARGV[17] ~= '0' then redis.call('HINCRBY', job, '`+FieldUnknownRecords+`', ARGV[17]) end
if #ARGV > 17 then
  redis.call('SADD', tags, unpack(ARGV, 18))
  inherit_ttl(job, tags)
end
redis.call('RPUSH', events, ARGV[13])
redis.call('EXPIRE', events, ARGV[14])
count_events(counters, instance_counters, ARGV[14], 1, {status, 1})
return CODE_APPLIED
`)

// luaCountEvents defines count_events(counters, instance_counters, ttl,
// all, by_status), the one way final hook results are counted in
// event_counters and event_counters:HOST:PID (a snapshot hook's alone,
// RecordResult; a page sink flush's together, RecordPageEvents): one
// HINCRBY per field however many results, all = how many, by_status =
// {status, n, ...}. event_counters:HOST:PID expires after ttl seconds, like
// executive_instance:HOST:PID.
const luaCountEvents = `
local function count_events(counters, instance_counters, ttl, all, by_status)
  for _, k in ipairs({counters, instance_counters}) do
    redis.call('HINCRBY', k, 'all', all)
    for i = 1, #by_status, 2 do redis.call('HINCRBY', k, by_status[i], by_status[i + 1]) end
  end
  redis.call('EXPIRE', instance_counters, ttl)
end
`

// errMalformed marks a Redis value that does not have the documented encoding.
var errMalformed = errors.New("malformed redis value")

// PageEvents are the final hook results of one crawl page attempt
// (RecordPageEvents).
type PageEvents struct {
	// OpID names the attempt in each event's op_id (OpID/HOOK).
	OpID string
	// URL is the page's, each event's page.
	URL     string
	Results []model.ArchiveResult
}

// RecordPageEvents records the hook results of crawl page attempts (a
// page sink flush's, or one page's) in one round trip: it pulses the job's
// heartbeat once for each page (as Heartbeat does: a recorded page is a
// sign of life), counts every result in event_counters /
// event_counters:HOST:PID as RecordResult does a snapshot hook's (the
// same count_events, one HINCRBY per field for all of them), and appends
// each result's Flapjack event to events_archive:HOUR when it is not ok
// (warning or critical; every one with Options.AllPageEvents), in page
// and hook order. It is not repeat-safe by itself: its caller calls it
// once for the page attempts whose outcomes the frontier applied
// (jobstore CrawlStore.Complete, RecordPages). A missing job hash is not
// recreated. A result of an unknown status is left out, and its page
// named in the error; the others are recorded.
func (s *Store) RecordPageEvents(ctx context.Context, ident string, pages []PageEvents) error {
	op, err := s.RecordPageEventsOp(ctx, ident, pages)
	if op != nil {
		if werr := op(s.rdb).Err(); werr != nil {
			return errors.Join(err, fmt.Errorf("record page events of job %s: %w", ident, werr))
		}
	}
	return err
}

// RecordPageEventsOp is RecordPageEvents as an op of a pipeline
// (luascript.Pipeline); its command's error is the write's. The op is
// nil when there is nothing to write (no pages, or none valid); err names
// the results left out.
func (s *Store) RecordPageEventsOp(ctx context.Context, ident string, pages []PageEvents) (luascript.Op, error) {
	now := s.now()
	var errs []error
	var events []any
	var statuses []string
	byStatus := map[string]int64{}
	n, all := 0, int64(0)
	for _, p := range pages {
		valid := false
		for _, r := range p.Results {
			if _, err := model.ParseStatus(string(r.Status)); err != nil {
				errs = append(errs, fmt.Errorf("record page events of job %s page %s hook %s: %w: %w", ident, p.URL, r.Hook, ErrInvalid, err))
				continue
			}
			valid = true
			all++
			st := string(r.Status)
			if _, ok := byStatus[st]; !ok {
				statuses = append(statuses, st)
			}
			byStatus[st]++
			ev := s.event(ident, p.OpID+"/"+r.Hook, r, 0)
			ev.Page = p.URL
			if ev.State == "ok" && !s.opts.AllPageEvents {
				continue
			}
			b, err := json.Marshal(ev)
			if err != nil {
				errs = append(errs, fmt.Errorf("record page events of job %s hook %s: encode event: %w", ident, r.Hook, err))
				continue
			}
			events = append(events, string(b))
		}
		if valid || len(p.Results) == 0 {
			n++
		}
	}
	if n == 0 {
		return nil, errors.Join(errs...)
	}
	args := []any{seconds(s.opts.EventsTTL), unixInt(now), n, all, len(statuses)}
	for _, st := range statuses {
		args = append(args, st, byStatus[st])
	}
	args = append(args, events...)
	keys := map[string]string{"job": s.keys.Job(ident), "events": s.keys.EventsArchive(now),
		"counters": s.keys.EventCounters(), "instance_counters": s.keys.InstanceEventCounters(s.opts.Host, s.opts.PID)}
	return func(c redis.Cmdable) redis.Cmder { return s.runOn(ctx, c, recordPageEventsScript, keys, nil, args...) }, errors.Join(errs...)
}

// recordPageEventsScript pulses the job's heartbeat once per page, counts
// the pages' hook results and appends their events.
// ARGV: events_ttl ts pages results m, then m status count pairs, then the
// events to append.
var recordPageEventsScript = newScript([]string{"job", "events", "counters", "instance_counters"}, false, luaCountEvents+`
if redis.call('EXISTS', job) == 1 then
  redis.call('HSET', job, 'heartbeat_at', ARGV[2], 'ts', ARGV[2])
  redis.call('HINCRBY', job, 'heartbeat', ARGV[3])
end
local m = tonumber(ARGV[5])
local first = 6 + 2 * m
for i = first, #ARGV, 1000 do
  redis.call('RPUSH', events, unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
if #ARGV >= first then redis.call('EXPIRE', events, ARGV[1]) end
if m > 0 then
  local by_status = {}
  for i = 6, first - 1 do by_status[#by_status + 1] = ARGV[i] end
  count_events(counters, instance_counters, ARGV[1], tonumber(ARGV[4]), by_status)
end
return 0
`)
