package workflows

import "go.temporal.io/sdk/worker"

// Register registers SnapshotWorkflow, BackgroundHookWorkflow and
// PurgeWorkflow with a worker of a pool's shared task queue. That worker
// must also register the *activities.PoolActivities (the Redis writes run
// as local activities in it) and, on the purge Schedule's queue, the
// *activities.PurgeActivities.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflow(SnapshotWorkflow)
	r.RegisterWorkflow(BackgroundHookWorkflow)
	r.RegisterWorkflow(PurgeWorkflow)
}
