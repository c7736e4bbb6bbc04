package rkeys

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

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
	case j.FetchDepth != "shallow" && j.FetchDepth != "inf":
		return fmt.Errorf("job %s fetch_depth %q: must be shallow or inf", j.Ident, j.FetchDepth)
	case j.HooksTotal < 0:
		return fmt.Errorf("job %s hooks_total %d: must be >= 0", j.Ident, j.HooksTotal)
	case j.CreateOp == "" && j.WorkflowID == "":
		return fmt.Errorf("job %s: create op or workflow id must be set (repeat-safety key)", j.Ident)
	}
	if _, err := url.Parse(j.URL); err != nil {
		return fmt.Errorf("job %s url %q: %w", j.Ident, j.URL, err)
	}
	return validateSettings(j.Ident, j.Settings)
}

func validateSettings(ident string, st model.Settings) error {
	if err := st.Validate(); err != nil {
		return fmt.Errorf("job %s settings: %w", ident, err)
	}
	for _, p := range st.Ignores {
		if err := validateIgnore(ident, p); err != nil {
			return err
		}
	}
	return nil
}

func validateIgnore(ident, pattern string) error {
	if pattern == "" {
		return fmt.Errorf("job %s ignore pattern: must not be empty", ident)
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return fmt.Errorf("job %s ignore pattern %q: must be a valid RE2 regular expression: %w", ident, pattern, err)
	}
	return nil
}

func (s *Store) now() time.Time { return s.opts.Now() }

func unixInt(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// unixFloat renders t like Python's str(time.time()) (ArchiveBot's started_at).
func unixFloat(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMicro())/1e6, 'f', -1, 64)
}

func (s *Store) stateKeys() []string {
	out := make([]string, 0, len(model.JobStates))
	for _, st := range model.JobStates {
		out = append(out, s.keys.State(st))
	}
	return out
}

// CreateJob writes a new job: the IDENT hash with ArchiveBot's fields and
// archiveflow's, IDENT_ignores, state:pending, time-index, the pending list
// and `scheduled` when delayed. It returns ErrJobExists (wrapped with the
// reason) when the ident is running, or retained and Replace is false.
func (s *Store) CreateJob(ctx context.Context, j Job) error {
	if err := j.validate(); err != nil {
		return err
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
	if notBefore != "" {
		fields = append(fields, "not_before", notBefore)
	}
	replace := "0"
	if j.Replace {
		replace = "1"
	}
	args := []any{j.Ident, j.CreateOp, replace, unixInt(now), notBefore, len(j.Settings.Ignores)}
	for _, p := range j.Settings.Ignores {
		args = append(args, p)
	}
	for _, f := range fields {
		args = append(args, f)
	}
	keys := append([]string{
		s.keys.Job(j.Ident), s.keys.Log(j.Ident), s.keys.Ignores(j.Ident), s.keys.Ops(j.Ident), s.keys.LogBatches(j.Ident),
		s.keys.Pending(), s.keys.Working(), s.keys.TimeIndex(), s.keys.Scheduled(), s.keys.ScheduledPurge(),
	}, s.stateKeys()...)
	code, err := createJobScript.Run(ctx, s.rdb, keys, args...).Int()
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
		s.log.Debug("create job repeated", zap.String("ident", j.Ident), zap.String("create_op", j.CreateOp))
	default:
		s.log.Info("job created", zap.String("ident", j.Ident), zap.String("url", j.URL))
	}
	return nil
}

func (s *Store) ttl(ctx context.Context, ident string) string {
	d, err := s.rdb.TTL(ctx, s.keys.Job(ident)).Result()
	if err != nil || d < 0 {
		return "unknown"
	}
	return d.String()
}

// SetState moves a job between the non-final states (pending, active,
// draining): the hash's state, the state:STATE sets, the pending/working
// lists and time-index change in one script. Moving to active records
// started_at (once) and removes the job from `scheduled`. Final states are
// reached only through Finish.
func (s *Store) SetState(ctx context.Context, ident string, state model.JobState) error {
	if _, err := model.ParseJobState(string(state)); err != nil {
		return fmt.Errorf("set state of job %s: %w", ident, err)
	}
	if state.Final() {
		return fmt.Errorf("set state of job %s to %s: final states are written by Finish", ident, state)
	}
	now := s.now()
	keys := append([]string{s.keys.Job(ident), s.keys.Pending(), s.keys.Working(), s.keys.Scheduled(), s.keys.TimeIndex()}, s.stateKeys()...)
	code, err := setStateScript.Run(ctx, s.rdb, keys, ident, string(state), unixInt(now), unixFloat(now)).Int()
	if err != nil {
		return fmt.Errorf("set state of job %s to %s: %w", ident, state, err)
	}
	return codeErr(code, "set state of job %s to %s", ident, state)
}

