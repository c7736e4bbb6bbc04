package rkeys

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/model"
)

// FieldCutCount is archiveflow's job hash field counting a crawl's losses
// to a limit: bodies cut short, links dropped over a cap or refused by the
// frontier (each also in the page's note and the job's log).
const FieldCutCount = "cut_count"

// FieldLimit is archiveflow's job hash field naming the limit a crawl
// finished at ("page limit 100 reached"; FinishLimited), absent otherwise.
const FieldLimit = "limit"

// Job hash fields the hooks' records set: the snapshot's title (the last
// Snapshot record without a url of a recorded result) and how many records
// of a type archiveflow does not know they printed (kept in each hook's
// stdout log).
const (
	FieldTitle          = "title"
	FieldUnknownRecords = "unknown_records"
)

// Job hash fields of a crawl's limits (model.Settings MaxPages, MaxBytes,
// MaxDuration in seconds), archiveflow's own; absent when 0.
const (
	FieldMaxPages    = "max_pages"
	FieldMaxBytes    = "max_bytes"
	FieldMaxDuration = "max_duration"
)

// JobView is the typed read of a job's hash and ignore set.
type JobView struct {
	Ident, URL, FetchDepth, Slug string
	StartedBy, StartedIn, Note   string
	PipelineID                   string
	// Nice is the job's niceness (FieldNice; 0 when absent, as in a job
	// ArchiveBot's bot queued).
	Nice                         int
	State                        model.JobState
	CurrentStep                  int
	HooksTotal                   int64
	HooksSucceeded, HooksFailed  int64
	HooksSkipped, HooksNoResults int64
	Settings                     model.Settings
	SettingsAge                  int64
	BytesDownloaded              int64
	ItemsDownloaded, ItemsQueued int64
	// Cuts (FieldCutCount) counts a crawl's losses to a limit.
	Cuts int64
	// Archive is the job's WACZ, once its seal wrote one (SetArchive).
	Archive Archive
	// Title (FieldTitle) is the snapshot's title a hook set; Tags
	// (IDENT_tags) the names its hooks' Tag records gave, sorted;
	// UnknownRecords (FieldUnknownRecords) counts their records of an
	// unknown type.
	Title          string
	Tags           []string
	UnknownRecords int64
	// Limit (FieldLimit) names the limit a crawl finished at.
	Limit string
	// RetryAt (FieldRetryAt) is when a running job that has nothing to do
	// but wait for a later retry is due (a snapshot whose hooks wait, a
	// crawl whose only remaining pages wait); zero otherwise.
	RetryAt                      time.Time
	Responses                    model.ResponseCounts
	LogScore, Heartbeat          int64
	QueuedAt                     time.Time
	StartedAt, FinishedAt        time.Time // zero when not yet
	Aborted, Failed              bool
	AbortRequested               bool
	WorkflowID, RunID, TaskQueue string
	// TTL is the time left before the job's keys expire (0 = no expiry).
	TTL time.Duration
	// Raw is the whole hash as stored.
	Raw map[string]string
}

// Final reports whether the job reached a final state.
func (v JobView) Final() bool { return v.State.Final() }

// HooksDone counts the hooks with a final result, whatever their status.
func (v JobView) HooksDone() int64 {
	return v.HooksSucceeded + v.HooksFailed + v.HooksSkipped + v.HooksNoResults
}

// GetJob reads one job in one round trip (HGETALL, SMEMBERS, PTTL).
// ErrJobNotFound when the hash does not exist; a malformed field is an
// error naming the job, the field and the value.
func (s *Store) GetJob(ctx context.Context, ident string) (JobView, error) {
	pipe := s.rdb.Pipeline()
	h := pipe.HGetAll(ctx, s.keys.Job(ident))
	ig := pipe.SMembers(ctx, s.keys.Ignores(ident))
	tg := pipe.SMembers(ctx, s.keys.Tags(ident))
	ttl := pipe.PTTL(ctx, s.keys.Job(ident))
	if _, err := pipe.Exec(ctx); err != nil {
		return JobView{}, fmt.Errorf("get job %s: %w", ident, err)
	}
	if len(h.Val()) == 0 {
		return JobView{}, fmt.Errorf("get job %s: %w", ident, ErrJobNotFound)
	}
	v, err := parseJob(ident, h.Val())
	if err != nil {
		return JobView{}, err
	}
	ignores := ig.Val()
	sort.Strings(ignores)
	v.Settings.Ignores = ignores
	if tags := tg.Val(); len(tags) > 0 {
		sort.Strings(tags)
		v.Tags = tags
	}
	if d := ttl.Val(); d > 0 {
		v.TTL = d
	}
	return v, nil
}

// fieldParser collects the first parse error while reading a hash.
type fieldParser struct {
	ident string
	h     map[string]string
	err   error
}

func (p *fieldParser) fail(field, rule string) {
	if p.err == nil {
		p.err = fmt.Errorf("job %s field %s = %q: %w: %s", p.ident, field, p.h[field], errMalformed, rule)
	}
}

func (p *fieldParser) int64(field string) int64 {
	v, ok := p.h[field]
	if !ok || v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		p.fail(field, "must be an integer")
	}
	return n
}

// time accepts integer or float unix seconds (ArchiveBot writes both).
func (p *fieldParser) time(field string) time.Time {
	v, ok := p.h[field]
	if !ok || v == "" {
		return time.Time{}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		p.fail(field, "must be unix seconds")
		return time.Time{}
	}
	return time.UnixMicro(int64(f * 1e6))
}

// flag follows ArchiveBot's Ruby truthiness: any present value is true.
func (p *fieldParser) flag(field string) bool {
	_, ok := p.h[field]
	return ok
}

