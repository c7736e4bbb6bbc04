package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
)

// purgeActs names the purge activities (method values only).
var purgeActs *activities.PurgeActivities

// purgeBatchStartToClose bounds one PurgeBatch call.
const purgeBatchStartToClose = 5 * time.Minute

// PurgeInput starts one PurgeWorkflow (the purge Schedule's action; values
// from config purge.*, built by internal/purge).
type PurgeInput struct {
	// Batch is the most jobs one activity call removes.
	Batch int `json:"batch"`
	// MaxBatches bounds the calls of one run; what is left waits for the
	// next run of the Schedule.
	MaxBatches int `json:"max_batches"`
}

// Validate checks the ranges.
func (in PurgeInput) Validate() error {
	switch {
	case in.Batch < 1:
		return fmt.Errorf("purge batch %d: must be >= 1", in.Batch)
	case in.MaxBatches < 1:
		return fmt.Errorf("purge max_batches %d: must be >= 1", in.MaxBatches)
	}
	return nil
}

// PurgeResult is what one PurgeWorkflow run removed.
type PurgeResult struct {
	Jobs    int  `json:"jobs"`
	Keys    int  `json:"keys"`
	Batches int  `json:"batches"`
	More    bool `json:"more"` // jobs were still due when the run stopped
}

// PurgeWorkflow removes finished jobs whose retention has passed, in
// batches of in.Batch jobs (one PurgeBatch activity each), until none is
// due or in.MaxBatches calls were made.
func PurgeWorkflow(ctx workflow.Context, in PurgeInput) (PurgeResult, error) {
	if err := in.Validate(); err != nil {
		return PurgeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("purge input: %v", err), "InvalidPurgeInput", err)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: purgeBatchStartToClose,
		Summary:             "purge finished jobs",
		RetryPolicy:         backoffPolicy(time.Minute, 5),
	})
	var res PurgeResult
	for res.Batches < in.MaxBatches {
		var rep activities.PurgeReport
		if err := workflow.ExecuteActivity(actx, purgeActs.PurgeBatch, activities.PurgeBatchInput{Limit: in.Batch}).Get(ctx, &rep); err != nil {
			return res, fmt.Errorf("purge batch %d: %w", res.Batches+1, err)
		}
		res.Batches++
		res.Jobs += rep.Jobs
		res.Keys += rep.Keys
		res.More = rep.More
		if !rep.More {
			break
		}
	}
	workflow.GetLogger(ctx).Info("purge done", "jobs", res.Jobs, "keys", res.Keys, "batches", res.Batches, "more", res.More)
	return res, nil
}
