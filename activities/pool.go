package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
)

// ErrTypeNoHostRegistry is HostAlive on a worker that cannot tell which
// hosts are alive. Never retried: the workflow then falls back to treating
// a host queue nobody started work from as lost.
const ErrTypeNoHostRegistry = "NoHostRegistry"

// PoolActivities are the activities of a pool's shared task queue. Register
// them on the worker that runs the pool's workflows: the Redis writes among
// them run as that worker's local activities.
type PoolActivities struct {
	store      Store
	hosts      HostRegistry // nil: HostAlive cannot tell
	discoverer Discoverer   // nil: ClaimAndDiscover cannot discover
	hostQueue  string
	log        *zap.Logger
}

// NewPool builds the shared-queue activities. hostQueue is the task queue
// only this worker process polls (ClaimHost hands it out); hosts may be
// nil, then HostAlive answers with a non-retryable ErrTypeNoHostRegistry;
// discoverer is this process's (the one DiscoverHooks uses) and may be nil
// in a worker that runs no hooks, then ClaimAndDiscover fails for good.
func NewPool(store Store, hosts HostRegistry, discoverer Discoverer, hostQueue string, log *zap.Logger) (*PoolActivities, error) {
	if store == nil {
		return nil, errors.New("pool activities: store must not be nil")
	}
	if hostQueue == "" {
		return nil, errors.New("pool activities: host queue must not be empty (ClaimHost hands it out)")
	}
	log = cmp.Or(log, zap.NewNop())
	return &PoolActivities{store: store, hosts: hosts, discoverer: discoverer, hostQueue: hostQueue, log: log}, nil
}

// ClaimHost runs on a pool's shared task queue and returns the task queue
// only this worker process polls: every later hook of the snapshot is sent
// there, so all of them run on the host that holds the snapshot directory.
func (a *PoolActivities) ClaimHost(ctx context.Context, ident string) (string, error) {
	a.log.Info("claimed snapshot host", logging.Ident(ident), zap.String("host_queue", a.hostQueue))
	return a.hostQueue, nil
}

// ClaimAndDiscover is ClaimHost and DiscoverHooks in one activity
// (InputV2): the worker that claims the snapshot is its host, so it
// discovers the hooks right away, from its own plugin dirs. That saves an
// activity and a workflow task per snapshot.
func (a *PoolActivities) ClaimAndDiscover(ctx context.Context, in DiscoverInput) (Claim, error) {
	if a.discoverer == nil {
		return Claim{}, nonRetryable(ErrTypeConfig, "claim %s: this worker cannot discover hooks", in.Ident)
	}
	plan, err := discover(ctx, a.discoverer, in, a.log)
	if err != nil {
		return Claim{}, err
	}
	a.log.Info("claimed snapshot host", logging.Ident(in.Ident), zap.String("host_queue", a.hostQueue))
	return Claim{HostQueue: a.hostQueue, Plan: plan}, nil
}

// HostAlive runs on a pool's shared task queue (any worker of the pool can
// answer) and reports whether the worker host serving hostQueue is alive.
// The workflow asks it when an activity waited on a host queue past its
// ScheduleToStart timeout: a busy host (every slot taken) keeps its
// pipeline:ID record fresh and is waited for; a dead one is re-claimed.
// A registry error (Redis down) is returned as a retryable error: the
// workflow retries and never reads it as a dead host. Histories recorded
// before HostLiveness ask this; new ones ask HostLiveness.
func (a *PoolActivities) HostAlive(ctx context.Context, hostQueue string) (bool, error) {
	l, err := a.HostLiveness(ctx, hostQueue)
	return l.Alive, err
}