// codeErr maps a script's negative return code to a typed error.
func codeErr(code int, format string, args ...any) error {
	switch code {
	case codeNotFound:
		return fmt.Errorf(format+": %w", append(args, ErrJobNotFound)...)
	case codeFinal:
		return fmt.Errorf(format+": %w", append(args, ErrJobFinal)...)
	}
	return nil
}

// setFields writes absolute fields on an existing job.
func (s *Store) setFields(ctx context.Context, what, ident string, pairs ...string) error {
	args := make([]any, 0, len(pairs)+2)
	for _, p := range pairs {
		args = append(args, p)
	}
	args = append(args, "ts", unixInt(s.now()))
	code, err := setFieldsScript.Run(ctx, s.rdb, []string{s.keys.Job(ident)}, args...).Int()
	if err != nil {
		return fmt.Errorf("%s of job %s: %w", what, ident, err)
	}
	return codeErr(code, "%s of job %s", what, ident)
}

// SetStep records the workflow's current step (0–9).
func (s *Store) SetStep(ctx context.Context, ident string, step int) error {
	if step < 0 || step > 9 {
		return fmt.Errorf("set step of job %s: step %d: must be 0..9", ident, step)
	}
	return s.setFields(ctx, "set step", ident, "current_step", strconv.Itoa(step))
}

// SetHooksTotal records how many hooks the job runs (known after discovery).
func (s *Store) SetHooksTotal(ctx context.Context, ident string, n int) error {
	if n < 0 {
		return fmt.Errorf("set hooks_total of job %s: %d: must be >= 0", ident, n)
	}
	return s.setFields(ctx, "set hooks_total", ident, "hooks_total", strconv.Itoa(n))
}

// RunInfo identifies where a job runs.
type RunInfo struct {
	WorkflowID, RunID, TaskQueue string
	PipelineID                   string // hex id of the worker's pipeline:ID record
}

// SetRun records the workflow run, task queue and pipeline running the job
// (absolute values; empty fields are left unchanged).
func (s *Store) SetRun(ctx context.Context, ident string, r RunInfo) error {
	var pairs []string
	add := func(name, v string) {
		if v != "" {
			pairs = append(pairs, name, v)
		}
	}
	add("workflow_id", r.WorkflowID)
	add("run_id", r.RunID)
	add("task_queue", r.TaskQueue)
	if r.PipelineID != "" {
		add("pipeline_id", PipelineMember(r.PipelineID))
	}
	if len(pairs) == 0 {
		return fmt.Errorf("set run of job %s: nothing to set", ident)
	}
	return s.setFields(ctx, "set run", ident, pairs...)
}

// RequestAbort sets ArchiveBot's abort_requested flag (what the bot's
// !abort writes); the workflow layer turns it into its abort signal.
func (s *Store) RequestAbort(ctx context.Context, ident string) error {
	return s.setFields(ctx, "request abort", ident, "abort_requested", "true")
}

// Heartbeat bumps ArchiveBot's heartbeat counter and heartbeat_at. It is a
// liveness pulse, deliberately an increment: a repeated heartbeat is a
// harmless extra pulse, not a miscount.
func (s *Store) Heartbeat(ctx context.Context, ident string) error {
	code, err := heartbeatScript.Run(ctx, s.rdb, []string{s.keys.Job(ident)}, unixInt(s.now())).Int()
	if err != nil {
		return fmt.Errorf("heartbeat of job %s: %w", ident, err)
	}
	return codeErr(code, "heartbeat of job %s", ident)
}

