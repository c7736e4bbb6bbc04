// Package activities owns archiveflow's Temporal activities, the entry
// points of every side effect of a snapshot, and their wire types. They come
// in two sets, one per task queue they run on:
//
//   - PoolActivities run on a pool's shared queue: claiming a worker host
//     and discovering the snapshot's hooks on it (ClaimAndDiscover; older
//     histories ClaimHost, then DiscoverHooks), telling a busy host from a
//     lost one (HostLiveness; older histories HostAlive), and the Redis
//     writes the workflow runs as local activities (SetJobState, SetStep,
//     RecordResult, FinishJob, ReopenJob, SetRetryAt, ApplySettings), so they are registered on the
//     worker that runs the workflows;
//   - HostActivities run on the queue of the host that claimed the snapshot:
//     discovering its hooks (DiscoverHooks, older histories), running one
//     hook attempt with heartbeats and a streamed job log (RunHook), a run
//     of consecutive foreground steps with the same per-hook path
//     (RunSteps, host steps), and the host side of the seal (SealSnapshot).
//
// Every dependency is an interface defined here (Discoverer, Runner, Sealer,
// Store, HostRegistry); the production adapters live with what they adapt
// (internal/engine runs hooks, internal/jobstore writes Redis), so this
// package links no process runner and no Redis client, and neither does the
// workflow code that names these activities. Activities never return hook
// stdout: results stay small because they are stored in workflow history.
package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/archiveflow/archiveflow/internal/model"
)

// ErrConfig marks a hook configuration error: wrap it (fmt.Errorf("...: %w",
// ErrConfig)) in a Discoverer or Runner error and the activity reports a
// non-retryable ErrTypeConfig error.
var ErrConfig = errors.New("configuration error")

// ErrNotWritable marks a Store error that retrying cannot fix: the job's
// hash is gone (expired, never created) or already final, or a value in it
// is malformed, or the value to write breaks a rule of the layout.
// Activities report it as a non-retryable ErrTypeNotWritable.
var ErrNotWritable = errors.New("job not writable")

// storeError wraps a Store error with context, non-retryable when retrying
// cannot help; nil when err is nil.
func storeError(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf(format+": %w", append(args, err)...)
	if errors.Is(err, ErrNotWritable) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNotWritable, nil)
	}
	return err
}

// Discoverer finds the hooks of a snapshot in the configured plugin dirs and
// resolves each plugin's enabled flag, timeout and config errors.
type Discoverer interface {
	Discover(ctx context.Context, in DiscoverInput) (Plan, error)
}

// RunRequest is one attempt of one hook as the runner needs it.
type RunRequest struct {
	Job      Job
	Hook     HookSpec
	Settings model.Settings
	// Attempt is the 1-based activity attempt.
	Attempt int
	// OnReady, if set, is called at the hook's first line of stdout.
	OnReady func() `json:"-"`
}

// Sink receives what a running hook produces while it runs. Its methods are
// called from the runner's goroutines and must be safe for concurrent use.
type Sink interface {
	// StderrLine is one line the hook wrote to stderr.
	StderrLine(line string)
	// Response is one Response record the hook printed.
	Response(r model.Response)
	// Record counts one JSONL record of any type.
	Record()
}

// Outcome is what one attempt ended with.
type Outcome struct {
	// Result is the attempt's record. Its Status is empty when the attempt
	// ended in a transient failure. Result.ExitCode of a process killed by a
	// signal is 128+signal (143 for SIGTERM, 137 for SIGKILL).
	Result model.ArchiveResult
	// Transient reports a failure worth retrying (non-zero exit without a
	// record, crash, timeout); Result.Error says why, or Error when the
	// attempt left no record.
	Transient bool
	Error     string
}

// Runner runs one attempt of one hook in its own process group and maps its
// exit and JSONL records to an Outcome (DESIGN.md §3; the mapping is the
// runner's alone, a background hook stopped by cancellation included). It
// must stop the process (SIGTERM, grace, SIGKILL to the group) when ctx is
// cancelled and return only once nothing of it is left running. An error
// means the hook could not be run at all (it never started); wrap ErrConfig
// for configuration errors.
type Runner interface {
	Run(ctx context.Context, req RunRequest, sink Sink) (Outcome, error)
}

// Sealer does the host side of a snapshot's seal, once every hook of it is
// final: it writes the snapshot's index (internal/snapindex) into its
// directory on the host that ran the hooks. Other host-side seal work
// belongs here too.
type Sealer interface {
	Seal(ctx context.Context, in SealInput) (SealReport, error)
}

// Store is the Redis side of a job, in the layout of internal/rkeys. Every
// method must be idempotent for the same Key: activities are retried.
type Store interface {
	SetJobState(ctx context.Context, in JobStateInput) error
	SetStep(ctx context.Context, in StepInput) error
	RecordResult(ctx context.Context, in ResultInput) error
	FinishJob(ctx context.Context, in FinishInput) error
	// ReopenJob takes a finished job back for a retry run.
	ReopenJob(ctx context.Context, in ReopenInput) error
	ApplySettings(ctx context.Context, in SettingsInput) error
	// SetRetryAt indexes a running job as waiting for a later retry of
	// its hooks (a zero At: no longer waiting).
	SetRetryAt(ctx context.Context, in RetryAtInput) error
	// AppendLog appends entries to the job log; key+seq identify a batch so
	// a retried flush is not appended twice.
	AppendLog(ctx context.Context, ident, key string, seq int, entries []LogEntry) error
	// Heartbeat is the job's liveness pulse (ArchiveBot's heartbeat field).
	Heartbeat(ctx context.Context, ident string) error
	// SetArchive records where the seal wrote the job's WACZ (or why it
	// wrote none).
	SetArchive(ctx context.Context, in ArchiveInput) error
}

// HostRegistry tells whether a worker host is alive: whether some worker
// process that still reports itself (pipeline:ID records in Redis) serves a
// task queue.
type HostRegistry interface {
	// QueueLease reports how much longer a live worker process that lists
	// queue among the task queues it serves counts as alive without
	// reporting again (its record's remaining time to live); 0 when no
	// live process lists queue. An error means "cannot tell", never "dead".
	QueueLease(ctx context.Context, queue string) (time.Duration, error)
}