// HostLiveness is HostAlive with how long the host counts as alive without
// reporting again (Liveness.Lease): a host that just died is known lost
// once that lease ran out, so the workflow asks again then.
func (a *PoolActivities) HostLiveness(ctx context.Context, hostQueue string) (Liveness, error) {
	if hostQueue == "" {
		return Liveness{}, invalidInput("host alive: host queue must not be empty")
	}
	if a.hosts == nil {
		return Liveness{}, nonRetryable(ErrTypeNoHostRegistry, "host alive %s: this worker cannot tell which hosts are alive", hostQueue)
	}
	lease, err := a.hosts.QueueLease(ctx, hostQueue)
	if err != nil {
		a.log.Warn("cannot tell whether a host is alive", zap.String("host_queue", hostQueue), zap.Error(err))
		return Liveness{}, fmt.Errorf("host alive %s: %w", hostQueue, err)
	}
	l := Liveness{Alive: lease > 0, Lease: lease}
	a.log.Info("checked host liveness", zap.String("host_queue", hostQueue), zap.Bool("alive", l.Alive), zap.Duration("lease", lease))
	return l, nil
}

// SetJobState writes a job state transition.
func (a *PoolActivities) SetJobState(ctx context.Context, in JobStateInput) error {
	if _, err := model.ParseJobState(string(in.State)); err != nil {
		return invalidInput("set job state of %s: %v", in.Ident, err)
	}
	return storeError(a.store.SetJobState(ctx, in), "set job state of %s to %s", in.Ident, in.State)
}

// SetStep writes the job's current step.
func (a *PoolActivities) SetStep(ctx context.Context, in StepInput) error {
	if in.Step < 0 || in.Step > 9 {
		return invalidInput("set step of %s: step %d: must be 0..9", in.Ident, in.Step)
	}
	return storeError(a.store.SetStep(ctx, in), "set step of %s to %d", in.Ident, in.Step)
}

// RecordResult writes one final hook result with the job's counters.
func (a *PoolActivities) RecordResult(ctx context.Context, in ResultInput) error {
	if _, err := model.ParseStatus(string(in.Result.Status)); err != nil {
		return invalidInput("record result of %s hook %s: %v", in.Ident, in.Result.Hook, err)
	}
	return storeError(a.store.RecordResult(ctx, in), "record result of %s hook %s", in.Ident, in.Result.Hook)
}

// FinishJob writes the job's final state and bumps the matching jobs_*
// counter once per Key.
func (a *PoolActivities) FinishJob(ctx context.Context, in FinishInput) error {
	if !in.State.Final() {
		return invalidInput("finish job %s: state %q: must be finished, aborted or failed", in.Ident, in.State)
	}
	return storeError(a.store.FinishJob(ctx, in), "finish job %s as %s", in.Ident, in.State)
}

// SetArchive records where the seal wrote the job's WACZ (or why it wrote
// none).
func (a *PoolActivities) SetArchive(ctx context.Context, in ArchiveInput) error {
	if (in.WACZ == "") == (in.Error == "") {
		return invalidInput("set wacz of job %s: exactly one of file and error must be set", in.Ident)
	}
	return storeError(a.store.SetArchive(ctx, in), "set wacz of job %s", in.Ident)
}

// ReopenJob takes a finished job back for a retry run (starter retry):
// its final state, retention and jobs_* count, and the counts of the
// failed results the retry runs again, once per Key.
func (a *PoolActivities) ReopenJob(ctx context.Context, in ReopenInput) error {
	if in.Hooks < 0 || in.Bytes < 0 {
		return invalidInput("reopen job %s: hooks %d and bytes %d: must be >= 0", in.Ident, in.Hooks, in.Bytes)
	}
	return storeError(a.store.ReopenJob(ctx, in), "reopen job %s", in.Ident)
}

// SetRetryAt indexes the job as waiting for a later retry of its hooks
// (retry_at), or takes it out when in.At is zero.
func (a *PoolActivities) SetRetryAt(ctx context.Context, in RetryAtInput) error {
	return storeError(a.store.SetRetryAt(ctx, in), "set retry_at of job %s", in.Ident)
}

// ApplySettings writes changed settings, bumps settings_age and publishes.
// Settings model.Settings.Validate refuses are a non-retryable error: the
// workflow's ordered writer must never retry a write that cannot succeed.
func (a *PoolActivities) ApplySettings(ctx context.Context, in SettingsInput) error {
	if err := in.Settings.Validate(); err != nil {
		return invalidInput("apply settings to %s: %v", in.Ident, err)
	}
	return storeError(a.store.ApplySettings(ctx, in), "apply settings version %d to %s", in.Version, in.Ident)
}
