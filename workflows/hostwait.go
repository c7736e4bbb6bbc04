package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Busy host ≠ dead host. An activity on the claimed host's queue that waits
// past Timing.HostScheduleToStart may wait because the host is gone or
// because every slot of a healthy host is taken. From hostCheckVersion on,
// the workflow then asks HostAlive (on the pool's shared queue: any worker
// of the pool reads Redis) and only a host with no live pipeline:ID record
// listing its queue is lost; a live one gets the activity scheduled again
// on the same queue. Histories recorded before the change replay the old
// rule (every such timeout is a lost host). From InputV2 on the check is
// HostLiveness, and a hook whose heartbeat timed out is checked at once
// too: a dead host is re-claimed once its record expires (about
// worker.pipeline_ttl after it died) instead of after HostScheduleToStart.
const (
	hostCheckChange  = "host-alive-check"
	hostCheckVersion = 1
)

// hostAliveStartToClose bounds one HostAlive attempt (one Redis read).
const hostAliveStartToClose = 30 * time.Second

// isScheduleToStart reports an activity that waited on its task queue past
// its ScheduleToStart timeout: no worker of the queue started it in time.
func isScheduleToStart(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// isHeartbeatTimeout reports an activity whose worker stopped heartbeating.
func isHeartbeatTimeout(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT
}

// errTypeHostLost is the ApplicationError type of an activity whose host
// stopped heartbeating and was then found to have no live record.
const errTypeHostLost = "HostLost"

// hostLostError ends an activity whose heartbeat timed out on a host that
// is gone.
func hostLostError(hostQueue string, timeout error) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("host %s lost: its heartbeat timed out and it no longer reports itself", hostQueue), errTypeHostLost, timeout)
}

// isHostLost reports an activity (or a background hook's child workflow)
// that ended because its host is gone: it waited past ScheduleToStart on a
// queue nobody polls, or its heartbeat timed out and the host's record
// expired (errTypeHostLost anywhere in the error's chain).
func isHostLost(err error) bool {
	if isScheduleToStart(err) {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if appErr, ok := e.(*temporal.ApplicationError); ok && appErr.Type() == errTypeHostLost {
			return true
		}
	}
	return false
}

// hostAliveOptions are the options of HostAlive on the pool's shared queue.
// A Redis outage is retried (1 s doubling to 15 s) for at most one more
// HostScheduleToStart: the check must not keep the hook out of the host's
// queue for long, and "cannot tell" is never read as "dead" (see
// hostLost).
func hostAliveOptions(poolQueue, id string, hostScheduleToStart time.Duration) workflow.ActivityOptions {
	retry := backoffPolicy(15*time.Second, 0)
	retry.NonRetryableErrorTypes = append([]string{activities.ErrTypeNoHostRegistry}, activities.NonRetryableErrorTypes...)
	return workflow.ActivityOptions{
		TaskQueue:              poolQueue,
		ActivityID:             id,
		Summary:                "host alive?",
		StartToCloseTimeout:    hostAliveStartToClose,
		ScheduleToCloseTimeout: hostScheduleToStart,
		RetryPolicy:            retry,
	}
}

// hostCheck decides what an activity that waited past its ScheduleToStart
// timeout on a claimed host's queue means, and, when fast, one whose
// heartbeat timed out.
type hostCheck struct {
	poolQueue string
	hostQueue string
	timing    Timing
	// fast (InputV2): a hook's heartbeat timeout reaches the workflow
	// instead of being retried on the host's queue (retryPolicy), and is
	// checked at once with HostLiveness, whose lease bounds the next wait
	// on the queue of a host that may have just died.
	fast bool
}

// verdict is what one host check found.
type verdict struct {
	lost bool
	// lease is how much longer a live host counts as alive without
	// reporting again (fast checks; 0 when not known).
	lease time.Duration
}

// leaseMargin is added to a host's lease before its queue is checked again:
// by then a host that stopped reporting has no live record.
const leaseMargin = time.Second

