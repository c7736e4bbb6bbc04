package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
)

// BackgroundInput starts one BackgroundHookWorkflow.
type BackgroundInput struct {
	Run activities.RunHookInput `json:"run"`
	// HostQueue is the claimed host's task queue the hook runs on.
	HostQueue  string `json:"host_queue"`
	ActivityID string `json:"activity_id"`
	Retry      Retry  `json:"retry"`
	Timing     Timing `json:"timing"`
	// Version is the parent's SnapshotInput.Version (0 in children started
	// before the field: InputComplete's behaviour).
	Version int `json:"version,omitempty"`
}

// BackgroundHookWorkflow runs one background hook until it exits by itself
// or the parent cancels it at the seal (or on abort). Cancellation reaches
// the hook through RunHook's heartbeat: the runner sends SIGTERM, waits the
// grace, sends SIGKILL, and RunHook reports the final result, which this
// workflow returns (with RunHook's Recorded, so the parent writes only what
// RunHook could not). The only error it returns is a lost host, so the
// parent can re-claim the snapshot; every other outcome is a result.
func BackgroundHookWorkflow(ctx workflow.Context, in BackgroundInput) (activities.RunHookResult, error) {
	h := in.Run.Hook
	if err := in.validate(); err != nil {
		return activities.RunHookResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("background hook %s: %v", h.Key(), err), "InvalidBackgroundInput", nil)
	}
	t := in.Timing
	// The child runs on the pool's shared queue: its host checks go there.
	check := hostCheck{poolQueue: workflow.GetInfo(ctx).TaskQueueName, hostQueue: in.HostQueue, timing: t, fast: in.Version >= InputV2}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("%s · background hook %s", in.Run.Job.URL, h.Name))
	actx := workflow.WithActivityOptions(ctx, hookActivityOptions(h, in.ActivityID, in.HostQueue, in.Retry, t, t.HostScheduleToStart, check.fast))
	fut := workflow.ExecuteActivity(actx, hostActs.RunHook, in.Run)
	// Get waits for the activity even after cancellation
	// (WaitForCancellation), so the hook is stopped before this returns.
	res, err := hookOnHost(ctx, fut, in.Run, in.ActivityID, in.Retry, check)
	if err == nil {
		return res, nil
	}
	if isHostLost(err) {
		return activities.RunHookResult{}, fmt.Errorf("background hook %s: %w", h.Key(), err)
	}
	r := resultFromError(h, in.Retry, err, workflow.Now(ctx))
	if temporal.IsCanceledError(err) {
		if r.Attempts == 0 {
			// The seal came before any attempt of the hook ran.
			return activities.RunHookResult{ArchiveResult: skippedResult(h, workflow.Now(ctx), activities.NotStartedBeforeSeal)}, nil
		}
		r.Error = "stopped at seal before the hook reported a result"
	}
	return activities.RunHookResult{ArchiveResult: r}, nil
}

// validate checks what the child cannot run without; every value comes
// from the parent's validated input.
func (in BackgroundInput) validate() error {
	if in.HostQueue == "" {
		return fmt.Errorf("host_queue must not be empty")
	}
	return in.Timing.Validate()
}
