package rkeys

import (
	"context"
	"fmt"
	"strconv"

	"github.com/archiveflow/archiveflow/internal/model"
)

// setFields writes absolute fields on an existing job.
func (s *Store) setFields(ctx context.Context, what, ident string, pairs ...string) error {
	args := make([]any, 0, len(pairs)+2)
	for _, p := range pairs {
		args = append(args, p)
	}
	args = append(args, "ts", unixInt(s.now()))
	code, err := s.run(ctx, setFieldsScript, map[string]string{"job": s.keys.Job(ident)}, args...).Int()
	if err != nil {
		return fmt.Errorf("%s of job %s: %w", what, ident, err)
	}
	return codeErr(code, "%s of job %s", what, ident)
}

// setFieldsScript sets absolute hash fields on an existing job.
// ARGV: name value pairs.
var setFieldsScript = newScript([]string{"job"}, false, `
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
redis.call('HSET', job, unpack(ARGV))
return CODE_APPLIED
`)

// SetStep records the workflow's current step (0–9).
func (s *Store) SetStep(ctx context.Context, ident string, step int) error {
	if step < 0 || step > 9 {
		return fmt.Errorf("set step of job %s: %w: step %d: must be 0..9", ident, ErrInvalid, step)
	}
	return s.setFields(ctx, "set step", ident, "current_step", strconv.Itoa(step))
}

// SetHooksTotal records how many hooks the job runs (known after discovery).
func (s *Store) SetHooksTotal(ctx context.Context, ident string, n int) error {
	if n < 0 {
		return fmt.Errorf("set hooks_total of job %s: %w: %d: must be >= 0", ident, ErrInvalid, n)
	}
	return s.setFields(ctx, "set hooks_total", ident, "hooks_total", strconv.Itoa(n))
}

// Archive is where a job's WACZ is: written at its seal by a worker host.
type Archive struct {
	// WACZ is the file's absolute path on Host; Error why none was
	// written (then WACZ is empty).
	WACZ, Host, Error string
	Bytes             int64
	// Missing counts WARC files of the job that other worker hosts wrote
	// and Host could not see (storage not shared): not in the WACZ.
	Missing int
}

// Job hash fields of Archive.
const (
	FieldWACZ        = "wacz"
	FieldWACZHost    = "wacz_host"
	FieldWACZBytes   = "wacz_bytes"
	FieldWACZError   = "wacz_error"
	FieldWACZMissing = "wacz_missing_warcs"
)

// SetArchive records where the job's WACZ is (absolute values: a later
// seal, e.g. a retry run's, replaces an earlier one's).
func (s *Store) SetArchive(ctx context.Context, ident string, a Archive) error {
	if (a.WACZ == "") == (a.Error == "") {
		return fmt.Errorf("set wacz of job %s: %w: exactly one of file and error must be set", ident, ErrInvalid)
	}
	return s.setFields(ctx, "set wacz", ident, FieldWACZ, a.WACZ, FieldWACZHost, a.Host, FieldWACZBytes, strconv.FormatInt(a.Bytes, 10),
		FieldWACZError, a.Error, FieldWACZMissing, strconv.Itoa(a.Missing))
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
		return fmt.Errorf("set run of job %s: %w: nothing to set", ident, ErrInvalid)
	}
	return s.setFields(ctx, "set run", ident, pairs...)
}

// FieldNice is a job's niceness (-20..19, lower runs first: mnbot's
// priority), archiveflow's own field: written by CreateJob and SetNice,
// read by `starter status`/`list` and by an ArchiveBot pipeline when it
// starts a bot job's workflow (absent = 0).
const FieldNice = "nice"

// SetNice records a job's new niceness. The job's workflow priority is
// changed by its caller (internal/jobctl SetPriority); a job not started
// yet (queued by ArchiveBot's bot) starts with it.
func (s *Store) SetNice(ctx context.Context, ident string, nice int) error {
	if err := model.ValidateNice(nice); err != nil {
		return fmt.Errorf("set nice of job %s: %w: %w", ident, ErrInvalid, err)
	}
	return s.setFields(ctx, "set nice", ident, FieldNice, strconv.Itoa(nice))
}

// RequestAbort sets ArchiveBot's abort_requested flag (what the bot's
// !abort writes); the workflow layer turns it into its abort signal.
func (s *Store) RequestAbort(ctx context.Context, ident string) error {
	return s.setFields(ctx, "request abort", ident, "abort_requested", "true")
}

// Heartbeat bumps ArchiveBot's heartbeat counter, heartbeat_at and ts (the
// last update from a pipeline: ArchiveBot's reaper and dashboard see the
// job alive). It is a liveness pulse, deliberately an increment: a
// repeated heartbeat is a harmless extra pulse, not a miscount.
func (s *Store) Heartbeat(ctx context.Context, ident string) error {
	code, err := s.run(ctx, heartbeatScript, map[string]string{"job": s.keys.Job(ident)}, unixInt(s.now())).Int()
	if err != nil {
		return fmt.Errorf("heartbeat of job %s: %w", ident, err)
	}
	return codeErr(code, "heartbeat of job %s", ident)
}

// heartbeatScript bumps ArchiveBot's heartbeat counter on an existing job.
// ARGV: ts.
var heartbeatScript = newScript([]string{"job"}, false, `
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
redis.call('HSET', job, 'heartbeat_at', ARGV[1], 'ts', ARGV[1])
return redis.call('HINCRBY', job, 'heartbeat', 1)
`)
