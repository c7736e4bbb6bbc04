// Package activities owns archiveflow's Temporal activities: claiming a
// worker host for a snapshot, discovering its hooks, running one hook attempt
// with heartbeats, and writing job state, results, settings and the job log
// to Redis. Every dependency (discovery, the process runner, the Redis store)
// is an interface injected into Activities, so tests can fake any of them.
// Activities never return hook stdout: results stay small because they are
// stored in workflow history.
package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/outbox"
)

// ErrConfig marks a hook configuration error: wrap it (fmt.Errorf("...: %w",
// ErrConfig)) in a Discoverer or Runner error and the activity reports a
// non-retryable ErrTypeConfig error.
var ErrConfig = errors.New("configuration error")

// ErrNotWritable marks a Store error that retrying cannot fix: the job's
// hash is gone (expired, never created) or already final, or a value in it
// is malformed. Activities report it as a non-retryable ErrTypeNotWritable.
var ErrNotWritable = errors.New("job not writable")

// storeError wraps a Store error with context, non-retryable when retrying
// cannot help.
func storeError(err error, format string, args ...any) error {
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
	// record, crash, timeout); Error says why.
	Transient bool
	Error     string
}

// Runner runs one attempt of one hook in its own process group and maps its
// exit and JSONL records to an Outcome (DESIGN.md §3). It must stop the
// process (SIGTERM, grace, SIGKILL to the group) when ctx is cancelled and
// return only once nothing of it is left running. An error means the hook
// could not be run at all; wrap ErrConfig for configuration errors.
type Runner interface {
	Run(ctx context.Context, req RunRequest, sink Sink) (Outcome, error)
}

// Store is the Redis side of a job, in the layout of internal/rkeys. Every
// method must be idempotent for the same Key: activities are retried.
type Store interface {
	SetJobState(ctx context.Context, in JobStateInput) error
	SetStep(ctx context.Context, in StepInput) error
	RecordResult(ctx context.Context, in ResultInput) error
	FinishJob(ctx context.Context, in FinishInput) error
	ApplySettings(ctx context.Context, in SettingsInput) error
	// AppendLog appends entries to the job log; key+seq identify a batch so
	// a retried flush is not appended twice.
	AppendLog(ctx context.Context, ident, key string, seq int, entries []LogEntry) error
	// Heartbeat is the job's liveness pulse (ArchiveBot's heartbeat field).
	Heartbeat(ctx context.Context, ident string) error
}

// Defaults for Options fields left zero.
const (
	DefaultHeartbeatInterval    = 5 * time.Second
	DefaultLogFlushInterval     = time.Second
	DefaultLogBatch             = 200
	DefaultLogLinesPerRun       = 20000
	DefaultLogLineBytes         = 4096
	DefaultResultFieldBytes     = 8 << 10
	DefaultResponsesPerRun      = 1 << 20
	DefaultJobHeartbeatInterval = 5 * time.Second
)

// Options tune RunHook. Zero values take the defaults above.
type Options struct {
	// HostQueue is the task queue only this worker process polls; ClaimHost
	// returns it. Required on workers that run hooks.
	HostQueue string
	// HeartbeatInterval is how often RunHook heartbeats; keep it well under
	// the workflow's heartbeat timeout.
	HeartbeatInterval time.Duration
	// LogFlushInterval and LogBatch bound how long and how many stderr
	// lines and responses are buffered before a job log write.
	LogFlushInterval time.Duration
	LogBatch         int
	// LogLinesPerRun caps the log entries one attempt writes; LogLineBytes
	// caps one line. Beyond the cap one notice is logged and the rest dropped.
	LogLinesPerRun int
	LogLineBytes   int
	// ResultFieldBytes caps output_str and output_json in a result: results
	// live in workflow history.
	ResultFieldBytes int
	// ResponsesPerRun caps the Responses one attempt keeps in memory for
	// the response counters (URLs are not kept).
	ResponsesPerRun int
	// JobHeartbeatInterval is how often a running hook pulses the job's
	// Redis heartbeat.
	JobHeartbeatInterval time.Duration
	// LogOutbox takes the log batches an attempt could not write to Redis
	// before it ended, and delivers them once Redis is back (deliver with
	// LogDelivery). Without one those entries are dropped with an error
	// log (the hook's stderr stays in its .stderr.log file).
	LogOutbox *outbox.Outbox
}

func (o Options) withDefaults() Options {
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.LogFlushInterval <= 0 {
		o.LogFlushInterval = DefaultLogFlushInterval
	}
	if o.LogBatch <= 0 {
		o.LogBatch = DefaultLogBatch
	}
	if o.LogLinesPerRun <= 0 {
		o.LogLinesPerRun = DefaultLogLinesPerRun
	}
	if o.LogLineBytes <= 0 {
		o.LogLineBytes = DefaultLogLineBytes
	}
	if o.ResultFieldBytes <= 0 {
		o.ResultFieldBytes = DefaultResultFieldBytes
	}
	if o.ResponsesPerRun <= 0 {
		o.ResponsesPerRun = DefaultResponsesPerRun
	}
	if o.JobHeartbeatInterval <= 0 {
		o.JobHeartbeatInterval = DefaultJobHeartbeatInterval
	}
	return o
}

