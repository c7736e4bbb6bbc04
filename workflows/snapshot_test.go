package workflows

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

func TestStepsRunInOrderAndHooksOfAStepOverlap(t *testing.T) {
	h := newHarness(t, plan(
		"on_Snapshot__00_a.sh",
		"on_Snapshot__10_b.sh", "on_Snapshot__11_c.sh", "on_Snapshot__12_d.sh",
		"on_Snapshot__20_e.sh",
	))
	b := newBarrier(3)
	for _, n := range []string{"on_Snapshot__10_b.sh", "on_Snapshot__11_c.sh", "on_Snapshot__12_d.sh"} {
		h.runner.on(n, b.behaviour)
	}

	st := h.run(input(3))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 9, st.CurrentStep)
	for _, hs := range st.Hooks {
		require.NotNil(t, hs.Result, hs.Hook)
		assert.Equal(t, model.StatusSucceeded, hs.Result.Status, "%s: %s", hs.Hook, hs.Result.Error)
		assert.Equal(t, 1, hs.Result.Attempts, hs.Hook)
	}
	ev := h.runner.snapshot()
	for _, n := range []string{"on_Snapshot__10_b.sh", "on_Snapshot__11_c.sh", "on_Snapshot__12_d.sh"} {
		assert.Less(t, index(ev, "on_Snapshot__00_a.sh", "end"), index(ev, n, "start"), "%s started before step 0 ended", n)
		assert.Less(t, index(ev, n, "end"), index(ev, "on_Snapshot__20_e.sh", "start"), "step 2 started before %s ended", n)
	}
	assert.Equal(t, 3, h.runner.maxRunning)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, h.store.steps)
	assert.Equal(t, []model.JobState{model.StateActive, model.StateActive}, h.store.states, "active at start and with the claimed host")
	require.Len(t, h.store.finishes, 1)
	assert.Equal(t, model.StateFinished, h.store.finishes[0].State)
	assert.Equal(t, activities.Counters{Total: 5, Succeeded: 5}, h.store.finishes[0].Counters)
	assert.Len(t, h.store.results, 5)
	assert.Equal(t, testHostQueue, st.HostQueue)
}

func TestConcurrencyBoundsForegroundHooks(t *testing.T) {
	h := newHarness(t, plan("on_Snapshot__10_a.sh", "on_Snapshot__11_b.sh", "on_Snapshot__12_c.sh", "on_Snapshot__13_d.sh", "on_Snapshot__14_e.sh"))
	b := newBarrier(2)
	h.runner.on("on_Snapshot__10_a.sh", b.behaviour)
	h.runner.on("on_Snapshot__11_b.sh", b.behaviour)

	st := h.run(input(2))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 2, h.runner.maxRunning, "two hooks at once, never more")
	assert.Len(t, h.runner.snapshot(), 10)
}

func TestSequentialSteps(t *testing.T) {
	tests := []struct {
		name       string
		sequential []int
		step       int
		wantMax    int
	}{
		{"step 5 listed (the configured default) is sequential", []int{5}, 5, 1},
		{"no list runs step 5 in parallel", nil, 5, 3},
		{"explicit empty list runs step 5 in parallel", []int{}, 5, 3},
		{"explicit step 3 is sequential", []int{3}, 3, 1},
		{"step not listed runs in parallel", []int{3}, 4, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := []string{}
			for i := range 3 {
				names = append(names, fmt.Sprintf("on_Snapshot__%d%d_h%d.sh", tt.step, i, i))
			}
			h := newHarness(t, plan(names...))
			if tt.wantMax > 1 {
				b := newBarrier(tt.wantMax)
				for _, n := range names {
					h.runner.on(n, b.behaviour)
				}
			}
			in := input(4)
			in.SequentialSteps = tt.sequential

			st := h.run(in)

			assert.Equal(t, model.StateFinished, st.State)
			assert.Equal(t, tt.wantMax, h.runner.maxRunning)
			for _, n := range names {
				assert.Equal(t, model.StatusSucceeded, result(t, st, n).Status)
			}
			if tt.wantMax == 1 {
				var order []string
				for _, e := range h.runner.snapshot() {
					order = append(order, e.kind+" "+e.hook)
				}
				assert.Equal(t, []string{"start " + names[0], "end " + names[0], "start " + names[1], "end " + names[1], "start " + names[2], "end " + names[2]}, order, "one at a time, in filename order")
			}
		})
	}
}

