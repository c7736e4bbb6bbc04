package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// What InputV2 changes: the job's end is the workflow's, the seal writes
// the index on the host, a hook's results are written once, and a
// heartbeat timeout asks at once whether the host is alive.

func TestFailedJobFailsItsWorkflowWithItsStatus(t *testing.T) {
	h := newHarness(t, plan("on_Snapshot__10_a.sh", "on_Snapshot__20_b.sh"))
	h.runner.on("on_Snapshot__10_a.sh", softFail)
	h.runner.on("on_Snapshot__20_b.sh", softFail)

	st := h.run(input(2))

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, h.endErr, &appErr, "a failed job fails its workflow")
	assert.Equal(t, ErrTypeJobFailed, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, appErr.Error(), "job "+testIdent+" failed: every hook failed")
	assert.Equal(t, model.StateFailed, st.State, "the Status travels as the error's details")
	assert.Equal(t, "every hook failed", st.Error)
	assert.Len(t, st.Hooks, 2)
	assert.Equal(t, st, h.query(), "the status query says the same")
}

func TestAbortedJobCancelsItsWorkflowWithItsStatus(t *testing.T) {
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
			h.env.SignalWorkflow(SignalAbort, AbortRequest{Reason: "enough"})
		case <-time.After(barrierWait):
		}
	}()

	st := h.run(input(1))

	var canceled *temporal.CanceledError
	require.ErrorAs(t, h.endErr, &canceled, "an aborted job cancels its workflow")
	assert.Equal(t, model.StateAborted, st.State)
	assert.Equal(t, "aborted: enough", st.Error)
}

func TestFinishedJobCompletesItsWorkflow(t *testing.T) {
	h := newHarness(t, plan("on_Snapshot__10_a.sh"))
	st := h.run(input(1))
	assert.NoError(t, h.endErr)
	assert.Equal(t, model.StateFinished, st.State)
}

func TestJobBeforeInputV2CompletesItsWorkflowWhenItFails(t *testing.T) {
	h := newHarness(t, plan("on_Snapshot__10_a.sh"))
	h.runner.on("on_Snapshot__10_a.sh", softFail)
	in := input(1)
	in.Version = InputComplete

	st := h.run(in)

	assert.NoError(t, h.endErr, "histories of version 1 end as they were recorded")
	assert.Equal(t, model.StateFailed, st.State)
	assert.Empty(t, h.sealer.all(), "no seal activity before InputV2")
}

func TestEndStatusReadsOnlyAJobsEnd(t *testing.T) {
	st := Status{Ident: "x", State: model.StateFailed, Error: "boom"}
	got, ok := EndStatus(endError(st))
	assert.True(t, ok)
	assert.Equal(t, st, got)
	_, ok = EndStatus(errors.New("connection refused"))
	assert.False(t, ok)
	_, ok = EndStatus(temporal.NewApplicationError("other", "Other", st))
	assert.False(t, ok, "another error type's details are not a Status")
	_, ok = EndStatus(nil)
	assert.False(t, ok)
	assert.NoError(t, endError(Status{State: model.StateFinished}))
}

// RunHook writes the results it returns; the workflow writes only the
// ones RunHook could not (here: a disabled hook's, which never ran).
func TestRecordedResultsAreWrittenOnce(t *testing.T) {
	p := plan("on_Snapshot__10_a.sh", "on_Snapshot__20_b.sh", "on_Snapshot__30_off.sh")
	p.Hooks[2].Enabled = false
	h := newHarness(t, p)

	st := h.run(input(2))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Len(t, h.store.results, 3, "every hook counted")
	assert.Equal(t, 3, h.store.calls, "one write per result: RunHook's, or the workflow's for the hook that never ran")
}

// When RunHook cannot write its result (Redis down), the workflow does,
// with the same key: the result is counted once either way.
func TestWorkflowWritesWhatRunHookCouldNot(t *testing.T) {
	const a = "on_Snapshot__10_a.sh"
	h := newHarness(t, plan(a))
	h.store.failResults = 1 // RunHook's write fails

	st := h.run(input(1))

	assert.Equal(t, model.StatusSucceeded, result(t, st, a).Status)
	assert.Len(t, h.store.results, 1)
	assert.Equal(t, 2, h.store.calls, "RunHook's failed write, then the workflow's")
}

