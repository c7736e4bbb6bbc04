package rkeys

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Typed errors callers can test with errors.Is.
var (
	// ErrJobExists: CreateJob found a running or retained job with the ident.
	ErrJobExists = errors.New("job already exists")
	// ErrJobNotFound: the job hash does not exist (never created or expired).
	ErrJobNotFound = errors.New("job not found")
	// ErrJobFinal: the job is finished, aborted or failed; it cannot move.
	ErrJobFinal = errors.New("job is in a final state")
	// ErrInvalid: a value breaks a rule of the layout (an empty ident, a
	// step out of range, settings model.Settings.Validate refuses); it is
	// never written, and writing it again cannot succeed.
	ErrInvalid = errors.New("invalid value")
)

// Store reads and writes archiveflow's Redis layout.
type Store struct {
	rdb  redis.UniversalClient
	keys Keys
	opts Options
	log  *zap.Logger
}

// NewStore returns a Store writing through rdb. logger may be nil.
func NewStore(rdb redis.UniversalClient, opts Options, logger *zap.Logger) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("redis store: client must not be nil")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	k, err := NewKeys(o.Namespace)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Store{rdb: rdb, keys: k, opts: o, log: logger.Named("rkeys")}, nil
}

// Keys exposes the key names (for docs, tools and tests).
func (s *Store) Keys() Keys { return s.keys }

// Options returns the effective options (defaults applied).
func (s *Store) Options() Options { return s.opts }

// Job is what CreateJob writes.
type Job struct {
	Ident string // from ident.FromURL
	URL   string // the normalised URL
	// FetchDepth is ArchiveBot's fetch_depth: "shallow" or "inf".
	FetchDepth string
	StartedBy  string // ArchiveBot's started_by (the submitting user)
	StartedIn  string // ArchiveBot's started_in (channel / "cli")
	Note       string // ArchiveBot's note (!explain)
	// Nice is the job's niceness (FieldNice; model.ValidateNice).
	Nice       int
	Settings   model.Settings
	HooksTotal int
	WorkflowID string
	RunID      string
	TaskQueue  string
	// NotBefore, when after now, lists the job in `scheduled`.
	NotBefore time.Time
	// CreateOp identifies this submission for repeat-safety: a CreateJob
	// repeated with the same CreateOp is a no-op (default: WorkflowID).
	CreateOp string
	// Replace allows replacing a retained finished/aborted/failed job with
	// the same ident (the CLI's explicit fresh-start flag). A running job is
	// never replaced.
	Replace bool
}

func (j Job) validate() error {
	switch {
	case j.Ident == "":
		return errors.New("job ident: must not be empty")
	case j.URL == "":
		return fmt.Errorf("job %s url: must not be empty", j.Ident)
	case j.HooksTotal < 0:
		return fmt.Errorf("job %s hooks_total %d: must be >= 0", j.Ident, j.HooksTotal)
	case j.CreateOp == "" && j.WorkflowID == "":
		return fmt.Errorf("job %s: create op or workflow id must be set (repeat-safety key)", j.Ident)
	}
	if err := model.ValidateFetchDepth(j.FetchDepth); err != nil {
		return fmt.Errorf("job %s %w", j.Ident, err)
	}
	if err := model.ValidateNice(j.Nice); err != nil {
		return fmt.Errorf("job %s %w", j.Ident, err)
	}
	if _, err := url.Parse(j.URL); err != nil {
		return fmt.Errorf("job %s url %q: %w", j.Ident, j.URL, err)
	}
	if err := j.Settings.Validate(); err != nil {
		return fmt.Errorf("job %s settings: %w", j.Ident, err)
	}
	return nil
}

func (s *Store) now() time.Time { return s.opts.Now() }

func unixInt(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// unixFloat renders t like Python's str(time.time()) (ArchiveBot's started_at).
func unixFloat(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMicro())/1e6, 'f', -1, 64)
}

