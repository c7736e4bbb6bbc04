package engine

import (
	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/steprun"
)

// runnable splits a plan for the step runner: the hooks it launches (specs,
// and hooks in the runner's terms, index for index) and those whose
// configuration failed; disabled hooks are in neither.
func runnable(plan activities.Plan) (specs []activities.HookSpec, hooks []steprun.Hook, bad []activities.HookSpec) {
	for _, h := range plan.Hooks {
		switch h.Launch() {
		case activities.LaunchSkip:
			continue
		case activities.LaunchConfigFailed:
			bad = append(bad, h)
			continue
		}
		specs = append(specs, h)
		hooks = append(hooks, steprun.Hook{Step: h.Step, Background: h.Background})
	}
	return specs, hooks, bad
}
