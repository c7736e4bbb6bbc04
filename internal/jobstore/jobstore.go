// Package jobstore adapts internal/rkeys to the activities' Store and
// HostRegistry: it maps each activity input onto the rkeys operations that
// write it, and marks the rkeys errors no retry can fix (a job gone or
// final, a malformed or invalid value) with activities.ErrNotWritable, so
// the workflow's ordered writer never retries them forever.
package jobstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/luascript"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// RedisStore is the production activities.Store and activities.HostRegistry:
// it writes through internal/rkeys, which owns every key, encoding and
// idempotency script.
type RedisStore struct {
	Redis *rkeys.Store
	// PipelineID is this worker's pipeline:ID (hex), recorded in the job
	// hash of the jobs whose hooks it runs.
	PipelineID string
	// Health, when set, gets every final result (RecordResult), as an
	// outcome of Host (this worker's pipeline nickname).
	Health *fleethealth.Health
	Host   string
}

var (
	_ activities.Store        = (*RedisStore)(nil)
	_ activities.HostRegistry = (*RedisStore)(nil)
)

// notWritable marks the rkeys errors no retry can fix with
// activities.ErrNotWritable.
func notWritable(err error) error {
	if errors.Is(err, rkeys.ErrJobNotFound) || errors.Is(err, rkeys.ErrJobFinal) ||
		errors.Is(err, rkeys.ErrInvalid) || rkeys.IsMalformed(err) {
		return fmt.Errorf("%w: %w", activities.ErrNotWritable, err)
	}
	return err
}

// SetJobState records where the job runs and moves it to a non-final state.
func (s *RedisStore) SetJobState(ctx context.Context, in activities.JobStateInput) error {
	run := rkeys.RunInfo{WorkflowID: in.WorkflowID, RunID: in.RunID, TaskQueue: in.TaskQueue}
	if in.TaskQueue != "" {
		// The pipeline is the process that serves the claimed host queue,
		// where the job's hooks run: with several workers that is not
		// necessarily this one (a local activity of whichever process ran
		// the workflow task). Unknown (its record expired): this process.
		id, err := s.Redis.QueuePipeline(ctx, in.TaskQueue)
		if err != nil || id == "" {
			id = s.PipelineID
		}
		run.PipelineID = id
	}
	if run != (rkeys.RunInfo{}) {
		if err := s.Redis.SetRun(ctx, in.Ident, run); err != nil {
			return fmt.Errorf("record run of %s: %w", in.Ident, notWritable(err))
		}
	}
	if err := s.Redis.SetState(ctx, in.Ident, in.State); err != nil {
		return fmt.Errorf("set state of %s: %w", in.Ident, notWritable(err))
	}
	return nil
}

// SetStep records the current step and the plan's hook count.
func (s *RedisStore) SetStep(ctx context.Context, in activities.StepInput) error {
	if err := s.Redis.SetHooksTotal(ctx, in.Ident, in.HooksTotal); err != nil {
		return fmt.Errorf("set hooks_total of %s: %w", in.Ident, notWritable(err))
	}
	if err := s.Redis.SetStep(ctx, in.Ident, in.Step); err != nil {
		return fmt.Errorf("set current_step of %s: %w", in.Ident, notWritable(err))
	}
	return nil
}

// RecordResult counts one final result once per Key. A crawl page's hook
// (in.CrawlPage) is recorded without its responses and output bytes: the
// crawl counts those with ArchiveBot's meaning when it completes the page.
func (s *RedisStore) RecordResult(ctx context.Context, in activities.ResultInput) error {
	res, responses := in.Result, in.Responses
	if in.CrawlPage {
		res.Responses, res.OutputBytes, responses = nil, 0, nil
	}
	if _, err := s.Redis.RecordResult(ctx, in.Ident, in.Key, res, responses); err != nil {
		return fmt.Errorf("record result %s: %w", in.Key, notWritable(err))
	}
	return s.RecordHealth(ctx, in.Ident, in.Key, in.Result)
}