func TestBackgroundHookRunsAcrossStepsAndIsCancelledAtSeal(t *testing.T) {
	const bg = "on_Snapshot__20_watch.bg.sh"
	h := newHarness(t, plan(bg, "on_Snapshot__21_a.sh", "on_Snapshot__30_b.sh", "on_Snapshot__60_c.sh", "on_Snapshot__90_d.sh"))
	// The child's activity starts asynchronously: nothing in the workflow
	// waits for it, so on a loaded machine the foreground steps may get
	// ahead of it. Step 6's hook waits until it runs, which makes "still
	// running during step 6" a fact the test can check.
	bgStarted := make(chan struct{})
	h.runner.on(bg, func(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
		close(bgStarted)
		return untilCancelled(ctx, req, sink)
	})
	h.runner.on("on_Snapshot__60_c.sh", func(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
		select {
		case <-bgStarted:
			return succeed(ctx, req, sink)
		case <-time.After(time.Minute):
			return activities.Outcome{}, fmt.Errorf("background hook %s was not running during step 6", bg)
		}
	})

	st := h.run(input(2))

	assert.Equal(t, model.StateFinished, st.State)
	ev := h.runner.snapshot()
	assert.Less(t, index(ev, bg, "start"), index(ev, "on_Snapshot__60_c.sh", "end"), "background hook running during step 6")
	assert.Equal(t, -1, index(ev, bg, "end"), "background hook never ended on its own")
	for _, n := range []string{"on_Snapshot__21_a.sh", "on_Snapshot__30_b.sh", "on_Snapshot__60_c.sh", "on_Snapshot__90_d.sh"} {
		assert.Equal(t, model.StatusSucceeded, result(t, st, n).Status)
	}
	// The seal cancels the child after every foreground hook ended. The
	// test environment resolves a cancelled activity at once, without the
	// result a real server delivers after the runner's SIGTERM (the engine
	// tests cover that side), so to the workflow this is an activity that
	// never reported; the hook said it was ready, so it ran: failed, with
	// no final result (sealedBetweenAttempts), never "not started".
	res := result(t, st, bg)
	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Equal(t, SealedBetweenAttempts, res.Error)
	assert.True(t, res.Background)
	assert.Equal(t, 2, res.Step)
	assert.Contains(t, h.store.states, model.StateDraining, "draining while the background hook is stopped")
	assert.Len(t, h.store.results, 5, "the background hook's result is recorded too")
}

