package submit

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/workflows"
)

// Typed Rerun refusals callers can test with errors.Is.
var (
	// ErrStillRunning: the job's workflow has not ended.
	ErrStillRunning = errors.New("job is still running")
	// ErrNothingFailed: no hook of the job's last run failed.
	ErrNothingFailed = errors.New("no hook failed")
)

// Rerun starts a new run of the job's workflow (same workflow ID) that
// runs only the hooks whose final status in the last run was failed, with
// the last run's input otherwise unchanged (workflows.Rerun). It refuses
// with ErrStillRunning while the last run is running, and with
// ErrNothingFailed when it has nothing to retry.
func Rerun(ctx context.Context, c client.Client, workflowID string) (client.WorkflowRun, *workflows.Rerun, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return nil, nil, fmt.Errorf("retry job %s: describe its workflow: %w", workflowID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	runID := info.GetExecution().GetRunId()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, nil, fmt.Errorf("retry job %s: %w (run %s): wait for it to end, or abort it, before retrying", workflowID, ErrStillRunning, runID)
	}
	st, err := lastStatus(ctx, c, workflowID, runID)
	if err != nil {
		return nil, nil, err
	}
	in, err := lastInput(ctx, c, workflowID, runID)
	if err != nil {
		return nil, nil, err
	}
	rerun, err := workflows.RerunOf(runID, st)
	if err != nil {
		return nil, nil, fmt.Errorf("retry job %s: %w: %w", workflowID, ErrNothingFailed, err)
	}
	in.Rerun = rerun
	if err := in.Validate(); err != nil {
		return nil, nil, fmt.Errorf("retry job %s: input of run %s: %w", workflowID, runID, err)
	}
	opts := StartOptions(Request{Ident: in.Job.Ident, URL: in.Job.URL,
		Pool: config.Pool{Name: in.Pool, TaskQueue: in.TaskQueue}})
	opts.ID = workflowID
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.SnapshotWorkflow, in)
	if err != nil {
		return nil, nil, fmt.Errorf("retry job %s: start a new run: %w", workflowID, err)
	}
	return run, rerun, nil
}

// lastStatus is the final Status of a run that ended: its result, or the
// details of the error a failed or aborted job ends with.
func lastStatus(ctx context.Context, c client.Client, workflowID, runID string) (workflows.Status, error) {
	var st workflows.Status
	err := c.GetWorkflow(ctx, workflowID, runID).Get(ctx, &st)
	if err == nil {
		return st, nil
	}
	if s, ok := workflows.EndStatus(err); ok {
		return s, nil
	}
	return st, fmt.Errorf("retry job %s: run %s ended without the job's status (terminated or timed out?): %w", workflowID, runID, err)
}

// lastInput is the input the run was started with (its first history event).
func lastInput(ctx context.Context, c client.Client, workflowID, runID string) (workflows.SnapshotInput, error) {
	var in workflows.SnapshotInput
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("retry job %s: run %s has no history", workflowID, runID)
	}
	ev, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("retry job %s: read the history of run %s: %w", workflowID, runID, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil || len(attrs.GetInput().GetPayloads()) != 1 {
		return in, fmt.Errorf("retry job %s: run %s: first event carries no snapshot input", workflowID, runID)
	}
	if err := converter.GetDefaultDataConverter().FromPayload(attrs.GetInput().GetPayloads()[0], &in); err != nil {
		return in, fmt.Errorf("retry job %s: decode the input of run %s: %w", workflowID, runID, err)
	}
	return in, nil
}
