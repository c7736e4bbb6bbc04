package workflows

import (
	"context"
	"errors"
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

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// testLease is the lease of a live host in these tests.
const testLease = 10 * time.Second

// hostChecks records the host checks and answers them from a script.
type hostChecks struct {
	mu     sync.Mutex
	queues []string // host queue asked about, per call (retries included)
	on     []string // task queue the check ran on
	answer func(call int) (bool, error)
}

// hostAlive answers HostAlive (inputs before InputV2).
func (c *hostChecks) hostAlive(ctx context.Context, queue string) (bool, error) {
	c.mu.Lock()
	c.queues = append(c.queues, queue)
	c.on = append(c.on, activity.GetInfo(ctx).TaskQueue)
	call := len(c.queues)
	c.mu.Unlock()
	return c.answer(call)
}

// hostLiveness answers HostLiveness: a live host has testLease left.
func (c *hostChecks) hostLiveness(ctx context.Context, queue string) (activities.Liveness, error) {
	alive, err := c.hostAlive(ctx, queue)
	if !alive {
		return activities.Liveness{}, err
	}
	return activities.Liveness{Alive: true, Lease: testLease}, err
}

func (c *hostChecks) calls() ([]string, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.queues...), append([]string(nil), c.on...)
}

func scheduleToStartTimeout(cause error) error {
	return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, cause)
}

// waitsOnce makes the first scheduling of hook name time out before start
// (every slot of the host busy); later schedulings run the real RunHook.
func waitsOnce(h *harness, name string) *[]string {
	var mu sync.Mutex
	ids := &[]string{}
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunHookInput) (activities.RunHookResult, error) {
			info := activity.GetInfo(ctx)
			if in.Hook.Name == name {
				mu.Lock()
				*ids = append(*ids, info.ActivityID)
				mu.Unlock()
				if !strings.Contains(info.ActivityID, "#requeue-") {
					return activities.RunHookResult{}, scheduleToStartTimeout(nil)
				}
			}
			return h.host.RunHook(ctx, in)
		})
	return ids
}

func TestBusyHostIsWaitedForNotReclaimed(t *testing.T) {
	const a, busy, c = "on_Snapshot__00_a.sh", "on_Snapshot__30_b.sh", "on_Snapshot__90_c.sh"
	h := newHarness(t, plan(a, busy, c))
	ids := waitsOnce(h, busy)
	checks := &hostChecks{answer: func(int) (bool, error) { return true, nil }}
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(checks.hostLiveness)

	st := h.run(input(2))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 1, st.Claims, "a busy host is not re-claimed")
	assert.Equal(t, activities.Counters{Total: 3, Succeeded: 3}, st.Counters)
	queues, on := checks.calls()
	assert.Equal(t, []string{testHostQueue}, queues, "one check of the claimed host")
	assert.Equal(t, []string{testQueue}, on, "the check runs on the pool's shared queue")
	assert.Equal(t, []string{
		testIdent + "/step-3/" + busy,
		testIdent + "/step-3/" + busy + "#requeue-2",
	}, *ids, "the hook is scheduled again on the same host")
	assert.Equal(t, 1, count(h.runner.snapshot(), a, "start"), "step 0 is not run again")
	assert.Equal(t, 1, count(h.runner.snapshot(), busy, "start"))
	assert.Equal(t, 1, result(t, st, busy).Attempts, "waiting on a busy host is no attempt")
	assert.Len(t, h.store.results, 3)
}

func TestDeadHostIsReclaimed(t *testing.T) {
	const a, lost = "on_Snapshot__00_a.sh", "on_Snapshot__30_b.sh"
	h := newHarness(t, plan(a, lost))
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunHookInput) (activities.RunHookResult, error) {
			if in.Hook.Name == lost && !strings.Contains(activity.GetInfo(ctx).ActivityID, "#claim-") {
				return activities.RunHookResult{}, scheduleToStartTimeout(nil)
			}
			return h.host.RunHook(ctx, in)
		})
	checks := &hostChecks{answer: func(int) (bool, error) { return false, nil }}
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(checks.hostLiveness)

	st := h.run(input(2))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 2, st.Claims, "a host with no live pipeline record is lost")
	queues, _ := checks.calls()
	assert.Equal(t, []string{testHostQueue}, queues)
	assert.Equal(t, 2, count(h.runner.snapshot(), a, "start"), "the new claim restarts from step 0")
	assert.Equal(t, activities.Counters{Total: 2, Succeeded: 2}, st.Counters)
}

func TestHostCheckRetriesWhileRedisIsDown(t *testing.T) {
	const a, busy = "on_Snapshot__00_a.sh", "on_Snapshot__30_b.sh"
	h := newHarness(t, plan(a, busy))
	waitsOnce(h, busy)
	checks := &hostChecks{answer: func(call int) (bool, error) {
		if call <= 4 {
			return false, errors.New("dial tcp 127.0.0.1:6379: connection refused")
		}
		return true, nil
	}}
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(checks.hostLiveness)

	st := h.run(input(2))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 1, st.Claims, "Redis being down never makes a host dead")
	queues, _ := checks.calls()
	assert.Len(t, queues, 5, "the check is retried until Redis answers")
	assert.Equal(t, 1, count(h.runner.snapshot(), busy, "start"))
}

func TestHostCheckGivingUpKeepsWaiting(t *testing.T) {
	const busy = "on_Snapshot__30_b.sh"
	h := newHarness(t, plan(busy))
	waitsOnce(h, busy)
	checks := &hostChecks{answer: func(int) (bool, error) { return false, errors.New("redis: connection refused") }}
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(checks.hostLiveness)

	st := h.run(input(1))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 1, st.Claims, "an unanswered check (retries out of time) is not a dead host")
	queues, _ := checks.calls()
	assert.Greater(t, len(queues), 1, "the check was retried before giving up")
	assert.Equal(t, model.StatusSucceeded, result(t, st, busy).Status)
}

