package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The job workflows' registered names (a run's workflow type).
const (
	SnapshotWorkflowName = "SnapshotWorkflow"
	CrawlWorkflowName    = "CrawlWorkflow"
)

// Register registers SnapshotWorkflow, BackgroundHookWorkflow and
// CrawlWorkflow and PurgeWorkflow with a worker of a pool's shared task
// queue. That worker must also register the *activities.PoolActivities and
// *activities.CrawlActivities (the Redis and frontier writes run as local
// activities in it) and, on the purge Schedule's queue, the
// *activities.PurgeActivities.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(SnapshotWorkflow, workflow.RegisterOptions{Name: SnapshotWorkflowName})
	r.RegisterWorkflow(BackgroundHookWorkflow)
	r.RegisterWorkflowWithOptions(CrawlWorkflow, workflow.RegisterOptions{Name: CrawlWorkflowName})
	r.RegisterWorkflow(PurgeWorkflow)
}
