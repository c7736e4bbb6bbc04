// Package jobctl owns how a client talks to a job's running workflow: the
// status query, the set_settings and set_rules updates (waiting until the
// workflow applied them), the abort signal and the workflow's priority
// (a job's nice). The starter and the
// ArchiveBot pipeline (internal/abpipeline) both control jobs through it,
// so the names, the wait stage and the meaning of a refusal are decided
// here once.
package jobctl

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/workflows"
)

// ErrRefused marks an update the workflow's validator refused (the job is
// stopping or final, or the change is invalid); the error wrapping it says
// why. Any other error is the connection's or the deadline's.
var ErrRefused = errors.New("refused by the job's workflow")

// Status queries the workflow's status into out: a *workflows.Status for a
// snapshot, a *workflows.CrawlStatus for a crawl, or any struct that reads
// the fields both share (e.g. "settings").
func Status(ctx context.Context, c client.Client, workflowID string, out any) error {
	val, err := c.QueryWorkflow(ctx, workflowID, "", workflows.QueryStatus)
	if err != nil {
		return fmt.Errorf("query status of workflow %s: %w", workflowID, err)
	}
	if err := val.Get(out); err != nil {
		return fmt.Errorf("query status of workflow %s: decode: %w", workflowID, err)
	}
	return nil
}

// SetSettings sends the set_settings update with updateID (empty: a new
// one; the same ID twice is applied once) and waits until the workflow
// applied it, which includes writing them to Redis. It returns the
// settings' new version.
func SetSettings(ctx context.Context, c client.Client, workflowID, updateID string, s model.Settings) (int, error) {
	var version int
	err := update(ctx, c, workflowID, updateID, workflows.UpdateSetSettings, s, &version)
	if err != nil {
		return 0, fmt.Errorf("update settings of workflow %s: %w", workflowID, err)
	}
	return version, nil
}

// SetPriority changes the priority key of a job's workflow (Temporal's
// workflow execution options, model.PriorityKey of the job's nice). Every
// task the workflow schedules from then on (a claim, a hook, a crawl
// page, a child workflow) inherits it and is dispatched before waiting
// tasks of lower priority on its task queue; tasks already waiting may keep
// the priority they were scheduled with. The workflow itself is not
// touched: no history event of its own, nothing to replay.
func SetPriority(ctx context.Context, c client.Client, namespace, workflowID string, key int) error {
	_, err := c.WorkflowService().UpdateWorkflowExecutionOptions(ctx, &workflowservice.UpdateWorkflowExecutionOptionsRequest{
		Namespace:                namespace,
		WorkflowExecution:        &commonpb.WorkflowExecution{WorkflowId: workflowID},
		WorkflowExecutionOptions: &workflowpb.WorkflowExecutionOptions{Priority: &commonpb.Priority{PriorityKey: int32(key)}},
		UpdateMask:               &fieldmaskpb.FieldMask{Paths: []string{"priority.priority_key"}},
		Identity:                 "archiveflow",
	})
	if err != nil {
		return fmt.Errorf("set priority %d of workflow %s: %w", key, workflowID, err)
	}
	return nil
}

// SetRules sends a crawl's set_rules update and waits until the workflow
// applied it. It returns the rules' new version.
func SetRules(ctx context.Context, c client.Client, workflowID string, r scope.Rules) (int64, error) {
	var version int64
	if err := update(ctx, c, workflowID, "", workflows.UpdateSetRules, r, &version); err != nil {
		return 0, fmt.Errorf("update rules of workflow %s: %w", workflowID, err)
	}
	return version, nil
}

// Abort signals the workflow to abort the job.
func Abort(ctx context.Context, c client.Client, workflowID string, req workflows.AbortRequest) error {
	if err := c.SignalWorkflow(ctx, workflowID, "", workflows.SignalAbort, req); err != nil {
		return fmt.Errorf("abort workflow %s: %w", workflowID, err)
	}
	return nil
}

// update sends update name with arg and waits for its completion into out.
// An error from the update's outcome (not the connection or ctx) is the
// workflow's refusal, wrapped in ErrRefused.
func update(ctx context.Context, c client.Client, workflowID, updateID, name string, arg, out any) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateID:     updateID,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	if err := h.Get(ctx, out); err != nil {
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return nil
}