func TestSealWritesTheIndexWithEveryFinalResultOnTheHost(t *testing.T) {
	const bg, a, b = "on_Snapshot__06_wget.bg.sh", "on_Snapshot__10_a.sh", "on_Snapshot__50_b.sh"
	h := newHarness(t, plan(bg, a, b))
	h.runner.on(bg, untilCancelled)
	h.runner.on(b, softFail)
	var sealedOn string
	h.env.OnActivity(h.host.SealSnapshot, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.SealInput) (activities.SealReport, error) {
			sealedOn = activity.GetInfo(ctx).TaskQueue
			return h.host.SealSnapshot(ctx, in)
		})

	st := h.run(input(2))

	assert.Equal(t, model.StateFinished, st.State)
	seals := h.sealer.all()
	require.Len(t, seals, 1)
	assert.Equal(t, testHostQueue, sealedOn, "the seal runs on the claimed host")
	s := seals[0]
	assert.Equal(t, testIdent, s.Job.Ident)
	assert.Equal(t, model.StateFinished, s.State)
	require.Len(t, s.Results, 3, "one final result per hook, in plan order")
	// The background hook's result comes from its stop at the seal (the
	// test environment resolves it as never started; the e2e test
	// TestSealIndexListsTheBackgroundWget sees a real one succeed).
	assert.Equal(t, bg, s.Results[0].Hook)
	assert.True(t, s.Results[0].Background)
	assert.Equal(t, model.StatusFailed, s.Results[2].Status)
	for i, r := range s.Results {
		assert.Equal(t, result(t, st, r.Hook), r, "result %d is the job's final one", i)
	}
	// Where the seal wrote the job's WACZ reaches Redis through the
	// ordered writer, before the final state.
	require.Len(t, h.store.archives, 1)
	w := h.store.archives[0]
	assert.Equal(t, "/archive/snapshots/"+testIdent+"/"+testIdent+".wacz", w.in.WACZ)
	assert.Equal(t, int64(10), w.in.Bytes)
	assert.NotEmpty(t, w.in.Host, "the host that has it")
	assert.Equal(t, 0, w.finishedBefore, "written before the finish")
}

func TestAbortedJobIsSealedWithTheResultsItHas(t *testing.T) {
	const a, next = "on_Snapshot__10_a.sh", "on_Snapshot__20_next.sh"
	h := newHarness(t, plan(a, next))
	started := make(chan struct{})
	h.runner.on(a, func(ctx context.Context, req activities.RunRequest, s activities.Sink) (activities.Outcome, error) {
		close(started)
		return untilCancelled(ctx, req, s)
	})
	go func() {
		select {
		case <-started:
			h.env.SignalWorkflow(SignalAbort, AbortRequest{})
		case <-time.After(barrierWait):
		}
	}()

	st := h.run(input(1))

	assert.Equal(t, model.StateAborted, st.State)
	seals := h.sealer.all()
	require.Len(t, seals, 1, "a stopped job is sealed too")
	assert.Equal(t, model.StateAborted, seals[0].State)
	require.Len(t, seals[0].Results, 1, "only the hook that ran has a result")
	assert.Equal(t, a, seals[0].Results[0].Hook)
}

func heartbeatTimeout() error {
	return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
}

// A hook whose heartbeat timed out on a host with no live record loses the
// claim at once: the snapshot is re-claimed without waiting out the host
// timeout on the dead host's queue.
func TestHeartbeatTimeoutOnADeadHostReclaimsAtOnce(t *testing.T) {
	const a, slow = "on_Snapshot__00_a.sh", "on_Snapshot__10_slow.sh"
	h := newHarness(t, plan(a, slow))
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunHookInput) (activities.RunHookResult, error) {
			if in.Hook.Name == slow && !strings.Contains(activity.GetInfo(ctx).ActivityID, "#claim-") {
				return activities.RunHookResult{}, heartbeatTimeout()
			}
			return h.host.RunHook(ctx, in)
		})
	checks := &hostChecks{answer: func(int) (bool, error) { return false, nil }}
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(checks.hostLiveness)

	st := h.run(input(1))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 2, st.Claims, "the host was found lost after the heartbeat timeout")
	queues, _ := checks.calls()
	assert.Equal(t, []string{testHostQueue}, queues, "one check, right after the timeout")
	assert.Equal(t, activities.Counters{Total: 2, Succeeded: 2}, st.Counters)
	assert.Equal(t, 2, count(h.runner.snapshot(), a, "start"), "the new claim starts from step 0")
}