func TestHookOutcomes(t *testing.T) {
	const (
		flaky     = "on_Snapshot__10_flaky.sh"
		always    = "on_Snapshot__11_always.sh"
		soft      = "on_Snapshot__12_soft.sh"
		badConfig = "on_Snapshot__13_badcfg.sh"
		disabled  = "on_Snapshot__14_off.sh"
		planError = "on_Snapshot__15_planerr.sh"
		later     = "on_Snapshot__90_later.sh"
	)
	p := plan(flaky, always, soft, badConfig, disabled, planError, later)
	p.Hooks[4].Enabled = false
	p.Hooks[5].ConfigError = "WGET_TIMEOUT=abc: must be an integer"
	h := newHarness(t, p)
	h.runner.on(flaky, failFirst(2))
	h.runner.on(always, transient)
	h.runner.on(soft, softFail)
	h.runner.on(badConfig, func(context.Context, activities.RunRequest, activities.Sink) (activities.Outcome, error) {
		return activities.Outcome{}, fmt.Errorf("plugin badcfg: key X: %w", activities.ErrConfig)
	})

	st := h.run(input(4))

	tests := []struct {
		hook         string
		wantStatus   model.Status
		wantAttempts int
		wantRuns     int
		wantError    string
	}{
		{flaky, model.StatusSucceeded, 3, 3, ""},
		{always, model.StatusFailed, 3, 3, "exit code 1"},
		{soft, model.StatusFailed, 1, 1, "no title found"},
		{badConfig, model.StatusFailed, 1, 1, "plugin badcfg: key X"},
		{disabled, model.StatusSkipped, 0, 0, ""},
		{planError, model.StatusFailed, 0, 0, "WGET_TIMEOUT=abc"},
		{later, model.StatusSucceeded, 1, 1, ""},
	}
	ev := h.runner.snapshot()
	for _, tt := range tests {
		t.Run(tt.hook, func(t *testing.T) {
			res := result(t, st, tt.hook)
			assert.Equal(t, tt.wantStatus, res.Status, res.Error)
			assert.Equal(t, tt.wantAttempts, res.Attempts)
			assert.Equal(t, tt.wantRuns, count(ev, tt.hook, "start"))
			if tt.wantError == "" {
				assert.Empty(t, res.Error)
			} else {
				assert.Contains(t, res.Error, tt.wantError)
			}
		})
	}
	assert.Equal(t, model.StateFinished, st.State, "single failed hooks do not fail the job")
	assert.Equal(t, activities.Counters{Total: 7, Succeeded: 2, Failed: 4, Skipped: 1}, st.Counters)
	assert.Equal(t, st.Counters, h.store.finishes[0].Counters)
}

// abortWhileTwoHooksRun runs a plan of a, b (one step) and next (the step
// after) and aborts the job once a and b both run.
func abortWhileTwoHooksRun(t *testing.T, in SnapshotInput, a, b, next string) (*harness, Status) {
	h := newHarness(t, plan(a, b, next))
	started := newBarrier(2)
	for _, n := range []string{a, b} {
		h.runner.on(n, func(ctx context.Context, req activities.RunRequest, s activities.Sink) (activities.Outcome, error) {
			_, _ = started.behaviour(ctx, req, s)
			return untilCancelled(ctx, req, s)
		})
	}
	go func() {
		// Abort once both hooks run: the signal goes through the test
		// environment's callback channel, safe from another goroutine.
		select {
		case <-started.all:
			h.env.SignalWorkflow(SignalAbort, AbortRequest{Reason: "test", By: "tester"})
		case <-time.After(barrierWait):
		}
	}()
	return h, h.run(in)
}

func TestAbortMidStep(t *testing.T) {
	const a, b, next = "on_Snapshot__10_a.sh", "on_Snapshot__11_b.sh", "on_Snapshot__20_next.sh"
	h, st := abortWhileTwoHooksRun(t, input(2), a, b, next)

	assert.Equal(t, model.StateAborted, st.State)
	assert.Equal(t, "aborted: test (by tester)", st.Error)
	for _, n := range []string{a, b} {
		res := result(t, st, n)
		assert.Equal(t, model.StatusFailed, res.Status)
		assert.Contains(t, res.Error, "aborted: test")
	}
	assertAborted(t, h, a, b, next)
}

// assertAborted checks the end of abortWhileTwoHooksRun.
func assertAborted(t *testing.T, h *harness, a, b, next string) {
	t.Helper()
	assert.Equal(t, 0, count(h.runner.snapshot(), next, "start"), "no hook starts after an abort")
	require.Len(t, h.store.finishes, 1, "jobs_aborted is bumped by exactly one finish")
	assert.Equal(t, model.StateAborted, h.store.finishes[0].State)
	require.Eventually(t, func() bool {
		ev := h.runner.snapshot()
		return count(ev, a, "cancelled") == 1 && count(ev, b, "cancelled") == 1
	}, barrierWait, 10*time.Millisecond, "running hooks are cancelled (SIGTERM)")
}