// Activities holds the dependencies of every archiveflow activity. Register
// a *Activities with a worker; its exported methods are the activities.
type Activities struct {
	discoverer Discoverer
	runner     Runner
	store      Store
	hosts      HostRegistry // nil when store is no HostRegistry
	opts       Options
	log        *zap.Logger
}

// New builds Activities. discoverer and runner may be nil on a worker that
// only serves Redis activities; the activities that need them then fail with
// a clear error. When store also implements HostRegistry (RedisStore does),
// HostAlive answers from it.
func New(discoverer Discoverer, runner Runner, store Store, log *zap.Logger, opts Options) (*Activities, error) {
	if store == nil {
		return nil, errors.New("activities: store must not be nil")
	}
	if log == nil {
		log = zap.NewNop()
	}
	hosts, _ := store.(HostRegistry)
	return &Activities{
		hosts:      hosts,
		discoverer: discoverer,
		runner:     runner,
		store:      store,
		opts:       opts.withDefaults(),
		log:        log,
	}, nil
}

// ClaimHost runs on a pool's shared task queue and returns the task queue
// only this worker process polls: every later hook of the snapshot is sent
// there, so all of them run on the host that holds the snapshot directory.
func (a *Activities) ClaimHost(ctx context.Context, ident string) (string, error) {
	if a.opts.HostQueue == "" {
		return "", fmt.Errorf("claim host for %s: this worker has no host task queue configured", ident)
	}
	a.log.Info("claimed snapshot host", zap.String("ident", ident), zap.String("host_queue", a.opts.HostQueue))
	return a.opts.HostQueue, nil
}

// DiscoverHooks returns the snapshot's hook plan.
func (a *Activities) DiscoverHooks(ctx context.Context, in DiscoverInput) (Plan, error) {
	if a.discoverer == nil {
		return Plan{}, invalidInput("discover hooks for %s: this worker has no hook discoverer", in.Ident)
	}
	plan, err := a.discoverer.Discover(ctx, in)
	if err != nil {
		if errors.Is(err, ErrConfig) {
			return Plan{}, configError(fmt.Errorf("discover hooks for %s: %w", in.Ident, err))
		}
		return Plan{}, temporalError(ErrTypeDiscovery, fmt.Errorf("discover hooks for %s: %w", in.Ident, err))
	}
	if err := plan.Validate(); err != nil {
		return Plan{}, invalidInput("discover hooks for %s: %v", in.Ident, err)
	}
	a.log.Info("discovered hooks", zap.String("ident", in.Ident), zap.Int("hooks", len(plan.Hooks)))
	return plan, nil
}

// SetJobState writes a job state transition.
func (a *Activities) SetJobState(ctx context.Context, in JobStateInput) error {
	if _, err := model.ParseJobState(string(in.State)); err != nil {
		return invalidInput("set job state of %s: %v", in.Ident, err)
	}
	if err := a.store.SetJobState(ctx, in); err != nil {
		return storeError(err, "set job state of %s to %s", in.Ident, in.State)
	}
	return nil
}

// SetStep writes the job's current step.
func (a *Activities) SetStep(ctx context.Context, in StepInput) error {
	if in.Step < 0 || in.Step > 9 {
		return invalidInput("set step of %s: step %d: must be 0..9", in.Ident, in.Step)
	}
	if err := a.store.SetStep(ctx, in); err != nil {
		return storeError(err, "set step of %s to %d", in.Ident, in.Step)
	}
	return nil
}

// RecordResult writes one final hook result with the job's counters.
func (a *Activities) RecordResult(ctx context.Context, in ResultInput) error {
	if _, err := model.ParseStatus(string(in.Result.Status)); err != nil {
		return invalidInput("record result of %s hook %s: %v", in.Ident, in.Result.Hook, err)
	}
	if err := a.store.RecordResult(ctx, in); err != nil {
		return storeError(err, "record result of %s hook %s", in.Ident, in.Result.Hook)
	}
	return nil
}

// FinishJob writes the job's final state and bumps the matching jobs_*
// counter once per Key.
func (a *Activities) FinishJob(ctx context.Context, in FinishInput) error {
	if !in.State.Final() {
		return invalidInput("finish job %s: state %q: must be finished, aborted or failed", in.Ident, in.State)
	}
	if err := a.store.FinishJob(ctx, in); err != nil {
		return storeError(err, "finish job %s as %s", in.Ident, in.State)
	}
	return nil
}

// ApplySettings writes changed settings, bumps settings_age and publishes.
func (a *Activities) ApplySettings(ctx context.Context, in SettingsInput) error {
	if err := in.Settings.Validate(); err != nil {
		return invalidInput("apply settings to %s: %v", in.Ident, err)
	}
	if err := a.store.ApplySettings(ctx, in); err != nil {
		return storeError(err, "apply settings version %d to %s", in.Version, in.Ident)
	}
	return nil
}
