package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
)

// Host steps (SnapshotInput.HostSteps): consecutive steps whose hooks all
// run in the foreground form a segment, run on the claimed host by one
// RunSteps activity instead of one RunHook activity per hook and a
// workflow task per step change. A step that starts a background hook
// runs the old way and ends the segment before it. The workflow stays the
// only owner of the settings: RunSteps reads them through the status
// query (config hooks.settings_poll_interval), which costs no history event,
// unlike cancelling and re-planning the segment on every change. A hook
// whose first attempt fails ends the segment after its step; the workflow
// runs it again as RunHook activities with the attempt counted
// (AttemptsBefore), waits for it (the step barrier) and starts the next
// segment after that step. A segment that ends any other way (its
// heartbeat timed out on a live host more than once, its timeout) hands
// what is left of the claim to the per-hook path.

// segmentBackoffChange versions the wait before the RunHook attempt that
// follows a segment's failed attempt of a hook (Retry.backoff): histories
// from before it scheduled that attempt at once.
const segmentBackoffChange = "segment-retry-backoff"

// segmentAttempts are the attempts of one RunSteps activity; a retried
// attempt resumes from the heartbeat (hooks that ended are not run again).
const segmentAttempts = 2

// segmentSummaryBytes caps a segment activity's summary in the Web UI.
const segmentSummaryBytes = 400

// hostSteps reports whether this claim runs segments.
func (s *snapshot) hostSteps() bool {
	return s.in.HostSteps && s.in.since(InputV2) && !s.claim.perHook
}

// startsBackground reports whether launching h starts a background child.
func (s *snapshot) startsBackground(h activities.HookSpec) bool {
	if _, kept := s.keptResult(h); kept {
		return false
	}
	return h.Launch() == activities.LaunchBackground
}

// runSegment runs the segment that begins at step first, if there is one
// with a hook to run (ran). It returns the segment's last step and the
// first step with hooks left to run the old way (a failed hook's step, or
// where a failed segment stopped; -1 when none).
func (s *snapshot) runSegment(first int) (last, left int, ran bool) {
	last = first - 1
	for step := first; step <= 9 && !slices.ContainsFunc(s.plan.Step(step), s.startsBackground); step++ {
		last = step
	}
	var run []activities.HookSpec
	for step := first; step <= last; step++ {
		for _, h := range s.plan.Step(step) {
			if _, kept := s.keptResult(h); !kept && h.Launch() == activities.LaunchForeground {
				run = append(run, h)
			}
		}
	}
	if len(run) == 0 {
		return 0, 0, false
	}
	s.claim.step = first
	s.showLater()
	workflow.SetCurrentDetails(s.dctx, s.details())
	for step := first; step <= last; step++ {
		for _, h := range s.plan.Step(step) {
			if !slices.Contains(run, h) {
				s.launch(h) // a result the workflow decides: skipped, config error, kept
			}
		}
	}
	in := activities.StepsInput{Job: s.in.Job, Settings: s.settings.current, SequentialSteps: s.in.SequentialSteps, HooksTotal: len(s.plan.Hooks)}
	for step := first; step <= last; step++ {
		in.Steps = append(in.Steps, step)
	}
	for _, h := range run {
		in.Hooks = append(in.Hooks, activities.StepHook{Hook: h, Key: s.runKey(h), Limit: h.Timeout + h.Grace + s.in.Timing.StartMargin})
		s.claim.running[h.Key()] = true
	}
	id := fmt.Sprintf("%s/steps-%d-%d%s", s.in.Job.Ident, first, last, claimSuffix(s.claim.n))
	summary := segmentSummary(first, last, run)
	var res activities.StepsResult
	check := s.hostCheck()
	// A segment whose heartbeat timed out on a live host is scheduled
	// again, resuming from its last heartbeat, its wait bounded by the
	// host's lease: a host that just died is found lost as soon as its
	// record expires.
	beats := 0
	again := func(error) bool { beats++; return beats < segmentAttempts }
	err := check.untilStarted(s.runCtx, s.dctx, id, &res, again, func(r round) workflow.Future {
		if p, ok := lastProgress(r.after); ok {
			in.Resume = &p
		}
		opts := segmentOptions(id+requeueSuffix(r.n), check.hostQueue, summary, s.in.Timing, r.wait)
		return workflow.ExecuteActivity(workflow.WithActivityOptions(s.runCtx, opts), hostActs.RunSteps, in)
	})
	for _, h := range run {
		delete(s.claim.running, h.Key())
	}
	outcomes, stepRecorded := res.Outcomes, res.StepRecorded
	if err != nil {
		outcomes, stepRecorded = segmentOutcomes(err, in.Resume)
	}
	// A lost host loses the claim's results first (complete keeps none).
	s.noteHostLost(run[0], err)
	left = s.applyOutcomes(run, outcomes)
	switch {
	case err == nil, s.claim.hostLost, s.stopping():
	default:
		// Whatever ended the segment, the per-hook path finishes the claim:
		// the hooks it never started run from their first attempt.
		s.log().Warn("segment ended without a result; running the rest of the claim per hook", "segment", id, "error", err)
		s.claim.perHook = true
		for _, h := range run {
			if _, ok := s.claim.results[h.Key()]; !ok && (left < 0 || h.Step < left) {
				left = h.Step
			}
		}
	}
	if left >= 0 {
		s.claim.step = left // enterStep writes it
	} else {
		s.claim.step = last
		if !stepRecorded && !s.claim.hostLost {
			s.hash.step(activities.StepInput{Ident: s.in.Job.Ident, Step: last, HooksTotal: len(s.plan.Hooks)})
		}
	}
	return last, left, true
}

