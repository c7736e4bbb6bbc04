package workflows

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
)

// Timeouts of the small activities (host claim, discovery, Redis writes).
const (
	claimStartToClose    = 30 * time.Second
	discoverStartToClose = 2 * time.Minute
	redisStartToClose    = 30 * time.Second
	discoverAttempts     = 3
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

// retryPolicy converts a Retry into Temporal's policy.
func retryPolicy(r Retry) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        r.InitialInterval,
		BackoffCoefficient:     r.BackoffCoefficient,
		MaximumInterval:        r.MaximumInterval,
		MaximumAttempts:        r.MaximumAttempts,
		NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
	}
}

// redisRetry retries Redis writes without limit: Redis being down delays a
// job, it never fails it.
var redisRetry = &temporal.RetryPolicy{
	InitialInterval:        time.Second,
	BackoffCoefficient:     2,
	MaximumInterval:        time.Minute,
	MaximumAttempts:        0,
	NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
}

// hookActivityOptions are the options of one hook's RunHook activity on the
// claimed host's queue. A foreground hook may run for its timeout plus the
// grace before SIGKILL plus a margin; a background hook runs until the seal
// (bounded by BackgroundMaxRun). Both heartbeat, so a dead worker is noticed
// within HeartbeatTimeout, and both bound their wait on the host queue by
// HostScheduleToStart, so a vanished host is noticed too.
func hookActivityOptions(h activities.HookSpec, id, hostQueue string, r Retry, t Timing) workflow.ActivityOptions {
	startToClose := h.Timeout + h.Grace + t.StartMargin
	if h.Background {
		startToClose = t.BackgroundMaxRun + h.Grace + t.StartMargin
	}
	return workflow.ActivityOptions{
		TaskQueue:              hostQueue,
		ActivityID:             id,
		Summary:                h.Name,
		ScheduleToStartTimeout: t.HostScheduleToStart,
		StartToCloseTimeout:    startToClose,
		HeartbeatTimeout:       t.HeartbeatTimeout,
		WaitForCancellation:    true,
		RetryPolicy:            retryPolicy(r),
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

// discoverOptions are the options of DiscoverHooks on the claimed host.
func discoverOptions(hostQueue, id string, t Timing) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              hostQueue,
		ActivityID:             id,
		Summary:                "discover hooks",
		ScheduleToStartTimeout: t.HostScheduleToStart,
		StartToCloseTimeout:    discoverStartToClose,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        discoverAttempts,
			NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
		},
	}
}

// backgroundChildOptions are the options of a background hook's child
// workflow. REQUEST_CANCEL is the safety net if the parent ever closes
// without sealing; the seal cancels children explicitly and waits.
func backgroundChildOptions(id, queue, summary string) workflow.ChildWorkflowOptions {
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