func parseJob(ident string, h map[string]string) (JobView, error) {
	p := &fieldParser{ident: ident, h: h}
	v := JobView{
		Ident: ident, URL: h["url"], FetchDepth: h["fetch_depth"], Slug: h["slug"],
		StartedBy: h["started_by"], StartedIn: h["started_in"], Note: h["note"], PipelineID: h["pipeline_id"],
		WorkflowID: h["workflow_id"], RunID: h["run_id"], TaskQueue: h["task_queue"], Raw: h,
	}
	if v.URL == "" {
		p.fail("url", "must be present")
	}
	if st, ok := h["state"]; ok {
		js, err := model.ParseJobState(st)
		if err != nil {
			p.fail("state", "must be a job state")
		}
		v.State = js
	} else {
		// A job written by ArchiveBot itself: derive the state its way.
		switch {
		case p.flag("aborted"):
			v.State = model.StateAborted
		case p.flag("failed"):
			v.State = model.StateFailed
		case p.flag("finished_at"):
			v.State = model.StateFinished
		case p.flag("started_at"):
			v.State = model.StateActive
		default:
			v.State = model.StatePending
		}
	}
	v.CurrentStep = int(p.int64("current_step"))
	if v.CurrentStep < 0 || v.CurrentStep > 9 {
		p.fail("current_step", "must be 0..9")
	}
	v.HooksTotal = p.int64("hooks_total")
	v.HooksSucceeded = p.int64("hooks_succeeded")
	v.HooksFailed = p.int64("hooks_failed")
	v.HooksSkipped = p.int64("hooks_skipped")
	v.HooksNoResults = p.int64("hooks_noresults")
	v.Title = h[FieldTitle]
	v.UnknownRecords = p.int64(FieldUnknownRecords)
	v.Settings.Concurrency = int(p.int64("concurrency"))
	v.Settings.DelayMinMS = int(p.int64("delay_min"))
	v.Settings.DelayMaxMS = int(p.int64("delay_max"))
	v.Settings.UserAgent = h["user_agent"]
	v.Settings.SuppressIgnoreReports = p.flag("suppress_ignore_reports")
	v.Settings.MaxPages = p.int64(FieldMaxPages)
	v.Settings.MaxBytes = p.int64(FieldMaxBytes)
	v.Settings.MaxDuration = time.Duration(p.int64(FieldMaxDuration)) * time.Second
	v.Limit = h[FieldLimit]
	v.Nice = int(p.int64(FieldNice))
	v.SettingsAge = p.int64("settings_age")
	v.BytesDownloaded = p.int64("bytes_downloaded")
	v.ItemsDownloaded = p.int64("items_downloaded")
	v.ItemsQueued = p.int64("items_queued")
	v.Cuts = p.int64(FieldCutCount)
	v.Archive = Archive{WACZ: h[FieldWACZ], Host: h[FieldWACZHost], Error: h[FieldWACZError],
		Bytes: p.int64(FieldWACZBytes), Missing: int(p.int64(FieldWACZMissing))}
	v.Responses = model.ResponseCounts{
		R1xx: p.int64("r1xx"), R2xx: p.int64("r2xx"), R3xx: p.int64("r3xx"),
		R4xx: p.int64("r4xx"), R5xx: p.int64("r5xx"), Runk: p.int64("runk"), Errors: p.int64("error_count"),
	}.WithCount()
	v.LogScore = p.int64("log_score")
	v.Heartbeat = p.int64("heartbeat")
	v.QueuedAt = p.time("queued_at")
	v.StartedAt = p.time("started_at")
	v.FinishedAt = p.time("finished_at")
	v.RetryAt = p.time(FieldRetryAt)
	v.Aborted = p.flag("aborted")
	v.Failed = p.flag("failed")
	v.AbortRequested = p.flag("abort_requested")
	return v, p.err
}

// IsMalformed reports whether err comes from a Redis value that does not
// have the documented encoding.
func IsMalformed(err error) bool { return errors.Is(err, errMalformed) }

// ListJobs returns the idents in state:STATE ordered by queue time (then
// ident), read in one round trip.
func (s *Store) ListJobs(ctx context.Context, state model.JobState) ([]string, error) {
	if _, err := model.ParseJobState(string(state)); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	idents, err := s.rdb.SMembers(ctx, s.keys.State(state)).Result()
	if err != nil {
		return nil, fmt.Errorf("list %s jobs: %w", state, err)
	}
	if len(idents) == 0 {
		return idents, nil
	}
	scores := make(map[string]float64, len(idents))
	zs, err := s.rdb.ZMScore(ctx, s.keys.TimeIndex(), idents...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("list %s jobs: time-index: %w", state, err)
	}
	for i, id := range idents {
		if i < len(zs) {
			scores[id] = zs[i]
		}
	}
	sort.Slice(idents, func(a, b int) bool {
		sa, sb := scores[idents[a]], scores[idents[b]]
		if sa != sb {
			return sa < sb
		}
		return idents[a] < idents[b]
	})
	return idents, nil
}

// BytesDownloaded reads the job's bytes_downloaded (a crawl's byte
// limit); ErrJobNotFound when the job has no hash.
func (s *Store) BytesDownloaded(ctx context.Context, ident string) (int64, error) {
	v, err := s.rdb.HMGet(ctx, s.keys.Job(ident), "bytes_downloaded", "state").Result()
	if err != nil {
		return 0, fmt.Errorf("bytes downloaded of job %s: %w", ident, err)
	}
	if v[1] == nil {
		return 0, fmt.Errorf("bytes downloaded of job %s: %w", ident, ErrJobNotFound)
	}
	str, _ := v[0].(string)
	if str == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(str, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bytes downloaded of job %s: field bytes_downloaded=%q: %w", ident, str, err)
	}
	return n, nil
}