// check asks whether the host behind hostQueue is gone; id names the
// check's activity. A live host (busy, not dead) is not lost. When Redis
// cannot be read within the check's bound, the host is not declared lost
// either: the caller schedules its activity again and asks again after the
// next wait. Only a worker that cannot check at all (no host registry)
// falls back to the old rule. Replaying a history from before
// hostCheckVersion, every such timeout is a lost host.
func (c hostCheck) check(ctx workflow.Context, id string) verdict {
	if !c.fast && workflow.GetVersion(ctx, hostCheckChange, workflow.DefaultVersion, hostCheckVersion) == workflow.DefaultVersion {
		return verdict{lost: true}
	}
	actx := workflow.WithActivityOptions(ctx, hostAliveOptions(c.poolQueue, id, c.timing.HostScheduleToStart))
	var live activities.Liveness
	var err error
	if c.fast {
		err = workflow.ExecuteActivity(actx, poolActs.HostLiveness, c.hostQueue).Get(ctx, &live)
	} else {
		err = workflow.ExecuteActivity(actx, poolActs.HostAlive, c.hostQueue).Get(ctx, &live.Alive)
	}
	var appErr *temporal.ApplicationError
	log := workflow.GetLogger(ctx)
	switch {
	case err == nil && live.Alive:
		log.Info("host queue busy, host alive: waiting on", "host_queue", c.hostQueue, "lease", live.Lease)
		return verdict{lease: live.Lease}
	case err == nil:
		return verdict{lost: true}
	case errors.As(err, &appErr) && appErr.NonRetryable():
		log.Warn("cannot check host liveness; host lost", "host_queue", c.hostQueue, "error", err)
		return verdict{lost: true}
	default:
		log.Warn("host liveness unknown (Redis unreachable?); waiting on", "host_queue", c.hostQueue, "error", err)
		return verdict{}
	}
}

// requeueSuffix makes the ID of an activity scheduled again on a busy host
// distinct from the earlier ones.
func requeueSuffix(round int) string {
	if round <= 1 {
		return ""
	}
	return fmt.Sprintf("#requeue-%d", round)
}

