package workflows

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

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
// Every value comes from the configuration (internal/submit).
type Timing struct {
	// HeartbeatTimeout of hook activities: how soon a dead worker or a
	// cancellation is noticed. Must exceed the workers' heartbeat interval.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	// StartMargin is added to a hook's timeout + grace for StartToClose.
	StartMargin time.Duration `json:"start_margin"`
	// ReadyMargin is added to a background hook's timeout to bound how
	// long the hooks after it wait for it to be ready (InputV3).
	ReadyMargin time.Duration `json:"ready_margin,omitempty"`
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

// Validate checks that every timing is set and in range.
func (t Timing) Validate() error {
	switch {
	case t.HeartbeatTimeout <= 0:
		return fmt.Errorf("timing heartbeat_timeout %s: must be > 0", t.HeartbeatTimeout)
	case t.StartMargin <= 0:
		return fmt.Errorf("timing start_margin %s: must be > 0", t.StartMargin)
	case t.HostScheduleToStart <= 0:
		return fmt.Errorf("timing host_schedule_to_start %s: must be > 0", t.HostScheduleToStart)
	case t.BackgroundMaxRun <= 0:
		return fmt.Errorf("timing background_max_run %s: must be > 0", t.BackgroundMaxRun)
	case t.MaxDuration < 0:
		return fmt.Errorf("timing max_duration %s: must be >= 0 (0 = none)", t.MaxDuration)
	case t.MaxClaims < 1:
		return fmt.Errorf("timing max_claims %d: must be >= 1", t.MaxClaims)
	case t.StepAttributeDelay < 0:
		return fmt.Errorf("timing step_attribute_delay %s: must be >= 0", t.StepAttributeDelay)
	}
	return nil
}

// SnapshotInput versions. The workflow behaves as the version its input was
// built with says, so every recorded history replays; internal/submit
// builds InputVersion.
const (
	// InputComplete (1): the input carries every value (internal/submit
	// builds it from the configuration).
	InputComplete = 1
	// InputV2 (2) changes four things: a job that ends failed or aborted
	// ends its workflow failed or canceled, with its Status as the error's
	// details (EndStatus reads it); the seal writes the snapshot's index on
	// the claimed host (SealSnapshot); the state and step search
	// attributes show a change once it has lasted
	// Timing.StepAttributeDelay (a final state at once); and a hook whose
	// heartbeat times out asks at once whether its host is alive
	// (HostLiveness) instead of being retried on the host's queue.
	InputV2 = 2
	// InputV3 (3) launches hooks as abx-dl does: no hook is launched after
	// a background hook before that one is ready (its RunHook says so with
	// SignalHookReady at the hook's first line of stdout), has ended, or
	// its timeout + Timing.ReadyMargin ran out.
	InputV3 = 3
	// InputVersion is the version of every input built now.
	InputVersion = InputV3
)

// SnapshotInput starts one snapshot workflow.
type SnapshotInput struct {
	// Version is InputVersion for every input built now; 0 marks an
	// input recorded before inputs carried every value, which left some
	// to the workflow (see recorded).
	Version int            `json:"version,omitempty"`
	Job     activities.Job `json:"job"`
	// Pool is the worker pool's name (a search attribute).
	Pool string `json:"pool"`
	// TaskQueue is the pool's shared task queue: the host claim, Redis
	// writes and background child workflows run there.
	TaskQueue string         `json:"task_queue"`
	Settings  model.Settings `json:"settings"`
	// SequentialSteps run one hook at a time (none when empty).
	SequentialSteps []int         `json:"sequential_steps"`
	Retry           RetryPolicies `json:"retry"`
	Timing          Timing        `json:"timing"`
	// Rerun, when set, makes this run a retry of the job's previous run
	// (starter retry): only its failed hooks run. Absent in every input
	// before it, so their histories replay unchanged.
	Rerun *Rerun `json:"rerun,omitempty"`
	// HostSteps runs consecutive foreground steps on the claimed host in
	// one RunSteps activity (segment.go; from InputV2 on). Absent, as in
	// every input recorded before it, each hook is its own activity.
	HostSteps bool `json:"host_steps,omitempty"`
	// RetryLater are the hooks' later-retry delays (hooks.retry_later,
	// retrylater.go). Absent, as in every input recorded before it: a hook
	// whose attempts ran out is failed for good.
	RetryLater *RetryLater `json:"retry_later,omitempty"`
}

// RetryLater are the delays of a job's later retries: a default list and
// per-plugin lists (keyed by plugin name).
type RetryLater struct {
	Default   []time.Duration            `json:"default,omitempty"`
	PerPlugin map[string][]time.Duration `json:"per_plugin,omitempty"`
}

// For returns plugin's delays.
func (r *RetryLater) For(plugin string) []time.Duration {
	if d, ok := r.PerPlugin[plugin]; ok {
		return d
	}
	return r.Default
}

// Validate checks that every delay is positive.
func (r *RetryLater) Validate() error {
	check := func(what string, ds []time.Duration) error {
		for i, d := range ds {
			if d <= 0 {
				return fmt.Errorf("retry_later %s[%d] %s: must be > 0", what, i, d)
			}
		}
		return nil
	}
	if err := check("default", r.Default); err != nil {
		return err
	}
	for _, plugin := range slices.Sorted(maps.Keys(r.PerPlugin)) {
		if err := check("of plugin "+plugin, r.PerPlugin[plugin]); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks that the input carries every value the workflow needs.
func (in SnapshotInput) Validate() error {
	switch {
	case in.Version < InputComplete || in.Version > InputVersion:
		return fmt.Errorf("input version %d: must be %d..%d (build the input with internal/submit)", in.Version, InputComplete, InputVersion)
	case in.Job.Ident == "":
		return fmt.Errorf("job ident: must not be empty")
	case in.Job.URL == "":
		return fmt.Errorf("job %s: url must not be empty", in.Job.Ident)
	case in.Job.SnapshotID == "":
		return fmt.Errorf("job %s: snapshot_id must not be empty", in.Job.Ident)
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
	if err := in.Timing.Validate(); err != nil {
		return fmt.Errorf("job %s: %w", in.Job.Ident, err)
	}
	if in.since(InputV3) && in.Timing.ReadyMargin <= 0 {
		return fmt.Errorf("job %s: timing ready_margin %s: must be > 0", in.Job.Ident, in.Timing.ReadyMargin)
	}
	if in.RetryLater != nil {
		if err := in.RetryLater.Validate(); err != nil {
			return fmt.Errorf("job %s: %w", in.Job.Ident, err)
		}
	}
	if in.Rerun != nil {
		if err := in.Rerun.Validate(); err != nil {
			return fmt.Errorf("job %s: %w", in.Job.Ident, err)
		}
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

// since reports whether the input was built with version v or later.
func (in SnapshotInput) since(v int) bool { return in.Version >= v }

// recorded completes an input of Version 0, recorded before inputs
// carried every value, with the values the workflow then filled in, so
// those histories replay unchanged. A complete input is returned as is.
// These are not defaults: config.Default() owns those, and internal/submit
// puts them into every new input.
func (in SnapshotInput) recorded() SnapshotInput {
	if in.Version != 0 {
		return in
	}
	in.Version = InputComplete
	if in.SequentialSteps == nil {
		in.SequentialSteps = []int{5}
	}
	if in.Job.SnapshotID == "" {
		in.Job.SnapshotID = in.Job.Ident
	}
	t := &in.Timing
	if t.StartMargin <= 0 {
		t.StartMargin = 30 * time.Second
	}
	if t.BackgroundMaxRun <= 0 {
		t.BackgroundMaxRun = 24 * time.Hour
	}
	if t.MaxClaims <= 0 {
		t.MaxClaims = 3
	}
	return in
}