// CreateJob writes a new job: the IDENT hash with ArchiveBot's fields and
// archiveflow's, IDENT_ignores, state:pending, time-index, the pending list
// and `scheduled` when delayed. It returns ErrJobExists (wrapped with the
// reason) when the ident is running, or retained and Replace is false.
func (s *Store) CreateJob(ctx context.Context, j Job) error {
	if err := j.validate(); err != nil {
		return fmt.Errorf("create job: %w: %w", ErrInvalid, err)
	}
	if j.CreateOp == "" {
		j.CreateOp = j.WorkflowID
	}
	now := s.now()
	u, _ := url.Parse(j.URL)
	notBefore := ""
	if j.NotBefore.After(now) {
		notBefore = unixInt(j.NotBefore)
	}
	fields := []string{
		"url", j.URL,
		"fetch_depth", j.FetchDepth,
		"slug", u.Hostname() + "-" + j.FetchDepth,
		"log_key", s.keys.Log(j.Ident),
		"ignore_patterns_set_key", s.keys.Ignores(j.Ident),
		"started_by", j.StartedBy,
		"started_in", j.StartedIn,
		"queued_at", unixInt(now),
		"concurrency", strconv.Itoa(j.Settings.Concurrency),
		"delay_min", strconv.Itoa(j.Settings.DelayMinMS),
		"delay_max", strconv.Itoa(j.Settings.DelayMaxMS),
		FieldNice, strconv.Itoa(j.Nice),
		"settings_age", "0",
		"log_score", "0",
		"heartbeat", "0",
		"last_analyzed_log_entry", "0",
		"last_broadcasted_log_entry", "0",
		"last_trimmed_log_entry", "0",
		"bytes_downloaded", "0",
		"items_downloaded", "0",
		"items_queued", "0",
		"error_count", "0",
		"r1xx", "0", "r2xx", "0", "r3xx", "0", "r4xx", "0", "r5xx", "0", "runk", "0",
		"ts", unixInt(now),
		"state", string(model.StatePending),
		"state_changed_at", unixInt(now),
		"current_step", "0",
		"hooks_total", strconv.Itoa(j.HooksTotal),
		"hooks_succeeded", "0", "hooks_failed", "0", "hooks_skipped", "0", "hooks_noresults", "0",
		"workflow_id", j.WorkflowID,
		"run_id", j.RunID,
		"task_queue", j.TaskQueue,
		"create_op", j.CreateOp,
	}
	if j.Settings.UserAgent != "" {
		fields = append(fields, "user_agent", j.Settings.UserAgent)
	}
	if j.Note != "" {
		fields = append(fields, "note", j.Note)
	}
	if j.Settings.SuppressIgnoreReports {
		fields = append(fields, "suppress_ignore_reports", suppressFlag(true))
	}
	if notBefore != "" {
		fields = append(fields, "not_before", notBefore)
	}
	lf := limitFields(j.Settings)
	for i := 0; i < len(lf); i += 2 {
		if lf[i+1] != "" {
			fields = append(fields, lf[i], lf[i+1])
		}
	}
	replace := "0"
	if j.Replace {
		replace = "1"
	}
	ignores := append(slices.Clone(j.Settings.Ignores), j.Settings.UnappliedIgnores...)
	args := []any{j.Ident, j.CreateOp, replace, unixInt(now), notBefore, len(ignores)}
	for _, p := range ignores {
		args = append(args, p)
	}
	for _, f := range fields {
		args = append(args, f)
	}
	keys := s.jobKeys(j.Ident)
	keys["pending"], keys["working"], keys["time_index"] = s.keys.Pending(), s.keys.Working(), s.keys.TimeIndex()
	keys["scheduled"], keys["purge"] = s.keys.Scheduled(), s.keys.ScheduledPurge()
	code, err := s.run(ctx, createJobScript, keys, args...).Int()
	if err != nil {
		return fmt.Errorf("create job %s: %w", j.Ident, err)
	}
	switch code {
	case codeRunning:
		return fmt.Errorf("create job %s for %s: %w: it is still running (abort it first)", j.Ident, j.URL, ErrJobExists)
	case codeRetained:
		return fmt.Errorf("create job %s for %s: %w: a finished job is retained (ttl %s); request a fresh job explicitly to replace it",
			j.Ident, j.URL, ErrJobExists, s.ttl(ctx, j.Ident))
	case codeNoop:
		s.log.Debug("create job repeated", logging.Ident(j.Ident), zap.String("create_op", j.CreateOp))
	default:
		s.log.Info("job created", logging.Ident(j.Ident), zap.String("url", j.URL))
	}
	return nil
}

