package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/steprun"
)

// StepsInput is one segment: consecutive steps whose hooks all run in the
// foreground, run on the claimed host by one RunSteps activity.
type StepsInput struct {
	Job Job `json:"job"`
	// Settings are the job's settings when the segment was scheduled;
	// RunSteps follows later changes through its workflow's status query.
	Settings        model.Settings `json:"settings"`
	SequentialSteps []int          `json:"sequential_steps"`
	// Steps are the segment's steps in order, empty ones included: each
	// is shown as the job's current step when it starts.
	Steps []int `json:"steps"`
	// Hooks are the hooks to run, in plan order.
	Hooks []StepHook `json:"hooks"`
	// HooksTotal is the plan's hook count (the job's step record).
	HooksTotal int `json:"hooks_total"`
	// Resume is the last heartbeat of an earlier RunSteps of this segment
	// that timed out on a live host: it resumes from it as a retried
	// attempt does from its own.
	Resume *StepsProgress `json:"resume,omitempty"`
}

// StepHook is one hook of a segment.
type StepHook struct {
	Hook HookSpec `json:"hook"`
	// Key is the idempotency key of the hook's result (RunHookInput.Key).
	Key string `json:"key"`
	// Limit bounds the hook's run like the StartToClose of its own RunHook
	// activity would: its timeout, grace and margin.
	Limit time.Duration `json:"limit"`
}

// StepOutcome is the end of one hook's attempt in a segment: a final
// result, or the failure of its first attempt.
type StepOutcome struct {
	Hook   string        `json:"hook"` // HookSpec.Key()
	Result RunHookResult `json:"result"`
	// Failure is set when the attempt did not end with a final result;
	// Result.ArchiveResult then holds the attempt's record, if any.
	Failure *StepFailure `json:"failure,omitempty"`
}

// StepFailure is a hook attempt of a segment that ended without a final
// result.
type StepFailure struct {
	Message string `json:"message"`
	Type    string `json:"type,omitempty"`
	// Retryable: the hook's retry policy decides whether it runs again
	// (as RunHook activities, the attempt used counted).
	Retryable bool `json:"retryable,omitempty"`
	// Cancelled: the segment was cancelled while the hook ran.
	Cancelled bool `json:"cancelled,omitempty"`
	// Interrupted: an earlier attempt of the segment started the hook and
	// ended before it did.
	Interrupted bool `json:"interrupted,omitempty"`
	// HasRecord says the attempt reported a record (Result).
	HasRecord bool `json:"has_record,omitempty"`
}

// StepsProgress is RunSteps' heartbeat: every hook that ended, and the
// hooks started and not yet ended. A retried attempt of the segment
// resumes from it.
type StepsProgress struct {
	Done    []StepOutcome `json:"done"`
	Running []string      `json:"running,omitempty"`
}

// StepsResult is what RunSteps returns (also as the details of its
// CanceledError): the outcome of every hook it started, in the order they
// ended. A step with a failed hook is the segment's last: the hooks of
// later steps are not started.
type StepsResult struct {
	Outcomes []StepOutcome `json:"outcomes"`
	// StepRecorded says the job's current step in Redis is the last step
	// RunSteps started; when not (Redis down), the workflow writes it.
	StepRecorded bool `json:"step_recorded,omitempty"`
}

// SettingsReader reads the job's current settings from the workflow that
// owns them.
type SettingsReader interface {
	Settings(ctx context.Context) (model.Settings, error)
}

// QueryStatus names the workflows' status query (workflows.QueryStatus is
// this name). It is declared here, below the workflows package, because
// RunSteps reads its own workflow's settings through it and activities
// cannot import workflows; the answer carries the settings under
// "settings".
const QueryStatus = "status"

// workflowSettings reads the settings through the worker's client from the
// status query of the activity's own workflow.
type workflowSettings struct{}

func (workflowSettings) Settings(ctx context.Context) (model.Settings, error) {
	info := activity.GetInfo(ctx)
	v, err := activity.GetClient(ctx).QueryWorkflow(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, QueryStatus)
	if err != nil {
		return model.Settings{}, fmt.Errorf("query settings of %s: %w", info.WorkflowExecution.ID, err)
	}
	var st struct {
		Settings model.Settings `json:"settings"`
	}
	if err := v.Get(&st); err != nil {
		return model.Settings{}, fmt.Errorf("decode settings of %s: %w", info.WorkflowExecution.ID, err)
	}
	return st.Settings, nil
}

