package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// hostSteps is input(concurrency) with the host_steps path on.
func hostSteps(concurrency int) SnapshotInput {
	in := input(concurrency)
	in.HostSteps = true
	return in
}

// activityLog records the activities the workflow started, by type and ID.
type activityLog struct {
	mu      sync.Mutex
	started []string // TYPE ID
	steps   chan struct{}
}

func watchActivities(h *harness) *activityLog {
	l := &activityLog{steps: make(chan struct{}, 16)}
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		l.mu.Lock()
		l.started = append(l.started, info.ActivityType.Name+" "+info.ActivityID)
		l.mu.Unlock()
		if info.ActivityType.Name == "RunSteps" {
			l.steps <- struct{}{}
		}
	})
	return l
}

func (l *activityLog) of(typ string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.started {
		if id, ok := strings.CutPrefix(s, typ+" "); ok {
			out = append(out, id)
		}
	}
	return out
}

// Consecutive foreground steps are one RunSteps activity; a step with a
// background hook runs the old way and ends the segment before it.
func TestHostStepsRunForegroundStepsInOneActivity(t *testing.T) {
	const a, b, c, bg, d = "on_Snapshot__10_a.sh", "on_Snapshot__11_b.sh", "on_Snapshot__20_c.sh", "on_Snapshot__30_bg.bg.sh", "on_Snapshot__40_d.sh"
	h := newHarness(t, plan(a, b, c, bg, d))
	overlap := newBarrier(2)
	h.runner.on(a, overlap.behaviour)
	h.runner.on(b, overlap.behaviour)
	bgStarted := make(chan struct{})
	h.runner.on(bg, func(ctx context.Context, req activities.RunRequest, s activities.Sink) (activities.Outcome, error) {
		close(bgStarted)
		return untilCancelled(ctx, req, s)
	})
	h.runner.on(d, func(ctx context.Context, req activities.RunRequest, s activities.Sink) (activities.Outcome, error) {
		select { // the seal comes after the background hook started
		case <-bgStarted:
		case <-time.After(barrierWait):
		}
		return succeed(ctx, req, s)
	})
	acts := watchActivities(h)

	st := h.run(hostSteps(2))

	assert.Equal(t, model.StateFinished, st.State)
	// The test environment resolves the seal's cancel of the background
	// hook at once, as a hook that was ready and reported nothing (see
	// TestBackgroundHookRunsAcrossStepsAndIsCancelledAtSeal).
	assert.Equal(t, activities.Counters{Total: 5, Succeeded: 4, Failed: 1}, st.Counters)
	assert.Equal(t, []string{testIdent + "/steps-0-2", testIdent + "/steps-4-9"}, acts.of("RunSteps"))
	assert.Equal(t, []string{testIdent + "/step-3/" + bg}, acts.of("RunHook"), "only the background hook is its own activity")
	ev := h.runner.snapshot()
	assert.Less(t, index(ev, b, "end"), index(ev, c, "start"), "step 2 waits for step 1")
	assert.Less(t, index(ev, c, "end"), index(ev, d, "start"))
	recorded := h.store.recorded()
	for _, n := range []string{a, b, c, d} {
		assert.Equal(t, model.StatusSucceeded, recorded[n], "%s's result is in Redis", n)
	}
	assert.Equal(t, model.StatusFailed, recorded[bg])
	assert.Len(t, h.store.results, 5, "every result is in Redis")
	assert.Subset(t, h.store.steps, []int{0, 1, 2, 4, 9}, "the host shows the segment's steps")
}

// A hook whose first attempt fails in a segment is retried as its own
// RunHook activity, its attempts counted on, after the retry policy's
// backoff; the next step waits for it.
func TestHostStepsRetryAFailedHookAloneAndKeepTheBarrier(t *testing.T) {
	const a, b, c = "on_Snapshot__10_a.sh", "on_Snapshot__11_b.sh", "on_Snapshot__20_c.sh"
	h := newHarness(t, plan(a, b, c))
	h.runner.on(a, failFirst(1))
	acts := watchActivities(h)
	var timers []time.Duration
	h.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	in := hostSteps(2)
	in.Retry.Default.InitialInterval = 7 * time.Second

	st := h.run(in)
	assert.Contains(t, timers, 7*time.Second, "a's second attempt waits the retry policy's backoff")

	assert.Equal(t, model.StateFinished, st.State)
	res := result(t, st, a)
	assert.Equal(t, model.StatusSucceeded, res.Status)
	assert.Equal(t, 2, res.Attempts)
	var attempts []int
	ev := h.runner.snapshot()
	for _, e := range ev {
		if e.hook == a && e.kind == "start" {
			attempts = append(attempts, e.attempt)
		}
	}
	assert.Equal(t, []int{1, 2}, attempts)
	assert.Equal(t, 1, count(ev, b, "start"), "b succeeded in the segment and is not run again")
	assert.Less(t, lastIndex(ev, a, "end"), index(ev, c, "start"), "step 2 waits for a's retry")
	assert.Equal(t, []string{testIdent + "/step-1/" + a}, acts.of("RunHook"))
	assert.Equal(t, []string{testIdent + "/steps-0-9", testIdent + "/steps-2-9"}, acts.of("RunSteps"))
	assert.Equal(t, activities.Counters{Total: 3, Succeeded: 3}, st.Counters)
}