// On a host that is still alive, a hook whose heartbeat timed out is run
// again on it, its attempt counted; when its lease then runs out with the
// hook still waiting, the host is lost.
func TestHeartbeatTimeoutOnALiveHostRunsTheHookAgain(t *testing.T) {
	const slow = "on_Snapshot__10_slow.sh"
	h := newHarness(t, plan(slow))
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunHookInput) (activities.RunHookResult, error) {
			if !strings.Contains(activity.GetInfo(ctx).ActivityID, "#requeue-") {
				return activities.RunHookResult{}, heartbeatTimeout()
			}
			return h.host.RunHook(ctx, in)
		})
	checks := &hostChecks{answer: func(int) (bool, error) { return true, nil }}
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(checks.hostLiveness)

	st := h.run(input(1))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 1, st.Claims, "a live host is not re-claimed")
	res := result(t, st, slow)
	assert.Equal(t, model.StatusSucceeded, res.Status)
	assert.Equal(t, 2, res.Attempts, "the attempt that timed out counts")
}

func TestHeartbeatTimeoutOfTheLastAttemptOnALiveHostFailsTheHook(t *testing.T) {
	const slow = "on_Snapshot__10_slow.sh"
	h := newHarness(t, plan(slow, "on_Snapshot__20_b.sh"))
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunHookInput) (activities.RunHookResult, error) {
			if in.Hook.Name == slow {
				return activities.RunHookResult{}, heartbeatTimeout()
			}
			return h.host.RunHook(ctx, in)
		})
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(activities.Liveness{Alive: true, Lease: testLease}, nil)
	in := input(1)
	in.Retry.Default.MaximumAttempts = 2

	st := h.run(in)

	res := result(t, st, slow)
	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Contains(t, res.Error, "heartbeat")
	assert.Equal(t, 1, st.Claims)
}

func TestHookRetryPolicyHandsHeartbeatTimeoutsToTheWorkflowFromInputV2(t *testing.T) {
	h := hook("on_Snapshot__10_a.sh")
	r := input(1).Retry.Default
	v2 := hookActivityOptions(h, "id", testHostQueue, r, input(1).Timing, time.Minute, true)
	assert.Contains(t, v2.RetryPolicy.NonRetryableErrorTypes, "TemporalTimeout:Heartbeat")
	assert.Equal(t, time.Minute, v2.ScheduleToStartTimeout)
	v1 := hookActivityOptions(h, "id", testHostQueue, r, input(1).Timing, time.Minute, false)
	assert.NotContains(t, v1.RetryPolicy.NonRetryableErrorTypes, "TemporalTimeout:Heartbeat")
	assert.NotContains(t, activities.NonRetryableErrorTypes, "TemporalTimeout:Heartbeat", "the shared list is not changed")
}

func TestIsHostLostFindsTheCauseThroughAChildWorkflow(t *testing.T) {
	lost := hostLostError(testHostQueue, heartbeatTimeout())
	assert.True(t, isHostLost(lost))
	assert.True(t, isHostLost(temporal.NewApplicationErrorWithCause("background hook x", "wrapError", lost)))
	assert.True(t, isHostLost(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)))
	assert.False(t, isHostLost(heartbeatTimeout()), "a heartbeat timeout alone is no lost host")
	assert.False(t, isHostLost(errors.New("exit 1")))
}

func TestWaitAfterAHeartbeatTimeoutIsBoundedByTheHostsLease(t *testing.T) {
	c := hostCheck{timing: Timing{HostScheduleToStart: 2 * time.Minute}, fast: true}
	assert.Equal(t, 11*time.Second, c.nextWait(true, verdict{lease: 10 * time.Second}), "lease + margin")
	assert.Equal(t, 2*time.Minute, c.nextWait(true, verdict{lease: time.Hour}), "never past the host timeout")
	assert.Equal(t, 2*time.Minute, c.nextWait(true, verdict{}), "lease unknown (Redis down)")
	assert.Equal(t, 2*time.Minute, c.nextWait(false, verdict{lease: 10 * time.Second}), "a busy host's queue gets the host timeout")
}

// The worker that takes the claim discovers the hooks in the same activity
// and its host queue runs them: no DiscoverHooks on the host's queue.
func TestClaimDiscoversOnTheClaimingWorker(t *testing.T) {
	const a = "on_Snapshot__00_a.sh"
	h := newHarness(t, plan(a))
	var claimedOn string
	h.env.OnActivity(h.pool.ClaimAndDiscover, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.DiscoverInput) (activities.Claim, error) {
			claimedOn = activity.GetInfo(ctx).TaskQueue
			return h.pool.ClaimAndDiscover(ctx, in)
		})
	h.env.OnActivity(h.host.DiscoverHooks, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.DiscoverInput) (activities.Plan, error) {
			return activities.Plan{}, errors.New("DiscoverHooks must not run from InputV2 on")
		})

	st := h.run(input(1))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, testQueue, claimedOn, "the claim runs on the pool's shared queue")
	assert.Equal(t, testHostQueue, st.HostQueue)
	assert.Equal(t, model.StatusSucceeded, result(t, st, a).Status)
}