func TestRequeuedHookKeepsItsAttemptCount(t *testing.T) {
	const busy = "on_Snapshot__30_b.sh"
	h := newHarness(t, plan(busy))
	h.runner.on(busy, transient)
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunHookInput) (activities.RunHookResult, error) {
			info := activity.GetInfo(ctx)
			if !strings.Contains(info.ActivityID, "#requeue-") && info.Attempt == 2 {
				// Attempt 2 waited on the busy host; the server's timeout
				// carries attempt 1's failure as its cause.
				last := temporal.NewApplicationErrorWithOptions("hook b attempt 1: exit 1", activities.ErrTypeTransient,
					temporal.ApplicationErrorOptions{Details: []any{model.ArchiveResult{Attempts: 1, Status: model.StatusFailed}}})
				return activities.RunHookResult{}, scheduleToStartTimeout(last)
			}
			return h.host.RunHook(ctx, in)
		})
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(activities.Liveness{Alive: true, Lease: testLease}, nil)

	st := h.run(input(1))

	res := result(t, st, busy)
	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Equal(t, 3, res.Attempts, "maximum_attempts 3 in total, not 3 per scheduling")
	var attempts []int
	for _, e := range h.runner.snapshot() {
		if e.hook == busy && e.kind == "start" {
			attempts = append(attempts, e.attempt)
		}
	}
	assert.Equal(t, []int{1, 2, 3}, attempts, "the hook sees its attempt numbers continue")
	assert.Equal(t, 1, st.Claims)
}

func TestBusyHostBackgroundHookIsWaitedFor(t *testing.T) {
	const bg, fg = "on_Snapshot__10_bgx.bg.sh", "on_Snapshot__20_fg.sh"
	h := newHarness(t, plan(bg, fg))
	started := make(chan struct{})
	// Like a real background hook it runs until the seal stops it (exit
	// 143 → succeeded), so its result does not race with the seal.
	h.runner.on(bg, func(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
		close(started)
		return untilCancelled(ctx, req, sink)
	})
	// The step-2 hook ends only once the background hook runs, so the seal
	// cannot cancel it while it still waits for the busy host.
	h.runner.on(fg, func(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
		select {
		case <-started:
		case <-time.After(barrierWait):
			return activities.Outcome{}, errors.New("background hook never started")
		}
		return succeed(ctx, req, sink)
	})
	ids := waitsOnce(h, bg)
	checks := &hostChecks{answer: func(int) (bool, error) { return true, nil }}
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(checks.hostLiveness)

	st := h.run(input(1))

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 1, st.Claims)
	queues, on := checks.calls()
	assert.Equal(t, []string{testHostQueue}, queues)
	assert.Equal(t, []string{testQueue}, on, "the child checks on the pool's shared queue")
	require.Len(t, *ids, 2)
	assert.Equal(t, testIdent+"/step-1/"+bg+"#requeue-2", (*ids)[1])
	assert.Equal(t, 1, count(h.runner.snapshot(), bg, "start"))
	// As in TestBackgroundHookRunsAcrossStepsAndIsCancelledAtSeal, the test
	// environment resolves the cancelled activity at once, without a
	// result: to the workflow a hook that was ready and reported nothing.
	assert.Equal(t, model.StatusFailed, result(t, st, bg).Status)
	assert.Equal(t, SealedBetweenAttempts, result(t, st, bg).Error)
	assert.Equal(t, model.StatusSucceeded, result(t, st, fg).Status)
}

// Before InputV2, discovery runs on the claimed host's queue (since, it
// runs in the claim: TestClaimDiscoversOnTheClaimingWorker).
func TestBusyHostDiscoveryIsWaitedFor(t *testing.T) {
	const a = "on_Snapshot__00_a.sh"
	h := newHarness(t, plan(a))
	var mu sync.Mutex
	var ids []string
	h.env.OnActivity(h.host.DiscoverHooks, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.DiscoverInput) (activities.Plan, error) {
			id := activity.GetInfo(ctx).ActivityID
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			if !strings.Contains(id, "#requeue-") {
				return activities.Plan{}, scheduleToStartTimeout(nil)
			}
			return h.host.DiscoverHooks(ctx, in)
		})
	h.env.OnActivity(h.pool.HostAlive, mock.Anything, mock.Anything).Return(true, nil)
	in := input(1)
	in.Version = InputComplete

	st := h.run(in)

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 1, st.Claims)
	assert.Equal(t, []string{testIdent + "/discover", testIdent + "/discover#requeue-2"}, ids)
}

func TestAbortWhileWaitingOnBusyHost(t *testing.T) {
	const busy = "on_Snapshot__30_b.sh"
	h := newHarness(t, plan(busy))
	h.env.OnActivity(h.host.RunHook, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RunHookInput) (activities.RunHookResult, error) {
			return activities.RunHookResult{}, scheduleToStartTimeout(nil)
		})
	checks := &hostChecks{answer: func(int) (bool, error) { return false, errors.New("redis: connection refused") }}
	h.env.OnActivity(h.pool.HostLiveness, mock.Anything, mock.Anything).Return(checks.hostLiveness)
	// Fires during the check's first retry backoff.
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalAbort, AbortRequest{Reason: "operator"})
	}, 500*time.Millisecond)

	st := h.run(input(1))

	assert.Equal(t, model.StateAborted, st.State)
	assert.Equal(t, 1, st.Claims, "an abort while waiting is no lost host")
	assert.Equal(t, model.StatusFailed, result(t, st, busy).Status)
	assert.Zero(t, count(h.runner.snapshot(), busy, "start"))
}