func TestWorkflowCancelRequestAbortsTheJob(t *testing.T) {
	const a = "on_Snapshot__10_a.sh"
	h := newHarness(t, plan(a))
	started := make(chan struct{})
	h.runner.on(a, func(ctx context.Context, req activities.RunRequest, s activities.Sink) (activities.Outcome, error) {
		close(started)
		return untilCancelled(ctx, req, s)
	})
	go func() {
		select {
		case <-started:
			h.env.CancelWorkflow()
		case <-time.After(barrierWait):
		}
	}()

	st := h.run(input(1))

	assert.Equal(t, model.StateAborted, st.State)
	assert.Equal(t, reasonCancelled, st.Error)
}

func TestSettingsChangeMidRun(t *testing.T) {
	names := []string{"on_Snapshot__10_a.sh", "on_Snapshot__11_b.sh", "on_Snapshot__12_c.sh", "on_Snapshot__13_d.sh"}
	h := newHarness(t, plan(names...))
	b := newBarrier(3)
	for _, n := range names[:3] {
		h.runner.on(n, b.behaviour)
	}
	var rejected, completed error
	version := 0
	// Hook a holds its slot until b and c run: that happens only when the
	// raised concurrency reaches the running workflow.
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(UpdateSetSettings, "bad", &testsuite.TestUpdateCallback{
			OnAccept:   func() { t.Error("invalid settings accepted") },
			OnReject:   func(err error) { rejected = err },
			OnComplete: func(any, error) {},
		}, model.Settings{Concurrency: 3, DelayMinMS: 500, DelayMaxMS: 100})
		h.env.UpdateWorkflow(UpdateSetSettings, "good", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { t.Errorf("valid settings rejected: %v", err) },
			OnComplete: func(v any, err error) {
				completed = err
				if n, ok := v.(int); ok {
					version = n
				}
			},
		}, model.Settings{Concurrency: 3, UserAgent: "ua/2", Ignores: []string{`\.css$`}})
	}, 100*time.Millisecond)

	st := h.run(input(1))

	assert.Equal(t, model.StateFinished, st.State)
	require.Error(t, rejected)
	assert.Contains(t, rejected.Error(), "delay_max 100 ms: must be >= delay_min (500 ms)")
	require.NoError(t, completed)
	assert.Equal(t, 1, version)
	assert.Equal(t, 3, h.runner.maxRunning)
	for _, n := range names {
		assert.Equal(t, model.StatusSucceeded, result(t, st, n).Status, n)
	}
	assert.Equal(t, "ua/1", h.runner.settings[names[0]].UserAgent, "a started before the change")
	assert.Equal(t, "ua/2", h.runner.settings[names[1]].UserAgent, "b started after it")
	require.Len(t, h.store.settings, 1)
	assert.Equal(t, 1, h.store.settings[0].Version)
	assert.Equal(t, []string{`\.css$`}, h.store.settings[0].Settings.Ignores)
	assert.Equal(t, 1, st.SettingsVersion)
}

// TestBotSettingsNeverGoBack: two pipelines may read the bot's hash at
// settings_age 4 and 5 and reach the workflow in the other order; the
// older read is refused (update and signal alike), so the job keeps the
// bot's newest settings.
func TestBotSettingsNeverGoBack(t *testing.T) {
	names := []string{"on_Snapshot__00_a.sh", "on_Snapshot__10_b.sh"}
	h := newHarness(t, plan(names...))
	newer := model.Settings{Concurrency: 5, Ignores: []string{`\.gif$`, `^https?://ads\.`}, BotOwned: true, BotAge: 5}
	older := model.Settings{Concurrency: 5, Ignores: []string{`\.gif$`}, BotOwned: true, BotAge: 4}
	var rejected error
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(UpdateSetSettings, "archivebot-settings-5", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("newer settings rejected: %v", err) },
			OnComplete: func(any, error) {},
		}, newer)
		h.env.UpdateWorkflow(UpdateSetSettings, "archivebot-settings-4", &testsuite.TestUpdateCallback{
			OnAccept:   func() { t.Error("older bot settings accepted") },
			OnReject:   func(err error) { rejected = err },
			OnComplete: func(any, error) {},
		}, older)
		h.env.SignalWorkflow(SignalSetSettings, older)
	}, time.Hour)

	st := h.run(input(0))

	assert.Equal(t, model.StateFinished, st.State)
	require.Error(t, rejected)
	assert.Contains(t, rejected.Error(), "the bot's settings at settings_age 4 are older than the job's (settings_age 5)")
	assert.Equal(t, newer, st.Settings, "the job keeps the bot's newest settings")
	assert.Equal(t, 1, st.SettingsVersion, "only the newer settings were applied")
	assert.False(t, older.OlderThan(model.Settings{}), "settings without an age never make a read older")
	assert.False(t, model.Settings{Concurrency: 1}.OlderThan(newer), "the CLI's settings are never older")
}