// RecordHealth feeds one final hook outcome to the fleet's health (when
// Health is set) as an outcome of the host that ran it (res.Host; this
// worker's when empty), exactly once per key
// (the outcome's idempotency key, unique per hook outcome in its workflow
// run). RecordResult calls it for every result it records; a crawl page's
// hooks go through CrawlStore's counted writes (healthOp: a flush's
// together). An
// outcome the health cannot hold (a name it refuses) is left out: health
// never fails a job.
func (s *RedisStore) RecordHealth(ctx context.Context, ident, key string, res model.ArchiveResult) error {
	return s.recordHealth(ctx, ident, fleethealth.Outcome{OpID: key, Result: res})
}

// recordHealth records o for job ident on this worker's host (or the
// host its result names).
func (s *RedisStore) recordHealth(ctx context.Context, ident string, o fleethealth.Outcome) error {
	if s.Health == nil {
		return nil
	}
	_, err := s.Health.Record(ctx, s.healthOutcome(ident, o))
	if errors.Is(err, fleethealth.ErrInvalid) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record health of job %s hook %s: %w", ident, o.Result.Hook, notWritable(err))
	}
	return nil
}

// healthOutcome is o of job ident as the fleet's health records it: on
// the host that ran it (its result's, else this worker's).
func (s *RedisStore) healthOutcome(ident string, o fleethealth.Outcome) fleethealth.Outcome {
	res := o.Result
	o.Host = res.Host // the host that ran it, wherever it is recorded
	if o.Host == "" {
		o.Host = s.Host
	}
	o.Ident = ident
	o.NotStarted = strings.Contains(res.Error, activities.ErrTypeConfig) // the workflow's words for a hook that could not start
	return o
}

// healthOp is recordHealth of several outcomes as one op of a pipeline
// (luascript.Pipeline: fleethealth RecordBatchOp), with its result; nil
// when there is nothing to write (no fleet health, or no outcome it can
// hold: one it cannot is left out, health never fails a job).
func (s *RedisStore) healthOp(ctx context.Context, ident string, os []fleethealth.Outcome) (luascript.Op, func(redis.Cmder) error) {
	if s.Health == nil {
		return nil, nil
	}
	var valid []fleethealth.Outcome
	for _, o := range os {
		o = s.healthOutcome(ident, o)
		if _, _, err := s.Health.RecordOp(ctx, o); err == nil { // fleethealth.ErrInvalid: its only error before a write
			valid = append(valid, o)
		}
	}
	if len(valid) == 0 {
		return nil, nil
	}
	op, res, err := s.Health.RecordBatchOp(ctx, valid)
	if err != nil {
		return nil, nil
	}
	return op, func(c redis.Cmder) error { _, err := res(c); return err }
}

// FinishJob logs why a job did not finish cleanly, then finishes it once.
func (s *RedisStore) FinishJob(ctx context.Context, in activities.FinishInput) error {
	if in.Limit != "" && in.State != model.StateFinished {
		return fmt.Errorf("finish %s as %s at a limit: %w: a limit finishes a job as finished", in.Ident, in.State, activities.ErrNotWritable)
	}
	note := in.Error
	if note == "" {
		note = in.Limit // a crawl finished at a limit says so in its log
	}
	if note != "" {
		msg := fmt.Sprintf("archiveflow: job %s: %s", in.State, note)
		if _, err := s.Redis.AppendLog(ctx, in.Ident, in.Key+"/log", []rkeys.Packet{rkeys.Stdout(time.Now(), msg)}); err != nil {
			return fmt.Errorf("log final state of %s: %w", in.Ident, notWritable(err))
		}
	}
	finish := func() error { return s.Redis.Finish(ctx, in.Ident, in.State) }
	if in.Limit != "" {
		finish = func() error { return s.Redis.FinishLimited(ctx, in.Ident, in.Limit) }
	}
	if err := finish(); err != nil {
		return fmt.Errorf("finish %s: %w", in.Ident, notWritable(err))
	}
	return nil
}

