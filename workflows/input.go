package workflows

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// DefaultSequentialSteps are the steps whose hooks run one at a time when a
// job does not say otherwise: step 5, the DOM extractors sharing one tab.
var DefaultSequentialSteps = []int{5}

// Retry is one activity retry policy for hook attempts.
type Retry struct {
	InitialInterval    time.Duration `json:"initial_interval"`
	BackoffCoefficient float64       `json:"backoff_coefficient"`
	MaximumInterval    time.Duration `json:"maximum_interval"`
	// MaximumAttempts counts the first attempt: 1 = never retried.
	MaximumAttempts int32 `json:"maximum_attempts"`
}

// Validate checks the policy's ranges.
func (r Retry) Validate() error {
	switch {
	case r.InitialInterval <= 0:
		return fmt.Errorf("initial_interval %s: must be > 0", r.InitialInterval)
	case r.BackoffCoefficient < 1:
		return fmt.Errorf("backoff_coefficient %g: must be >= 1", r.BackoffCoefficient)
	case r.MaximumInterval < r.InitialInterval:
		return fmt.Errorf("maximum_interval %s: must be >= initial_interval (%s)", r.MaximumInterval, r.InitialInterval)
	case r.MaximumAttempts < 1:
		return fmt.Errorf("maximum_attempts %d: must be >= 1", r.MaximumAttempts)
	}
	return nil
}

// DefaultRetry is the hook retry policy when a job carries none.
var DefaultRetry = Retry{InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 3}

// RetryPolicies are the hook retry policies of a job: a default and per
// plugin overrides (keyed by plugin name).
type RetryPolicies struct {
	Default   Retry            `json:"default"`
	PerPlugin map[string]Retry `json:"per_plugin,omitempty"`
}

// For returns the policy of plugin.
func (p RetryPolicies) For(plugin string) Retry {
	if r, ok := p.PerPlugin[plugin]; ok {
		return r
	}
	return p.Default
}

// Timing holds the timeouts the workflow derives activity options from.
type Timing struct {
	// HeartbeatTimeout of hook activities: how soon a dead worker or a
	// cancellation is noticed. Must exceed the workers' heartbeat interval.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	// StartMargin is added to a hook's timeout + grace for StartToClose.
	StartMargin time.Duration `json:"start_margin"`
	// HostScheduleToStart bounds how long an activity may wait on the
	// claimed host's queue; past it the host is taken as gone and the
	// snapshot is re-claimed. It also bounds the re-claim time.
	HostScheduleToStart time.Duration `json:"host_schedule_to_start"`
	// BackgroundMaxRun is the StartToClose of background hooks, which
	// otherwise run until the seal.
	BackgroundMaxRun time.Duration `json:"background_max_run"`
	// MaxDuration bounds the whole job with a workflow timer (0 = none);
	// when it fires the job is stopped like an abort and ends failed.
	MaxDuration time.Duration `json:"max_duration"`
	// MaxClaims is how many times the snapshot may be claimed by a host
	// (first claim included) before the job fails.
	MaxClaims int `json:"max_claims"`
	// StepAttributeDelay is how long a step must last before the
	// ArchiveflowStep search attribute is upserted for it. Zero (also what
	// inputs from before this field read as) upserts at every step.
	StepAttributeDelay time.Duration `json:"step_attribute_delay,omitempty"`
}

// DefaultTiming is used for every Timing field left zero.
var DefaultTiming = Timing{
	HeartbeatTimeout:    10 * time.Second,
	StartMargin:         30 * time.Second,
	HostScheduleToStart: 2 * time.Minute,
	BackgroundMaxRun:    24 * time.Hour,
	MaxDuration:         0,
	MaxClaims:           3,
}

func (t Timing) withDefaults() Timing {
	d := DefaultTiming
	if t.HeartbeatTimeout <= 0 {
		t.HeartbeatTimeout = d.HeartbeatTimeout
	}
	if t.StartMargin <= 0 {
		t.StartMargin = d.StartMargin
	}
	if t.HostScheduleToStart <= 0 {
		t.HostScheduleToStart = d.HostScheduleToStart
	}
	if t.BackgroundMaxRun <= 0 {
		t.BackgroundMaxRun = d.BackgroundMaxRun
	}
	if t.MaxClaims <= 0 {
		t.MaxClaims = d.MaxClaims
	}
	return t
}

// SnapshotInput starts one snapshot workflow.
type SnapshotInput struct {
	Job activities.Job `json:"job"`
	// Pool is the worker pool's name (a search attribute).
	Pool string `json:"pool"`
	// TaskQueue is the pool's shared task queue: the host claim, Redis
	// writes and background child workflows run there.
	TaskQueue string         `json:"task_queue"`
	Settings  model.Settings `json:"settings"`
	// SequentialSteps run one hook at a time; nil means DefaultSequentialSteps.
	SequentialSteps []int         `json:"sequential_steps"`
	Retry           RetryPolicies `json:"retry"`
	Timing          Timing        `json:"timing"`
}

// Validate checks what the workflow cannot run without.
func (in SnapshotInput) Validate() error {
	switch {
	case in.Job.Ident == "":
		return fmt.Errorf("job ident: must not be empty")
	case in.Job.URL == "":
		return fmt.Errorf("job %s: url must not be empty", in.Job.Ident)
	case in.TaskQueue == "":
		return fmt.Errorf("job %s: task_queue must not be empty", in.Job.Ident)
	}
	if err := in.Settings.Validate(); err != nil {
		return fmt.Errorf("job %s settings: %w", in.Job.Ident, err)
	}
	for _, s := range in.SequentialSteps {
		if s < 0 || s > 9 {
			return fmt.Errorf("job %s: sequential step %d: must be 0..9", in.Job.Ident, s)
		}
	}
	if in.Timing.StepAttributeDelay < 0 {
		return fmt.Errorf("job %s: timing step_attribute_delay %s: must be >= 0", in.Job.Ident, in.Timing.StepAttributeDelay)
	}
	if err := in.Retry.Default.Validate(); err != nil {
		return fmt.Errorf("job %s default retry: %w", in.Job.Ident, err)
	}
	for _, plugin := range slices.Sorted(maps.Keys(in.Retry.PerPlugin)) {
		if err := in.Retry.PerPlugin[plugin].Validate(); err != nil {
			return fmt.Errorf("job %s retry of plugin %s: %w", in.Job.Ident, plugin, err)
		}
	}
	return nil
}

// withDefaults fills the optional fields.
func (in SnapshotInput) withDefaults() SnapshotInput {
	if in.SequentialSteps == nil {
		in.SequentialSteps = DefaultSequentialSteps
	}
	if in.Retry.Default == (Retry{}) {
		in.Retry.Default = DefaultRetry
	}
	if in.Job.SnapshotID == "" {
		in.Job.SnapshotID = in.Job.Ident
	}
	in.Timing = in.Timing.withDefaults()
	return in
}