// createJobScript registers a job, replacing a retained final one when
// asked. ARGV: ident create_op replace(0|1) queued_at not_before(empty = none)
// n_ignores ignores... fields...(name value pairs)
var createJobScript = newScript([]string{"job", "log", "ignores", "ops", "logbatches", "rules", "tags",
	"pending", "working", "time_index", "scheduled", "purge"}, withStates, `
local ident = ARGV[1]
if redis.call('EXISTS', job) == 1 then
  if redis.call('HGET', job, 'create_op') == ARGV[2] then return CODE_NOOP end
  local final = is_final(redis.call('HGET', job, 'state')) or redis.call('HEXISTS', job, 'finished_at') == 1
  if not final then return CODE_RUNNING end
  if ARGV[3] ~= '1' then return CODE_RETAINED end
end
for _, k in ipairs({job, log, ignores, ops, logbatches, rules, tags}) do redis.call('DEL', k) end
redis.call('LREM', pending, 0, ident)
redis.call('LREM', working, 0, ident)
redis.call('ZREM', scheduled, ident)
redis.call('ZREM', purge, ident)
local n = tonumber(ARGV[6])
local pos = 7
for i = 1, n do
  redis.call('SADD', ignores, ARGV[pos])
  pos = pos + 1
end
local fields = {}
for i = pos, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', job, unpack(fields))
move_to(ident, 'pending')
redis.call('ZADD', time_index, ARGV[4], ident)
if ARGV[5] ~= '' then redis.call('ZADD', scheduled, ARGV[5], ident) end
redis.call('LPUSH', pending, ident)
return CODE_APPLIED
`)

// JobTTL is the time the job hash has left (0 while it has no expiry);
// ErrJobNotFound when it is gone.
func (s *Store) JobTTL(ctx context.Context, ident string) (time.Duration, error) {
	d, err := s.rdb.PTTL(ctx, s.keys.Job(ident)).Result()
	switch {
	case err != nil:
		return 0, fmt.Errorf("ttl of job %s: %w", ident, err)
	case d == -2:
		return 0, fmt.Errorf("ttl of job %s: %w", ident, ErrJobNotFound)
	case d < 0:
		return 0, nil
	}
	return d, nil
}

func (s *Store) ttl(ctx context.Context, ident string) string {
	d, err := s.rdb.TTL(ctx, s.keys.Job(ident)).Result()
	if err != nil || d < 0 {
		return "unknown"
	}
	return d.String()
}

// DeleteJob removes every key of a job and its entries in every index and
// list, in one transaction. It is for withdrawing a job whose workflow never
// started (a failed submit); finished jobs expire by retention instead.
func (s *Store) DeleteJob(ctx context.Context, ident string) error {
	k := s.keys
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, k.JobKeys(ident)...)
		for _, st := range model.JobStates {
			p.SRem(ctx, k.State(st), ident)
		}
		p.ZRem(ctx, k.TimeIndex(), ident)
		p.ZRem(ctx, k.Scheduled(), ident)
		p.ZRem(ctx, k.ScheduledPurge(), ident)
		p.LRem(ctx, k.Pending(), 0, ident)
		p.LRem(ctx, k.Working(), 0, ident)
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete job %s: %w", ident, err)
	}
	return nil
}

// WorkingIdents returns the first max idents of the `working` list (the
// running jobs), oldest claim first.
func (s *Store) WorkingIdents(ctx context.Context, max int64) ([]string, error) {
	idents, err := s.rdb.LRange(ctx, s.keys.Working(), 0, max-1).Result()
	if err != nil {
		return nil, fmt.Errorf("list working jobs: %w", err)
	}
	return idents, nil
}