// RunSteps runs a segment on the claimed host (the workflow's host_steps
// path): step by step, the hooks of a step in parallel bounded by
// StepLimit with the job's current concurrency (0 pauses), in plan order,
// each exactly as RunHook's first attempt runs it (runAttempt) and bounded
// by its Limit. It heartbeats the outcomes so far (StepsProgress); a
// retried attempt does not run a hook that already ended, and reports one
// it had started as interrupted. A hook whose attempt fails retryably
// makes its step the segment's last (its other hooks still run); the
// workflow runs it again as RunHook activities. On cancellation (abort,
// seal) running hooks are stopped like RunHook's and the result so far is
// the details of the CanceledError.
func (a *HostActivities) RunSteps(ctx context.Context, in StepsInput) (StepsResult, error) {
	if err := validateSteps(in); err != nil {
		return StepsResult{}, err
	}
	info := activity.GetInfo(ctx)
	seg := &segment{a: a, ctx: ctx, in: in, ended: map[string]bool{}, log: a.log.With(logging.Ident(in.Job.Ident), zap.String("segment", info.ActivityID))}
	seg.resume()
	seg.settings = settingsWatch{reader: cmp.Or[SettingsReader](a.opts.Settings, workflowSettings{}), interval: a.opts.SettingsPollInterval, current: in.Settings, read: time.Now()}

	recorded := true
	if !seg.failed() {
		seg.run(func(step int) {
			if in.Job.CrawlPage {
				return
			}
			err := a.store.SetStep(ctx, StepInput{Ident: in.Job.Ident, Step: step, HooksTotal: in.HooksTotal})
			if recorded = err == nil; !recorded {
				seg.log.Warn("set step; the workflow writes it", zap.Int("step", step), zap.Error(err))
			}
		})
	}
	res := StepsResult{Outcomes: seg.outcomes(), StepRecorded: recorded}
	if ctx.Err() != nil && !workerStopping(ctx) {
		return StepsResult{}, temporal.NewCanceledError(res)
	}
	return res, nil
}

func validateSteps(in StepsInput) error {
	if len(in.Hooks) == 0 {
		return invalidInput("run steps for %s: hooks must not be empty", in.Job.Ident)
	}
	for _, h := range in.Hooks {
		if err := validateRunHook(RunHookInput{Job: in.Job, Hook: h.Hook, Key: h.Key}); err != nil {
			return err
		}
		switch {
		case h.Hook.Background:
			return invalidInput("run steps for %s: hook %s: must not be a background hook", in.Job.Ident, h.Hook.Key())
		case h.Limit <= 0:
			return invalidInput("run steps for %s: hook %s: limit %s: must be > 0", in.Job.Ident, h.Hook.Key(), h.Limit)
		case !slices.Contains(in.Steps, h.Hook.Step):
			return invalidInput("run steps for %s: hook %s: step %d: must be one of the segment's steps %v", in.Job.Ident, h.Hook.Key(), h.Hook.Step, in.Steps)
		}
	}
	return nil
}

// segment is the state of one RunSteps attempt.
type segment struct {
	a        *HostActivities
	ctx      context.Context
	in       StepsInput
	log      *zap.Logger
	settings settingsWatch

	mu      sync.Mutex
	done    []StepOutcome
	ended   map[string]bool // hook key → has an outcome
	running []string
}

// resume takes the outcomes of an earlier attempt from its heartbeat: a
// hook that ended is not run again, one that was running is reported
// interrupted (its attempt was used; the workflow retries it).
func (s *segment) resume() {
	var p StepsProgress
	switch {
	case activity.HasHeartbeatDetails(s.ctx):
		if err := activity.GetHeartbeatDetails(s.ctx, &p); err != nil {
			s.log.Warn("read the previous attempt's heartbeat; running the segment from its start", zap.Error(err))
			return
		}
	case s.in.Resume != nil:
		p = *s.in.Resume
	default:
		return
	}
	for _, o := range p.Done {
		s.record(o)
	}
	for _, key := range p.Running {
		if s.ended[key] {
			continue
		}
		s.record(StepOutcome{Hook: key, Failure: &StepFailure{
			Message: fmt.Sprintf("hook %s: the segment's attempt ended while it ran", key), Type: ErrTypeTransient,
			Retryable: true, Interrupted: true,
		}})
	}
	s.log.Info("segment resumed", zap.Int("ended", len(s.done)))
}

func (s *segment) record(o StepOutcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = slices.DeleteFunc(s.running, func(k string) bool { return k == o.Hook })
	s.done = append(s.done, o)
	s.ended[o.Hook] = true
}

func (s *segment) outcomes() []StepOutcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.done)
}

func (s *segment) hasEnded(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended[key]
}

// failed reports a hook whose attempt failed retryably: its step is the
// segment's last.
func (s *segment) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.done, func(o StepOutcome) bool { return o.class() == steprun.Retry })
}

