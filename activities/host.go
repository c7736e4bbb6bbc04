package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/outbox"
)

// Options tune RunHook and RunSteps. Every field but LogOutbox and Settings is required: the values
// come from the resolved configuration (config hooks.*, see
// internal/pools), never from defaults of this package.
type Options struct {
	// HeartbeatInterval is how often RunHook heartbeats; keep it well under
	// the workflow's heartbeat timeout.
	HeartbeatInterval time.Duration
	// JobHeartbeatInterval is how often a running hook pulses the job's
	// Redis heartbeat.
	JobHeartbeatInterval time.Duration
	// SettingsPollInterval is how often RunSteps asks its workflow for the
	// job's current settings while it has hooks left to start.
	SettingsPollInterval time.Duration
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
	// LogOutbox takes the log batches an attempt could not write to Redis
	// before it ended, and delivers them once Redis is back (deliver with
	// LogDelivery). Without one those entries are dropped with an error
	// log (the hook's stderr stays in its .stderr.log file).
	LogOutbox *outbox.Outbox
	// Settings reads a job's current settings for RunSteps; nil (the
	// production value) queries the activity's own workflow through the
	// worker's client.
	Settings SettingsReader
	// Ready tells a workflow that a background hook is ready; nil (the
	// production value) signals it through the worker's client.
	Ready ReadySignaler
}

// Validate checks that every required value is set.
func (o Options) Validate() error {
	if err := cmp.Or(
		positive("heartbeat interval", o.HeartbeatInterval),
		positive("job heartbeat interval", o.JobHeartbeatInterval),
		positive("settings poll interval", o.SettingsPollInterval),
		positive("log flush interval", o.LogFlushInterval),
		positive("log batch", o.LogBatch),
		positive("log lines per attempt", o.LogLinesPerRun),
		positive("log line bytes", o.LogLineBytes),
		positive("result field bytes", o.ResultFieldBytes),
		positive("responses per attempt", o.ResponsesPerRun),
	); err != nil {
		return fmt.Errorf("hook activity options: %w", err)
	}
	return nil
}

// positive is the error of an option v, named what, that is not > 0.
func positive[T int | time.Duration](what string, v T) error {
	if v > 0 {
		return nil
	}
	return fmt.Errorf("%s %v: must be > 0", what, v)
}

// HostActivities are the activities of the task queue only one worker
// process polls: every hook of a snapshot runs on the host that claimed it.
type HostActivities struct {
	discoverer Discoverer
	runner     Runner
	sealer     Sealer
	store      Store
	opts       Options
	log        *zap.Logger
}

// NewHost builds the host-queue activities.
func NewHost(discoverer Discoverer, runner Runner, sealer Sealer, store Store, log *zap.Logger, opts Options) (*HostActivities, error) {
	switch {
	case discoverer == nil:
		return nil, errors.New("host activities: discoverer must not be nil")
	case runner == nil:
		return nil, errors.New("host activities: runner must not be nil")
	case sealer == nil:
		return nil, errors.New("host activities: sealer must not be nil")
	case store == nil:
		return nil, errors.New("host activities: store must not be nil")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log = cmp.Or(log, zap.NewNop())
	return &HostActivities{discoverer: discoverer, runner: runner, sealer: sealer, store: store, opts: opts, log: log}, nil
}

// DiscoverHooks returns the snapshot's hook plan.
func (a *HostActivities) DiscoverHooks(ctx context.Context, in DiscoverInput) (Plan, error) {
	return discover(ctx, a.discoverer, in, a.log)
}

// discover runs d for in and checks the plan: configuration errors are
// never retried, unreadable plugin dirs are.
func discover(ctx context.Context, d Discoverer, in DiscoverInput, log *zap.Logger) (Plan, error) {
	plan, err := d.Discover(ctx, in)
	if err != nil {
		err = fmt.Errorf("discover hooks for %s: %w", in.Ident, err)
		if errors.Is(err, ErrConfig) {
			return Plan{}, nonRetryable(ErrTypeConfig, "%v", err)
		}
		return Plan{}, temporal.NewApplicationError(err.Error(), ErrTypeDiscovery)
	}
	if err := plan.Validate(); err != nil {
		return Plan{}, invalidInput("discover hooks for %s: %v", in.Ident, err)
	}
	log.Info("discovered hooks", logging.Ident(in.Ident), zap.Int("hooks", len(plan.Hooks)))
	return plan, nil
}

// SealSnapshot is the host side of the seal: it runs on the host that ran
// the snapshot's hooks once every one of them is final, and writes the
// snapshot's index there (Sealer). A seal that cannot write is retried; an
// input that breaks a rule is not.
func (a *HostActivities) SealSnapshot(ctx context.Context, in SealInput) (SealReport, error) {
	if in.Job.Ident == "" || in.Job.SnapshotID == "" || in.Job.URL == "" {
		return SealReport{}, invalidInput("seal snapshot: job ident, snapshot id and url must not be empty")
	}
	if !in.State.Final() {
		return SealReport{}, invalidInput("seal snapshot %s: state %q: must be finished, aborted or failed", in.Job.Ident, in.State)
	}
	rep, err := a.sealer.Seal(ctx, in)
	if err != nil {
		return SealReport{}, fmt.Errorf("seal snapshot %s: %w", in.Job.Ident, err)
	}
	if rep.WACZ != "" || rep.WACZError != "" {
		// The workflow records where the WACZ is (PoolActivities.SetArchive,
		// through its ordered writer: a Redis outage delays it, never the
		// seal).
		rep.WACZHost, _ = os.Hostname()
	}
	a.log.Info("sealed snapshot", logging.Ident(in.Job.Ident), zap.Strings("files", rep.Files), zap.String("wacz", rep.WACZ))
	return rep, nil
}