func TestConcurrencyZeroPausesUntilSettingsChange(t *testing.T) {
	names := []string{"on_Snapshot__00_a.sh", "on_Snapshot__10_b.sh"}
	h := newHarness(t, plan(names...))
	var paused Status
	startsWhilePaused := -1
	h.env.RegisterDelayedCallback(func() {
		paused = h.query()
		startsWhilePaused = len(h.runner.snapshot())
		h.env.SignalWorkflow(SignalSetSettings, model.Settings{Concurrency: 2})
	}, time.Hour)

	st := h.run(input(0))

	assert.Equal(t, 0, startsWhilePaused, "no hook starts while concurrency is 0")
	assert.Equal(t, model.StateActive, paused.State)
	for _, hs := range paused.Hooks {
		assert.Equal(t, PhasePending, hs.Phase)
	}
	assert.Equal(t, model.StateFinished, st.State)
	for _, n := range names {
		assert.Equal(t, model.StatusSucceeded, result(t, st, n).Status)
	}
	assert.Equal(t, 2, st.Settings.Concurrency)
}

// TestCrawlStartPageFollowsSettingsWithoutWritingThem: the crawl's start
// page (a snapshot in the crawl-page role) paused at 0 resumes on the
// settings the crawl passes on, and writes none of them to the job hash:
// the crawl owns it and wrote them already.
func TestCrawlStartPageFollowsSettingsWithoutWritingThem(t *testing.T) {
	names := []string{"on_Snapshot__00_a.sh", "on_Snapshot__10_b.sh"}
	h := newHarness(t, plan(names...))
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalSetSettings, model.Settings{Concurrency: 2})
	}, time.Hour)
	in := input(0)
	in.Job.CrawlPage = true
	st := h.run(in)
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 2, st.Settings.Concurrency)
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	assert.Empty(t, h.store.settings, "no settings written by the start page")
}

func TestHostLossReclaimsFromStepZero(t *testing.T) {
	const first, lost, last = "on_Snapshot__00_a.sh", "on_Snapshot__30_b.sh", "on_Snapshot__90_c.sh"
	h := newHarness(t, plan(first, lost, last))
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunHookInput) (activities.RunHookResult, error) {
			if in.Hook.Name == lost && !strings.Contains(activity.GetInfo(ctx).ActivityID, "#claim-") {
				return activities.RunHookResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			return h.host.RunHook(ctx, in)
		})

	st := h.run(input(2))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 2, st.Claims)
	assert.Equal(t, activities.Counters{Total: 3, Succeeded: 3}, st.Counters, "counters count each hook once")
	assert.Equal(t, 2, count(h.runner.snapshot(), first, "start"), "step 0 runs again on the new host")
	assert.Equal(t, 1, count(h.runner.snapshot(), last, "start"))
	assert.Len(t, h.store.results, 3, "Redis counts each hook once: the re-run of step 0 repeats its key")
	assert.Equal(t, activities.Counters{Total: 3, Succeeded: 3}, h.store.finishes[0].Counters)
}

func TestHostLostTooOftenFailsTheJob(t *testing.T) {
	const a = "on_Snapshot__00_a.sh"
	h := newHarness(t, plan(a))
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RunHookInput) (activities.RunHookResult, error) {
			return activities.RunHookResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		})
	in := input(1)
	in.Timing.MaxClaims = 2

	st := h.run(in)

	assert.Equal(t, model.StateFailed, st.State)
	assert.Contains(t, st.Error, "host lost 2 times")
	assert.Equal(t, 2, st.Claims)
}

