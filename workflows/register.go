package workflows

import "go.temporal.io/sdk/worker"

// Register registers SnapshotWorkflow, BackgroundHookWorkflow and
// CrawlWorkflow and PurgeWorkflow with a worker of a pool's shared task
// queue. That worker must also register the *activities.PoolActivities and
// *activities.CrawlActivities (the Redis and frontier writes run as local
// activities in it) and, on the purge Schedule's queue, the
// *activities.PurgeActivities.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflow(SnapshotWorkflow)
	r.RegisterWorkflow(BackgroundHookWorkflow)
	r.RegisterWorkflow(CrawlWorkflow)
	r.RegisterWorkflow(PurgeWorkflow)
}
