package workflows

import (
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
)

// Timeouts of the small activities (host claim, discovery, seal, Redis
// writes).
const (
	claimStartToClose    = 30 * time.Second
	discoverStartToClose = 2 * time.Minute
	sealStartToClose     = 2 * time.Minute
	redisStartToClose    = 30 * time.Second
	discoverAttempts     = 3
	sealAttempts         = 3
	// redisScheduleToClose bounds all attempts of a Redis write together.
	// The SDK defaults a local activity's ScheduleToClose to its
	// StartToClose, which would make "retry without limit" give up after
	// 30 s of Redis outage and drop the write (fault drill 3).
	redisScheduleToClose = 10 * 365 * 24 * time.Hour
)

// poolActs and hostActs are used only for their method values, which name
// the activities (the method name is the activity type).
var (
	poolActs      *activities.PoolActivities
	hostActs      *activities.HostActivities
	crawlActs     *activities.CrawlActivities
	crawlHostActs *activities.CrawlHostActivities
)

// heartbeatTimeoutType is how a retry policy names a heartbeat timeout
// among its non-retryable error types.
const heartbeatTimeoutType = "TemporalTimeout:Heartbeat"

// retryPolicy converts a Retry into Temporal's policy. With
// heartbeatFinal, the server does not retry an attempt whose heartbeat
// timed out: the workflow sees the timeout at once and asks whether the
// host is alive before it runs the hook again (hostCheck.untilStarted).
func retryPolicy(r Retry, heartbeatFinal bool) *temporal.RetryPolicy {
	nonRetryable := activities.NonRetryableErrorTypes
	if heartbeatFinal {
		nonRetryable = append(slices.Clip(nonRetryable), heartbeatTimeoutType)
	}
	return &temporal.RetryPolicy{
		InitialInterval:        r.InitialInterval,
		BackoffCoefficient:     r.BackoffCoefficient,
		MaximumInterval:        r.MaximumInterval,
		MaximumAttempts:        r.MaximumAttempts,
		NonRetryableErrorTypes: nonRetryable,
	}
}

// backoffPolicy retries after 1 s, doubling to maxInterval, for attempts
// in all (0: without limit); activities.NonRetryableErrorTypes end it.
func backoffPolicy(maxInterval time.Duration, attempts int32) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        maxInterval,
		MaximumAttempts:        attempts,
		NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
	}
}

// redisRetry retries Redis writes without limit: Redis being down delays a
// job, it never fails it.
var redisRetry = backoffPolicy(time.Minute, 0)

// hookActivityOptions are the options of one hook's RunHook activity on the
// claimed host's queue. A foreground hook may run for its timeout plus the
// grace before SIGKILL plus a margin; a background hook runs until the seal
// (bounded by BackgroundMaxRun). Both heartbeat, so a dead worker is noticed
// within HeartbeatTimeout, and both bound their wait on the host queue by
// wait (HostScheduleToStart, or less while a host that stopped
// heartbeating may be dead), so a vanished host is noticed too.
// heartbeatFinal hands a heartbeat timeout to the workflow (retryPolicy).
func hookActivityOptions(h activities.HookSpec, id, hostQueue string, r Retry, t Timing, wait time.Duration, heartbeatFinal bool) workflow.ActivityOptions {
	startToClose := h.Timeout + h.Grace + t.StartMargin
	if h.Background {
		startToClose = t.BackgroundMaxRun + h.Grace + t.StartMargin
	}
	return workflow.ActivityOptions{
		TaskQueue:              hostQueue,
		ActivityID:             id,
		Summary:                h.Name,
		ScheduleToStartTimeout: wait,
		StartToCloseTimeout:    startToClose,
		HeartbeatTimeout:       t.HeartbeatTimeout,
		WaitForCancellation:    true,
		RetryPolicy:            retryPolicy(r, heartbeatFinal),
	}
}

// redisOptions are the options of the Redis-writing local activities; every
// worker of the pool has Redis.
func redisOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: redisScheduleToClose,
		StartToCloseTimeout:    redisStartToClose,
		RetryPolicy:            redisRetry,
	}
}

// claimOptions are the options of ClaimHost on the pool's shared queue.
func claimOptions(queue, id string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           queue,
		ActivityID:          id,
		Summary:             "claim host",
		StartToCloseTimeout: claimStartToClose,
		RetryPolicy:         redisRetry,
	}
}

// claimAndDiscoverOptions are the options of ClaimAndDiscover on the pool's
// shared queue: discovery's retries, any worker of the pool may take it. It
// has no ScheduleToStart (0): no host to lose yet, it waits for any worker.
func claimAndDiscoverOptions(queue, id string) workflow.ActivityOptions {
	return hostTaskOptions(queue, id, "claim host, discover hooks", 0, discoverStartToClose, discoverAttempts)
}

// hostTaskOptions are the options of a short task on the claimed host
// (discovery, seal): a few attempts, retried after 1 s doubling to 30 s.
func hostTaskOptions(hostQueue, id, summary string, wait, startToClose time.Duration, attempts int32) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              hostQueue,
		ActivityID:             id,
		Summary:                summary,
		ScheduleToStartTimeout: wait,
		StartToCloseTimeout:    startToClose,
		RetryPolicy:            backoffPolicy(30*time.Second, attempts),
	}
}

// childOptions are the options of a child workflow: a background hook's,
// a crawl's start page. REQUEST_CANCEL is the safety net if the parent
// ever closes without ending it; the seal cancels background children
// explicitly and waits.
func childOptions(id, queue, summary string) workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID:          id,
		TaskQueue:           queue,
		StaticSummary:       summary,
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
	}
}

// claimSuffix makes IDs of a re-claimed snapshot distinct from the first.
func claimSuffix(claim int) string {
	if claim <= 1 {
		return ""
	}
	return fmt.Sprintf("#claim-%d", claim)
}