// attemptsSpent counts the attempts of a hook that ended waiting past
// ScheduleToStart or by a heartbeat timeout: the previous attempt's
// reported result (the timeout's cause) or its last heartbeat carry the
// attempt number; else no attempt of this scheduling ran and before
// stands. An attempt whose heartbeat timed out ran, heartbeat or not.
func attemptsSpent(err error, before int) int {
	spent := before
	if isHeartbeatTimeout(err) {
		spent++
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() {
		var last model.ArchiveResult
		if appErr.Details(&last) == nil {
			spent = max(spent, last.Attempts)
		}
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.HasLastHeartbeatDetails() {
		var p activities.Progress
		if te.LastHeartbeatDetails(&p) == nil {
			spent = max(spent, p.Attempt)
		}
	}
	return spent
}

// backoff is the wait before the attempt after spent failed ones, as
// Temporal's retry policy computes it: initial × coefficient^(spent-1),
// at most the maximum interval.
func (r Retry) backoff(spent int) time.Duration {
	d := float64(r.InitialInterval)
	for i := 1; i < spent; i++ {
		d *= r.BackoffCoefficient
		if r.MaximumInterval > 0 && d >= float64(r.MaximumInterval) {
			return r.MaximumInterval
		}
	}
	if r.MaximumInterval > 0 && time.Duration(d) > r.MaximumInterval {
		return r.MaximumInterval
	}
	return time.Duration(d)
}

// remaining is r with the attempts already spent taken off, so scheduling
// a hook again on a busy host does not give it more attempts in total.
func (r Retry) remaining(spent int) Retry {
	if r.MaximumAttempts > 0 && spent > 0 {
		r.MaximumAttempts = max(r.MaximumAttempts-int32(spent), 1)
	}
	return r
}

// round is one scheduling of an activity on the claimed host's queue.
type round struct {
	n int // 1-based
	// after is the timeout that ended the round before (nil for round 1).
	after error
	// wait is this round's ScheduleToStart timeout.
	wait time.Duration
}

// untilStarted runs one activity on the claimed host's queue and, while it
// times out before start on a host that is alive (busy), schedules it again
// on the same queue; schedule(r) schedules round r and returns its future,
// whose result goes to valuePtr. With a fast check, an activity whose
// heartbeat timed out is checked too: on a live host it is scheduled again
// (when again(err) says it has attempts left; nil: never), its first wait
// bounded by the host's lease, so a host that just died is known lost as
// soon as its record expires. It returns the last round's error: a
// ScheduleToStart timeout or an errTypeHostLost error only when the host is
// lost (isHostLost), errStoppedWaiting when ctx was cancelled while the
// activity waited. Scheduling and host checks use ctx, the waits getCtx.
// This is the one busy-host requeue loop: discovery, the seal and every
// hook use it.
func (c hostCheck) untilStarted(ctx, getCtx workflow.Context, id string, valuePtr any, again func(error) bool, schedule func(round) workflow.Future) error {
	r := round{n: 1, wait: c.timing.HostScheduleToStart}
	for {
		err := schedule(r).Get(getCtx, valuePtr)
		beat := c.fast && isHeartbeatTimeout(err)
		if err == nil || !(beat || isScheduleToStart(err)) {
			return err
		}
		if ctx.Err() != nil {
			return errStoppedWaiting
		}
		v := c.check(ctx, fmt.Sprintf("%s/host-alive-%d", id, r.n))
		switch {
		case ctx.Err() != nil:
			return errStoppedWaiting
		case v.lost && beat:
			return hostLostError(c.hostQueue, err)
		case v.lost:
			return err
		case beat && (again == nil || !again(err)):
			return err // its last attempt timed out on a live host
		}
		r = round{n: r.n + 1, after: err, wait: c.nextWait(beat, v)}
	}
}

// nextWait is the ScheduleToStart of the round after one that ended on a
// host found alive: the host timeout, or, after a heartbeat timeout (beat),
// no longer than the host's lease plus a margin, so a host that has just
// died is checked again as soon as its record has expired.
func (c hostCheck) nextWait(beat bool, v verdict) time.Duration {
	if beat && v.lease > 0 {
		return min(c.timing.HostScheduleToStart, v.lease+leaseMargin)
	}
	return c.timing.HostScheduleToStart
}

// hookOnHost waits for one hook's RunHook on the claimed host. first is
// the hook's already scheduled activity (ID id, retry policy r). While it
// waits on a busy host (untilStarted), or after its heartbeat timed out on
// a live one, the hook is scheduled again with the attempts already spent
// taken off its policy and carried on in AttemptsBefore. It returns the
// last activity's result and error. ctx must belong to the calling
// coroutine.
func hookOnHost(ctx workflow.Context, first workflow.Future, in activities.RunHookInput, id string, r Retry, check hostCheck) (activities.RunHookResult, error) {
	var res activities.RunHookResult
	again := func(err error) bool { return attemptsSpent(err, in.AttemptsBefore) < int(r.MaximumAttempts) }
	err := check.untilStarted(ctx, ctx, id, &res, again, func(rd round) workflow.Future {
		if rd.n == 1 {
			return first
		}
		in.AttemptsBefore = attemptsSpent(rd.after, in.AttemptsBefore)
		opts := hookActivityOptions(in.Hook, id+requeueSuffix(rd.n), check.hostQueue, r.remaining(in.AttemptsBefore), check.timing, rd.wait, check.fast)
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), hostActs.RunHook, in)
	})
	return res, err
}

// errStoppedWaiting ends an activity that was stopped (abort, seal, lost
// host noticed by another hook) while it waited for a busy host.
var errStoppedWaiting = temporal.NewCanceledError()
