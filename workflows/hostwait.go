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
// rule (every such timeout is a lost host).
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

// hostAliveOptions are the options of HostAlive on the pool's shared queue.
// A Redis outage is retried (1 s doubling to 15 s) for at most one more
// HostScheduleToStart: the check must not keep the hook out of the host's
// queue for long, and "cannot tell" is never read as "dead" (see
// hostLost).
func hostAliveOptions(poolQueue, id string, t Timing) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              poolQueue,
		ActivityID:             id,
		Summary:                "host alive?",
		StartToCloseTimeout:    hostAliveStartToClose,
		ScheduleToCloseTimeout: t.HostScheduleToStart,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        15 * time.Second,
			MaximumAttempts:        0,
			NonRetryableErrorTypes: append([]string{activities.ErrTypeNoHostRegistry}, activities.NonRetryableErrorTypes...),
		},
	}
}

// hostCheck decides what an activity that waited past its ScheduleToStart
// timeout on a claimed host's queue means.
type hostCheck struct {
	poolQueue string
	hostQueue string
	timing    Timing
}

// lost reports whether the host behind hostQueue is gone; id names the
// check's activity. A live host (busy, not dead) is not lost. When Redis
// cannot be read within the check's bound, the host is not declared lost
// either: the caller schedules its activity again and asks again after the
// next wait. Only a worker that cannot check at all (no host registry)
// falls back to the old rule. Replaying a history from before
// hostCheckVersion, every such timeout is a lost host.
func (c hostCheck) lost(ctx workflow.Context, id string) bool {
	if workflow.GetVersion(ctx, hostCheckChange, workflow.DefaultVersion, hostCheckVersion) == workflow.DefaultVersion {
		return true
	}
	actx := workflow.WithActivityOptions(ctx, hostAliveOptions(c.poolQueue, id, c.timing))
	var alive bool
	err := workflow.ExecuteActivity(actx, poolActs.HostAlive, c.hostQueue).Get(ctx, &alive)
	var appErr *temporal.ApplicationError
	log := workflow.GetLogger(ctx)
	switch {
	case err == nil && alive:
		log.Info("host queue busy, host alive: waiting on", "host_queue", c.hostQueue)
		return false
	case err == nil:
		return true
	case errors.As(err, &appErr) && appErr.NonRetryable():
		log.Warn("cannot check host liveness; host lost", "host_queue", c.hostQueue, "error", err)
		return true
	default:
		log.Warn("host liveness unknown (Redis unreachable?); waiting on", "host_queue", c.hostQueue, "error", err)
		return false
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

// checkID is the ID of a host check for the activity id.
func checkID(id string, round int) string {
	return fmt.Sprintf("%s/host-alive-%d", id, round)
}

// attemptsSpent counts the attempts of a hook that ended waiting past
// ScheduleToStart: the previous attempt's reported result (the timeout's
// cause) or its last heartbeat carry the attempt number; else no attempt of
// this scheduling ran and before stands.
func attemptsSpent(err error, before int) int {
	spent := before
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

// remaining is r with the attempts already spent taken off, so scheduling
// a hook again on a busy host does not give it more attempts in total.
func (r Retry) remaining(spent int) Retry {
	if r.MaximumAttempts > 0 && spent > 0 {
		r.MaximumAttempts = max(r.MaximumAttempts-int32(spent), 1)
	}
	return r
}

// untilStarted runs one activity on the claimed host's queue and, while it
// times out before start on a host that is alive (busy), schedules it again
// on the same queue. schedule(round, timedOut) schedules round 1, 2, … of
// it and returns its future (timedOut is the ScheduleToStart timeout that
// ended the round before, nil for round 1); the result goes to valuePtr.
// It returns the last round's error: a ScheduleToStart timeout only when
// the host is lost, errStoppedWaiting when ctx was cancelled while the
// activity waited. Scheduling and host checks use ctx, the waits getCtx.
// This is the one busy-host requeue loop: discovery and every hook use it.
func (c hostCheck) untilStarted(ctx, getCtx workflow.Context, id string, valuePtr any, schedule func(round int, timedOut error) workflow.Future) error {
	var timedOut error
	for round := 1; ; round++ {
		err := schedule(round, timedOut).Get(getCtx, valuePtr)
		if err == nil || !isScheduleToStart(err) {
			return err
		}
		if ctx.Err() != nil {
			return errStoppedWaiting
		}
		lost := c.lost(ctx, checkID(id, round))
		switch {
		case ctx.Err() != nil:
			return errStoppedWaiting
		case lost:
			return err
		}
		timedOut = err
	}
}

// hookOnHost waits for one hook's RunHook on the claimed host. first is
// the hook's already scheduled activity (ID id, retry policy r). While it
// waits on a busy host (untilStarted), the hook is scheduled again with
// the attempts already spent taken off its policy and carried on in
// AttemptsBefore. It returns the last activity's result and error.
// ctx must belong to the calling coroutine.
func hookOnHost(ctx workflow.Context, first workflow.Future, in activities.RunHookInput, id string, r Retry, check hostCheck) (model.ArchiveResult, error) {
	var res model.ArchiveResult
	err := check.untilStarted(ctx, ctx, id, &res, func(round int, timedOut error) workflow.Future {
		if round == 1 {
			return first
		}
		in.AttemptsBefore = attemptsSpent(timedOut, in.AttemptsBefore)
		opts := hookActivityOptions(in.Hook, id+requeueSuffix(round), check.hostQueue, r.remaining(in.AttemptsBefore), check.timing)
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), hostActs.RunHook, in)
	})
	return res, err
}

// errStoppedWaiting ends an activity that was stopped (abort, seal, lost
// host noticed by another hook) while it waited for a busy host.
var errStoppedWaiting = temporal.NewCanceledError()
