package workflows

import "go.temporal.io/sdk/worker"

// Register registers SnapshotWorkflow, BackgroundHookWorkflow and
// CrawlWorkflow with a worker of a pool's shared task queue. That worker
// must also register the *activities.PoolActivities and
// *activities.CrawlActivities: the Redis and frontier writes run as local
// activities in it.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflow(SnapshotWorkflow)
	r.RegisterWorkflow(BackgroundHookWorkflow)
	r.RegisterWorkflow(CrawlWorkflow)
}