// ReopenJob takes a finished job back for a retry run, once per Key. A job
// not finished (running again, or aborted) cannot be reopened.
func (s *RedisStore) ReopenJob(ctx context.Context, in activities.ReopenInput) error {
	err := s.Redis.ReopenJob(ctx, in.Ident, rkeys.Reopen{Op: in.Key, Hooks: in.Hooks})
	if errors.Is(err, rkeys.ErrJobExists) {
		return fmt.Errorf("reopen %s: %w: %w", in.Ident, activities.ErrNotWritable, err)
	}
	if err != nil {
		return fmt.Errorf("reopen %s: %w", in.Ident, notWritable(err))
	}
	return nil
}

// SetRetryAt indexes or unindexes the job's later retry (retry_at).
func (s *RedisStore) SetRetryAt(ctx context.Context, in activities.RetryAtInput) error {
	if err := s.Redis.SetRetryAt(ctx, in.Ident, in.At); err != nil {
		return fmt.Errorf("set retry_at of %s: %w", in.Ident, notWritable(err))
	}
	return nil
}

// ApplySettings writes the settings as absolute values; rkeys bumps
// settings_age and publishes only when something changed, so a repeat is
// a no-op.
func (s *RedisStore) ApplySettings(ctx context.Context, in activities.SettingsInput) error {
	if _, err := s.Redis.SetSettings(ctx, in.Ident, in.Settings); err != nil {
		return fmt.Errorf("set settings of %s: %w", in.Ident, notWritable(err))
	}
	return nil
}

// AppendLog writes stderr lines as stdout packets (ArchiveBot's name for
// the pipeline's own output) prefixed with the plugin, and responses as
// download packets, in one batch.
func (s *RedisStore) AppendLog(ctx context.Context, ident, key string, seq int, entries []activities.LogEntry) error {
	packets := packets(entries)
	if _, err := s.Redis.AppendLog(ctx, ident, key+"#"+strconv.Itoa(seq), packets); err != nil {
		return fmt.Errorf("append %d log entries of %s: %w", len(packets), ident, notWritable(err))
	}
	return nil
}

// packets are log entries as ArchiveBot's packets.
func packets(entries []activities.LogEntry) []rkeys.Packet {
	packets := make([]rkeys.Packet, 0, len(entries))
	for _, e := range entries {
		switch {
		case e.Kind == activities.LogDownload && e.Response != nil:
			packets = append(packets, rkeys.Download(e.Time, *e.Response))
		case e.Kind == activities.LogIgnore:
			packets = append(packets, rkeys.Packet{Type: rkeys.PacketIgnore, TS: e.Time, URL: e.URL, Pattern: e.Pattern, Source: e.Source})
		default:
			packets = append(packets, rkeys.Stdout(e.Time, "["+e.Hook+"] "+e.Message))
		}
	}
	return packets
}

// Heartbeat pulses the job's heartbeat field.
func (s *RedisStore) Heartbeat(ctx context.Context, ident string) error {
	if err := s.Redis.Heartbeat(ctx, ident); err != nil {
		return fmt.Errorf("heartbeat of %s: %w", ident, notWritable(err))
	}
	return nil
}

// SetArchive records where the job's WACZ is.
func (s *RedisStore) SetArchive(ctx context.Context, in activities.ArchiveInput) error {
	a := rkeys.Archive{WACZ: in.WACZ, Host: in.Host, Bytes: in.Bytes, Error: in.Error, Missing: in.Missing}
	if err := s.Redis.SetArchive(ctx, in.Ident, a); err != nil {
		return fmt.Errorf("set wacz of %s: %w", in.Ident, notWritable(err))
	}
	return nil
}

// QueueLease reads the live pipeline:ID records (internal/rkeys).
func (s *RedisStore) QueueLease(ctx context.Context, queue string) (time.Duration, error) {
	lease, err := s.Redis.QueueLease(ctx, queue)
	if err != nil {
		return 0, fmt.Errorf("check host queue %s: %w", queue, err)
	}
	return lease, nil
}
