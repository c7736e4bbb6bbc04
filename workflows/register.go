package workflows

import "go.temporal.io/sdk/worker"

// Register registers SnapshotWorkflow and BackgroundHookWorkflow with a
// worker of a pool's shared task queue. That worker must also register the
// *activities.Activities: the Redis writes run as local activities in it.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflow(SnapshotWorkflow)
	r.RegisterWorkflow(BackgroundHookWorkflow)
}