// applyOutcomes completes the hooks of run that ended with a final result
// and notes the retry of those whose first attempt failed retryably. It
// returns the first step of such a hook (RunSteps stopped after it, and
// the workflow runs what is left of it), -1 when there is none.
func (s *snapshot) applyOutcomes(run []activities.HookSpec, outcomes []activities.StepOutcome) int {
	left := -1
	for _, o := range outcomes {
		i := slices.IndexFunc(run, func(h activities.HookSpec) bool { return h.Key() == o.Hook })
		if i < 0 {
			continue
		}
		h := run[i]
		if _, done := s.claim.results[h.Key()]; done {
			continue
		}
		if o.Failure == nil {
			s.complete(h, o.Result)
			continue
		}
		stopsSegment := o.Failure.Retryable && !o.Failure.Cancelled
		if stopsSegment && (left < 0 || h.Step < left) {
			left = h.Step // RunSteps started no later step
		}
		if !stopsSegment || s.stopping() || s.in.Retry.For(h.Plugin).MaximumAttempts <= 1 {
			s.complete(h, activities.RunHookResult{ArchiveResult: s.failedResult(h, failureError(o))})
			continue
		}
		s.claim.attemptsBefore[h.Key()] = 1
	}
	return left
}

// failureError is the error a hook's own RunHook activity would have
// ended with, for the result mapping (resultFromError).
func failureError(o activities.StepOutcome) error {
	f := o.Failure
	var details []any
	if f.HasRecord {
		details = []any{o.Result.ArchiveResult}
	}
	if f.Cancelled {
		return temporal.NewCanceledError(details...)
	}
	return temporal.NewApplicationErrorWithOptions(f.Message, f.Type, temporal.ApplicationErrorOptions{NonRetryable: !f.Retryable, Details: details})
}

// lastProgress is the last heartbeat a segment's timeout carries.
func lastProgress(err error) (activities.StepsProgress, bool) {
	var te *temporal.TimeoutError
	var p activities.StepsProgress
	if errors.As(err, &te) && te.HasLastHeartbeatDetails() && te.LastHeartbeatDetails(&p) == nil {
		return p, true
	}
	return p, false
}

// segmentOutcomes are the outcomes a segment's error carries, and whether
// it wrote its step: the result so far of a cancelled segment, or the
// last heartbeat of one that timed out (else the one it resumed from);
// the hooks running then count as failed first attempts.
func segmentOutcomes(err error, resumed *activities.StepsProgress) ([]activities.StepOutcome, bool) {
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) && canceled.HasDetails() {
		var r activities.StepsResult
		if canceled.Details(&r) == nil {
			return r.Outcomes, r.StepRecorded
		}
	}
	p, ok := lastProgress(err)
	if !ok {
		if resumed == nil {
			return nil, false
		}
		p = *resumed
	}
	out := p.Done
	for _, key := range p.Running {
		out = append(out, activities.StepOutcome{Hook: key, Failure: &activities.StepFailure{
			Message: fmt.Sprintf("hook %s: the segment ended while it ran: %v", key, err), Type: activities.ErrTypeTransient,
			Retryable: true, Interrupted: true,
		}})
	}
	return out, false
}

// segmentOptions are the options of one RunSteps activity on the claimed
// host's queue. A segment may wait for a paused job, so its StartToClose
// is a background hook's; its heartbeat notices a dead worker, and each
// hook in it is bounded by its own limit (StepHook.Limit).
func segmentOptions(id, hostQueue, summary string, t Timing, wait time.Duration) workflow.ActivityOptions {
	o := hostTaskOptions(hostQueue, id, summary, wait, t.BackgroundMaxRun+t.StartMargin, segmentAttempts)
	o.HeartbeatTimeout = t.HeartbeatTimeout
	o.WaitForCancellation = true
	o.RetryPolicy.NonRetryableErrorTypes = append(slices.Clip(o.RetryPolicy.NonRetryableErrorTypes), heartbeatTimeoutType)
	return o
}

// segmentSummary names a segment's steps and hooks for the Web UI.
func segmentSummary(first, last int, run []activities.HookSpec) string {
	names := make([]string, 0, len(run))
	for _, h := range run {
		names = append(names, h.Name)
	}
	steps := fmt.Sprintf("step %d", first)
	if last > first {
		steps = fmt.Sprintf("steps %d-%d", first, last)
	}
	sum := steps + ": " + strings.Join(names, ", ")
	if len(sum) > segmentSummaryBytes {
		sum = fmt.Sprintf("%s… (%d hooks)", strings.ToValidUTF8(sum[:segmentSummaryBytes], ""), len(run))
	}
	return sum
}