// A hook that fails with a policy of one attempt fails at once.
func TestHostStepsFailedHookWithoutAttemptsLeftFails(t *testing.T) {
	const a, c = "on_Snapshot__10_a.sh", "on_Snapshot__20_c.sh"
	h := newHarness(t, plan(a, c))
	h.runner.on(a, transient)
	in := hostSteps(2)
	in.Retry.Default.MaximumAttempts = 1

	st := h.run(in)

	res := result(t, st, a)
	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Equal(t, 1, res.Attempts)
	assert.Contains(t, res.Error, "exit code 1")
	assert.Equal(t, 1, count(h.runner.snapshot(), a, "start"))
	assert.Equal(t, model.StatusSucceeded, result(t, st, c).Status)
	assert.Equal(t, activities.Counters{Total: 2, Succeeded: 1, Failed: 1}, st.Counters)
}

// A paused job (concurrency 0) starts no hook of a running segment until
// the settings change; RunSteps reads them from the workflow.
func TestHostStepsPauseAppliesDuringASegment(t *testing.T) {
	const a, b = "on_Snapshot__10_a.sh", "on_Snapshot__11_b.sh"
	h := newHarness(t, plan(a, b))
	overlap := newBarrier(2)
	h.runner.on(a, overlap.behaviour)
	h.runner.on(b, overlap.behaviour)
	acts := watchActivities(h)
	startsWhilePaused := -1
	go func() {
		select {
		case <-acts.steps:
		case <-time.After(barrierWait):
			return
		}
		// The segment has read the settings again and still waits.
		deadline := time.Now().Add(barrierWait)
		for h.store.settingsReads() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		startsWhilePaused = len(h.runner.snapshot())
		h.env.SignalWorkflow(SignalSetSettings, model.Settings{Concurrency: 2})
	}()

	st := h.run(hostSteps(0))

	assert.Equal(t, 0, startsWhilePaused, "no hook starts while concurrency is 0")
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, activities.Counters{Total: 2, Succeeded: 2}, st.Counters)
	assert.Equal(t, 2, h.runner.maxRunning, "the new concurrency applies within the segment")
	assert.Len(t, acts.of("RunSteps"), 1)
}

// An abort cancels the running segment: its hooks are stopped and no later
// step starts.
func TestHostStepsAbortDuringASegment(t *testing.T) {
	const a, b, next = "on_Snapshot__10_a.sh", "on_Snapshot__11_b.sh", "on_Snapshot__20_next.sh"
	h, st := abortWhileTwoHooksRun(t, hostSteps(2), a, b, next)

	assert.Equal(t, model.StateAborted, st.State)
	assert.Equal(t, "aborted: test (by tester)", st.Error)
	assertAborted(t, h, a, b, next)
}

// A segment whose heartbeat timed out on a live host is scheduled again
// and resumes from its last heartbeat: a hook that ended is not run again,
// one that was running is retried with its attempt counted, and the next
// step is a segment again.
func TestHostStepsSegmentTimeoutKeepsFinishedHooks(t *testing.T) {
	const a, b, c = "on_Snapshot__10_a.sh", "on_Snapshot__11_b.sh", "on_Snapshot__20_c.sh"
	h := newHarness(t, plan(a, b, c))
	done := activities.StepOutcome{Hook: hook(a).Key(), Result: activities.RunHookResult{Recorded: true, ArchiveResult: model.ArchiveResult{
		Plugin: hook(a).Plugin, Hook: a, Step: 1, Status: model.StatusSucceeded, Attempts: 1,
	}}}
	h.env.OnActivity(h.host.RunSteps, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.StepsInput) (activities.StepsResult, error) {
			if strings.Contains(activity.GetInfo(ctx).ActivityID, "#requeue-") || in.Steps[0] > 1 {
				return h.host.RunSteps(ctx, in)
			}
			p := activities.StepsProgress{Done: []activities.StepOutcome{done}, Running: []string{hook(b).Key()}}
			return activities.StepsResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil, p)
		})
	checks := &hostChecks{answer: func(int) (bool, error) { return true, nil }}
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(checks.hostLiveness)
	acts := watchActivities(h)

	st := h.run(hostSteps(2))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 1, st.Claims)
	ev := h.runner.snapshot()
	assert.Equal(t, 0, count(ev, a, "start"), "a ended in the segment")
	assert.Equal(t, model.StatusSucceeded, result(t, st, a).Status)
	assert.Equal(t, 2, result(t, st, b).Attempts, "b's interrupted attempt counts")
	assert.Equal(t, model.StatusSucceeded, result(t, st, c).Status)
	assert.Equal(t, []string{testIdent + "/step-1/" + b}, acts.of("RunHook"), "b is retried alone")
	segments := acts.of("RunSteps")
	assert.Contains(t, segments, testIdent+"/steps-0-9#requeue-2", "scheduled again on the live host")
	assert.Equal(t, testIdent+"/steps-2-9", segments[len(segments)-1], "the next step is a segment again")
	assert.Equal(t, activities.Counters{Total: 3, Succeeded: 3}, st.Counters)
}

// Without host_steps (and in every recorded input) each hook is its own
// activity.
func TestWithoutHostStepsEachHookIsAnActivity(t *testing.T) {
	const a, c = "on_Snapshot__10_a.sh", "on_Snapshot__20_c.sh"
	h := newHarness(t, plan(a, c))
	acts := watchActivities(h)

	st := h.run(input(2))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Empty(t, acts.of("RunSteps"))
	assert.Len(t, acts.of("RunHook"), 2)
}

func lastIndex(events []event, hook, kind string) int {
	i := -1
	for j, e := range events {
		if e.hook == hook && e.kind == kind {
			i = j
		}
	}
	return i
}

// Retry.backoff waits as Temporal's retry policy does: initial ×
// coefficient^(failed-1), capped at the maximum interval.
func TestRetryBackoff(t *testing.T) {
	r := Retry{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second, MaximumAttempts: 9}
	for spent, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 8: 5 * time.Second} {
		assert.Equal(t, want, r.backoff(spent), "after %d failed attempts", spent)
	}
}