func TestJobStates(t *testing.T) {
	tests := []struct {
		name      string
		plan      activities.Plan
		behaviour behaviour
		maxDur    time.Duration
		wantState model.JobState
		wantError string
	}{
		{"no hooks", plan(), nil, 0, model.StateFailed, "no hooks discovered"},
		{"every hook failed", plan("on_Snapshot__10_a.sh", "on_Snapshot__20_b.sh"), softFail, 0, model.StateFailed, "every hook failed"},
		{"some hooks failed", plan("on_Snapshot__10_a.sh"), succeed, 0, model.StateFinished, ""},
		{"max duration exceeded", plan("on_Snapshot__10_a.sh"), untilCancelled, 200 * time.Millisecond, model.StateFailed, reasonDeadline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.plan)
			for _, hs := range tt.plan.Hooks {
				if tt.behaviour != nil {
					h.runner.on(hs.Name, tt.behaviour)
				}
			}
			in := input(2)
			in.Timing.MaxDuration = tt.maxDur

			st := h.run(in)

			assert.Equal(t, tt.wantState, st.State)
			assert.Equal(t, tt.wantError, st.Error)
			require.Len(t, h.store.finishes, 1)
			assert.Equal(t, tt.wantState, h.store.finishes[0].State)
			assert.Equal(t, tt.wantError, h.store.finishes[0].Error)
		})
	}
}