// beat heartbeats the segment's progress (the SDK throttles it).
func (s *segment) beat() {
	s.mu.Lock()
	p := StepsProgress{Done: slices.Clone(s.done), Running: slices.Clone(s.running)}
	s.mu.Unlock()
	activity.RecordHeartbeat(s.ctx, p)
}

// run runs the hooks that have not ended through the step runner: a step
// at a time, as many of a step's hooks at once as StepLimit allows with the
// job's current concurrency (0 pauses: the segment heartbeats while it
// waits), each step announced to onStep; a step with a hook to retry is
// the last (its other hooks still run).
func (s *segment) run(onStep func(step int)) {
	var left []StepHook
	var hooks []steprun.Hook
	for _, h := range s.in.Hooks {
		if !s.hasEnded(h.Hook.Key()) {
			left = append(left, h)
			hooks = append(hooks, steprun.Hook{Step: h.Hook.Step})
		}
	}
	policy := steprun.Policy{
		Steps: s.in.Steps,
		Limit: func(step int) int {
			return StepLimit(s.settings.get(s.ctx, s.log).Concurrency, step, s.in.SequentialSteps)
		},
		Poll:   min(s.a.opts.HeartbeatInterval, s.a.opts.SettingsPollInterval),
		OnStep: onStep,
		Idle:   s.beat, // paused: no hook heartbeats for the segment
	}
	steprun.Run(s.ctx, hooks, policy, func(ctx context.Context, i int, _ func()) steprun.Class {
		h := left[i]
		s.mu.Lock()
		s.running = append(s.running, h.Hook.Key())
		s.mu.Unlock()
		o := s.runHook(h)
		s.record(o)
		s.beat()
		return o.class()
	})
}

// class is how the plan's order sees an outcome: a configuration error is
// the hook's final failure (the snapshot goes on without it).
func (o StepOutcome) class() steprun.Class {
	switch f := o.Failure; {
	case f == nil:
		return steprun.Final
	case f.Cancelled:
		return steprun.Cancelled
	case f.Retryable:
		return steprun.Retry
	}
	return steprun.Final
}

// runHook is the first attempt of one hook, bounded by its limit.
func (s *segment) runHook(h StepHook) StepOutcome {
	key := h.Hook.Key()
	hctx, cancel := context.WithTimeout(s.ctx, h.Limit)
	defer cancel()
	info := activity.GetInfo(s.ctx)
	logKey := fmt.Sprintf("%s/%s/%s/attempt-1", info.WorkflowExecution.RunID, info.ActivityID, key)
	in := RunHookInput{Job: s.in.Job, Hook: h.Hook, Settings: s.settings.last(), Key: h.Key}
	res, err := s.a.runAttempt(hctx, in, 1, logKey, func(Progress) { s.beat() })
	if err == nil {
		return StepOutcome{Hook: key, Result: res}
	}
	out := StepOutcome{Hook: key, Failure: &StepFailure{Message: err.Error()}}
	var appErr *temporal.ApplicationError
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &canceled) && s.ctx.Err() == nil:
		// The hook ran past its limit: what the StartToClose timeout of
		// its own activity would have been, retried like one.
		out.Failure.Message = attemptFailure(key, 1, "ran past its limit of "+h.Limit.String())
		out.Failure.Type, out.Failure.Retryable = ErrTypeTransient, true
		out.Failure.HasRecord = canceled.HasDetails() && canceled.Details(&out.Result.ArchiveResult) == nil
	case errors.As(err, &canceled):
		out.Failure.Cancelled = true
		out.Failure.HasRecord = canceled.HasDetails() && canceled.Details(&out.Result.ArchiveResult) == nil
	case errors.As(err, &appErr):
		out.Failure.Message, out.Failure.Type, out.Failure.Retryable = appErr.Message(), appErr.Type(), !appErr.NonRetryable()
		out.Failure.HasRecord = appErr.HasDetails() && appErr.Details(&out.Result.ArchiveResult) == nil
	}
	return out
}

// settingsWatch is the job's settings as last read from the workflow, read
// again at most every interval (Options.SettingsPollInterval), and only
// when RunSteps is about to start a hook or waits for a slot.
type settingsWatch struct {
	reader   SettingsReader
	interval time.Duration
	mu       sync.Mutex
	current  model.Settings
	read     time.Time
}

func (w *settingsWatch) get(ctx context.Context, log *zap.Logger) model.Settings {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.read) < w.interval {
		return w.current
	}
	w.read = time.Now()
	st, err := w.reader.Settings(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("read the job's settings; keeping the last ones", zap.Error(err))
		}
		return w.current
	}
	w.current = st
	return st
}

func (w *settingsWatch) last() model.Settings {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}
