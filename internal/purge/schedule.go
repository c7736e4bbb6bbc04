package purge

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/workflows"
)

// workflowName is the purge workflow's type name (its function name).
const workflowName = "PurgeWorkflow"

// Input is the purge workflow's input from configuration.
func Input(c config.Purge) workflows.PurgeInput {
	return workflows.PurgeInput{Batch: c.Batch, MaxBatches: c.MaxBatches}
}

// schedule is the Schedule's spec, action and policy from configuration.
func schedule(cfg *config.Config) (client.ScheduleSpec, *client.ScheduleWorkflowAction) {
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.Purge.Interval}}}
	action := &client.ScheduleWorkflowAction{
		ID:            cfg.Purge.ScheduleID + "-run",
		Workflow:      workflowName,
		Args:          []any{Input(cfg.Purge)},
		TaskQueue:     cfg.PurgeQueue(),
		StaticSummary: "purge finished jobs past their retention",
	}
	return spec, action
}

// EnsureSchedule creates the purge Schedule, or brings an existing one to
// the configuration (interval, task queue, batches); it changes nothing
// when the Schedule already matches, so every worker start may call it:
// a second worker or a restart never creates a second Schedule. Runs that
// would overlap a running one are skipped.
func EnsureSchedule(ctx context.Context, c client.Client, cfg *config.Config, log *zap.Logger) error {
	if log == nil {
		log = zap.NewNop()
	}
	spec, action := schedule(cfg)
	sc := c.ScheduleClient()
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID:      cfg.Purge.ScheduleID,
		Spec:    spec,
		Action:  action,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Note:    "created by archiveflow workers (config purge.*)",
	})
	if err == nil {
		log.Info("purge schedule created", zap.String("schedule_id", cfg.Purge.ScheduleID),
			zap.Duration("interval", cfg.Purge.Interval), zap.String("task_queue", action.TaskQueue))
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("create purge schedule %s: %w", cfg.Purge.ScheduleID, err)
	}
	updated := false
	err = sc.GetHandle(ctx, cfg.Purge.ScheduleID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			if matches(s, spec, action) {
				return nil, temporal.ErrSkipScheduleUpdate
			}
			s.Spec, s.Action = &spec, action
			if s.Policy == nil {
				s.Policy = &client.SchedulePolicies{}
			}
			s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
			updated = true
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("update purge schedule %s: %w", cfg.Purge.ScheduleID, err)
	}
	if updated {
		log.Info("purge schedule updated to the configuration", zap.String("schedule_id", cfg.Purge.ScheduleID))
	}
	return nil
}

// matches reports whether an existing Schedule already does what the
// configuration asks.
func matches(s client.Schedule, spec client.ScheduleSpec, want *client.ScheduleWorkflowAction) bool {
	if s.Spec == nil || len(s.Spec.Intervals) != 1 || s.Spec.Intervals[0] != spec.Intervals[0] ||
		len(s.Spec.Calendars) > 0 || len(s.Spec.CronExpressions) > 0 {
		return false
	}
	if s.Policy == nil || s.Policy.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP {
		return false
	}
	a, ok := s.Action.(*client.ScheduleWorkflowAction)
	if !ok || a.ID != want.ID || a.TaskQueue != want.TaskQueue || a.Workflow != want.Workflow || len(a.Args) != 1 {
		return false
	}
	p, ok := a.Args[0].(*commonpb.Payload)
	if !ok {
		return false
	}
	var in workflows.PurgeInput
	if err := converter.GetDefaultDataConverter().FromPayload(p, &in); err != nil {
		return false
	}
	return in == want.Args[0]
}