func TestInvalidInputFailsTheWorkflow(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*SnapshotInput)
		want   string
	}{
		{"no ident", func(in *SnapshotInput) { in.Job.Ident = "" }, "job ident: must not be empty"},
		{"no url", func(in *SnapshotInput) { in.Job.URL = "" }, "url must not be empty"},
		{"no task queue", func(in *SnapshotInput) { in.TaskQueue = "" }, "task_queue must not be empty"},
		{"negative concurrency", func(in *SnapshotInput) { in.Settings.Concurrency = -1 }, "concurrency -1: must be 0..1000"},
		{"bad sequential step", func(in *SnapshotInput) { in.SequentialSteps = []int{10} }, "sequential step 10: must be 0..9"},
		{"negative step attribute delay", func(in *SnapshotInput) { in.Timing.StepAttributeDelay = -time.Second }, "timing step_attribute_delay -1s: must be >= 0"},
		{"missing start margin", func(in *SnapshotInput) { in.Timing.StartMargin = 0 }, "timing start_margin 0s: must be > 0"},
		{"missing heartbeat timeout", func(in *SnapshotInput) { in.Timing.HeartbeatTimeout = 0 }, "timing heartbeat_timeout 0s: must be > 0"},
		{"missing max claims", func(in *SnapshotInput) { in.Timing.MaxClaims = 0 }, "timing max_claims 0: must be >= 1"},
		{"missing retry", func(in *SnapshotInput) { in.Retry.Default = Retry{} }, "default retry: initial_interval 0s: must be > 0"},
		{"missing snapshot id", func(in *SnapshotInput) { in.Job.SnapshotID = "" }, "snapshot_id must not be empty"},
		{"empty ignore pattern", func(in *SnapshotInput) { in.Settings.Ignores = []string{""} }, `ignore pattern "": must not be empty`},
		{"bad plugin retry", func(in *SnapshotInput) {
			in.Retry.PerPlugin = map[string]Retry{"wget": {InitialInterval: time.Second, BackoffCoefficient: 0.5, MaximumInterval: time.Second, MaximumAttempts: 1}}
		}, "retry of plugin wget: backoff_coefficient 0.5: must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, plan())
			in := input(1)
			tt.mutate(&in)
			h.env.ExecuteWorkflow(SnapshotWorkflow, in)
			require.True(t, h.env.IsWorkflowCompleted())
			err := h.env.GetWorkflowError()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestPerPluginRetryOverride(t *testing.T) {
	const a, b = "on_Snapshot__10_a.sh", "on_Snapshot__11_b.sh"
	h := newHarness(t, plan(a, b))
	h.runner.on(a, transient)
	h.runner.on(b, transient)
	in := input(2)
	in.Retry.PerPlugin = map[string]Retry{"a": {InitialInterval: time.Second, BackoffCoefficient: 1, MaximumInterval: time.Second, MaximumAttempts: 5}}

	st := h.run(in)

	assert.Equal(t, 5, result(t, st, a).Attempts)
	assert.Equal(t, 5, count(h.runner.snapshot(), a, "start"))
	assert.Equal(t, 3, result(t, st, b).Attempts)
	assert.Equal(t, 3, count(h.runner.snapshot(), b, "start"))
}

// An input recorded before inputs carried every value (Version 0) runs with
// the values the workflow filled in then, so its history replays; a
// complete input is left as it is.
func TestRecordedInputKeepsItsValues(t *testing.T) {
	old := SnapshotInput{Job: activities.Job{Ident: "abc", URL: testURL}, TaskQueue: testQueue,
		Timing: Timing{HeartbeatTimeout: 5 * time.Second, HostScheduleToStart: 30 * time.Second}}
	got := old.recorded()
	assert.Equal(t, InputComplete, got.Version)
	assert.Equal(t, []int{5}, got.SequentialSteps)
	assert.Equal(t, "abc", got.Job.SnapshotID)
	assert.Equal(t, Timing{HeartbeatTimeout: 5 * time.Second, StartMargin: 30 * time.Second, HostScheduleToStart: 30 * time.Second,
		BackgroundMaxRun: 24 * time.Hour, MaxClaims: 3}, got.Timing)

	in := input(1)
	in.SequentialSteps = nil
	assert.Equal(t, in, in.recorded(), "a complete input is not changed: no list means no sequential step")
}

// The seal can reach a background hook before its activity started: it is
// recorded skipped with the reason, never succeeded and never failed with
// no attempt.
func TestBackgroundHookNotStartedBeforeSealIsSkipped(t *testing.T) {
	const bg, fg = "on_Snapshot__90_late.bg.sh", "on_Snapshot__10_a.sh"
	h := newHarness(t, plan(fg, bg))
	// The background hook is launched last and sealed at once; its
	// activity never reports (an hour is never reached: the seal comes
	// first). The other hook runs for real.
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.MatchedBy(func(in activities.RunHookInput) bool {
		return in.Hook.Name == bg
	})).After(time.Hour).Return(activities.RunHookResult{}, nil)
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(h.host.RunHook)

	st := h.run(input(1))

	assert.Equal(t, model.StateFinished, st.State)
	res := result(t, st, bg)
	assert.Equal(t, model.StatusSkipped, res.Status)
	assert.Equal(t, activities.NotStartedBeforeSeal, res.OutputStr)
	assert.Empty(t, res.Error)
	assert.True(t, res.Background)
	assert.Equal(t, 1, st.Counters.Skipped)
	assert.Zero(t, st.Counters.Failed)
	assert.Equal(t, model.StatusSkipped, h.store.recorded()[bg], "Redis counts it skipped")
}

// A background hook that started (it said it was ready), ended its first
// attempt transiently and was sealed while its retry policy waited to run
// it again did run: failed, saying so, not "not started before the seal".
func TestBackgroundHookSealedBetweenAttemptsFailed(t *testing.T) {
	const bg, fg = "on_Snapshot__60_fetch.bg.sh", "on_Snapshot__70_b.sh"
	h := newHarness(t, plan(bg, fg))
	h.runner.on(bg, transient)
	in := input(1)
	in.Retry.PerPlugin = map[string]Retry{"fetch": {InitialInterval: time.Hour, BackoffCoefficient: 2, MaximumInterval: time.Hour, MaximumAttempts: 3}}

	st := h.run(in)

	assert.Equal(t, model.StateFinished, st.State)
	res := result(t, st, bg)
	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Equal(t, SealedBetweenAttempts, res.Error)
	assert.Empty(t, res.OutputStr)
	assert.Equal(t, 1, res.Attempts)
	assert.Equal(t, 1, count(h.runner.snapshot(), bg, "start"), "one attempt, then the seal")
	assert.Equal(t, 1, st.Counters.Failed)
	assert.Zero(t, st.Counters.Skipped)
	assert.Equal(t, model.StatusFailed, h.store.recorded()[bg], "Redis counts it failed")
}

// A set_settings update or signal that sends an empty ignore pattern (which
// the starter never does) is refused by the workflow's validator, so the
// Redis store is never asked to write it and every later write of the job
// goes through: a valid change after it is applied and the job finishes.
func TestEmptyIgnorePatternIsRefusedAndLaterWritesGoThrough(t *testing.T) {
	names := []string{"on_Snapshot__00_a.sh", "on_Snapshot__10_b.sh"}
	h := newHarness(t, plan(names...))
	var rejected error
	version := 0
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalSetSettings, model.Settings{Concurrency: 1, Ignores: []string{""}})
		h.env.UpdateWorkflow(UpdateSetSettings, "empty", &testsuite.TestUpdateCallback{
			OnAccept:   func() { t.Error("an empty ignore pattern was accepted") },
			OnReject:   func(err error) { rejected = err },
			OnComplete: func(any, error) {},
		}, model.Settings{Concurrency: 1, Ignores: []string{`\.css$`, ""}})
		h.env.UpdateWorkflow(UpdateSetSettings, "good", &testsuite.TestUpdateCallback{
			OnAccept:   func() {},
			OnReject:   func(err error) { t.Errorf("valid settings rejected: %v", err) },
			OnComplete: func(v any, err error) { version, _ = v.(int) },
		}, model.Settings{Concurrency: 2, Ignores: []string{`\.css$`}})
	}, time.Hour)

	st := h.run(input(0))

	require.Error(t, rejected)
	assert.Contains(t, rejected.Error(), `ignore pattern "": must not be empty`)
	assert.Equal(t, 1, version, "the valid change is the first settings version")
	require.Len(t, h.store.settings, 1, "nothing invalid reached the store")
	assert.Equal(t, []string{`\.css$`}, h.store.settings[0].Settings.Ignores)
	assert.Equal(t, model.StateFinished, st.State)
	require.Len(t, h.store.finishes, 1, "the final write went through")
	for _, n := range names {
		assert.Equal(t, model.StatusSucceeded, result(t, st, n).Status)
	}
}