// Finish moves a job to its final state (finished, aborted or failed)
// exactly once: finished_at, ArchiveBot's aborted/failed flags, the
// jobs_completed/jobs_aborted/jobs_failed counter, finish_notifications,
// state sets, removal from pending/working/scheduled, a scheduled-purge
// entry and the retention EXPIRE of every key of the job. A repeated Finish
// of a job already final is a no-op; of an expired job, ErrJobNotFound.
func (s *Store) Finish(ctx context.Context, ident string, state model.JobState) error {
	if !state.Final() {
		return fmt.Errorf("finish job %s: state %q: must be finished, aborted or failed", ident, state)
	}
	ret := s.retention(state)
	now := s.now()
	keys := []string{
		s.keys.Job(ident), s.keys.Log(ident), s.keys.Ignores(ident), s.keys.Ops(ident), s.keys.LogBatches(ident),
		s.keys.Pending(), s.keys.Working(), s.keys.JobsCounter(state), s.keys.FinishNotifications(),
		s.keys.Scheduled(), s.keys.ScheduledPurge(),
	}
	keys = append(keys, s.stateKeys()...)
	code, err := finishScript.Run(ctx, s.rdb, keys,
		ident, string(state), unixInt(now), seconds(ret), unixInt(now.Add(ret)), s.keys.LogChannel()).Int()
	if err != nil {
		return fmt.Errorf("finish job %s as %s: %w", ident, state, err)
	}
	if code == codeApplied {
		s.log.Info("job finished", zap.String("ident", ident), zap.String("state", string(state)), zap.Duration("retention", ret))
	}
	return codeErr(code, "finish job %s as %s", ident, state)
}

func (s *Store) retention(state model.JobState) time.Duration {
	switch state {
	case model.StateAborted:
		return s.opts.Retention.Aborted
	case model.StateFailed:
		return s.opts.Retention.Failed
	default:
		return s.opts.Retention.Completed
	}
}

// SetSettings writes the job's settings as absolute values (concurrency,
// delay_min, delay_max, user_agent and the whole IDENT_ignores set). When
// anything changed, settings_age is bumped and published on
// archivebot:job:IDENT; an identical repeat changes nothing. It returns the
// new settings_age, or 0 when nothing changed.
func (s *Store) SetSettings(ctx context.Context, ident string, st model.Settings) (int64, error) {
	if err := validateSettings(ident, st); err != nil {
		return 0, err
	}
	fields := []string{
		"concurrency", strconv.Itoa(st.Concurrency),
		"delay_min", strconv.Itoa(st.DelayMinMS),
		"delay_max", strconv.Itoa(st.DelayMaxMS),
		"user_agent", st.UserAgent,
	}
	args := []any{s.keys.JobChannel(ident), unixInt(s.now()), "1", len(fields) / 2}
	for _, f := range fields {
		args = append(args, f)
	}
	for _, p := range st.Ignores {
		args = append(args, p)
	}
	age, err := setSettingsScript.Run(ctx, s.rdb, []string{s.keys.Job(ident), s.keys.Ignores(ident)}, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("set settings of job %s: %w", ident, err)
	}
	if age < 0 {
		return 0, codeErr(int(age), "set settings of job %s", ident)
	}
	return age, nil
}

// AddIgnore adds one ignore pattern (RE2); settings_age moves only when the
// pattern was new. It returns the new settings_age or 0 when unchanged.
func (s *Store) AddIgnore(ctx context.Context, ident, pattern string) (int64, error) {
	if err := validateIgnore(ident, pattern); err != nil {
		return 0, err
	}
	return s.ignore(ctx, "add", ident, pattern)
}

// RemoveIgnore removes one ignore pattern; see AddIgnore.
func (s *Store) RemoveIgnore(ctx context.Context, ident, pattern string) (int64, error) {
	return s.ignore(ctx, "rm", ident, pattern)
}

func (s *Store) ignore(ctx context.Context, op, ident, pattern string) (int64, error) {
	age, err := ignoreScript.Run(ctx, s.rdb, []string{s.keys.Job(ident), s.keys.Ignores(ident)},
		op, pattern, s.keys.JobChannel(ident), unixInt(s.now())).Int64()
	if err != nil {
		return 0, fmt.Errorf("ignore %s %q on job %s: %w", op, pattern, ident, err)
	}
	if age < 0 {
		return 0, codeErr(int(age), "ignore %s %q on job %s", op, pattern, ident)
	}
	return age, nil
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