// InputV3: no hook is launched after a background hook before that one is
// ready (abx-dl's launch order): navigate starts after the browser and
// the tab said so, never in between; a background hook that ends without
// printing lets the next hook start at its end.
func TestHooksAreLaunchedAfterTheBackgroundHooksBeforeThemAreReady(t *testing.T) {
	const launch, tab, quiet, navigate = "on_Snapshot__00_launch.bg.sh", "on_Snapshot__01_tab.bg.sh", "on_Snapshot__02_quiet.bg.sh", "on_Snapshot__30_navigate.sh"
	h := newHarness(t, plan(launch, tab, quiet, navigate))
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	daemon := func(name string) behaviour {
		return func(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
			note("start " + name)
			time.Sleep(100 * time.Millisecond) // the hook's own start-up before it prints
			note("ready " + name)
			req.OnReady()
			return untilCancelled(ctx, req, sink)
		}
	}
	h.runner.silent[launch], h.runner.silent[tab], h.runner.silent[quiet] = true, true, true
	h.runner.on(launch, daemon("launch"))
	h.runner.on(tab, daemon("tab"))
	h.runner.on(quiet, func(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
		note("start quiet")
		time.Sleep(100 * time.Millisecond)
		note("end quiet")
		return succeed(ctx, req, sink)
	})
	h.runner.on(navigate, func(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
		note("start navigate")
		return succeed(ctx, req, sink)
	})

	st := h.run(input(4))

	assert.Equal(t, model.StateFinished, st.State)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"start launch", "ready launch", "start tab", "ready tab", "start quiet", "end quiet", "start navigate"}, order)
	for _, name := range []string{quiet, navigate} {
		assert.Equal(t, model.StatusSucceeded, result(t, st, name).Status, name)
	}
}
