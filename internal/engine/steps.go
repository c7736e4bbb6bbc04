package engine

import (
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/logging"
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

// readiness gives p abx-dl's readiness rule for specs' background hooks:
// the hooks after one wait for its first line of stdout for at most its
// timeout (plan gives every hook one) plus Config.ReadyMargin; a wait
// that runs out is logged.
func (e *Engine) readiness(p steprun.Policy, specs []activities.HookSpec, log *zap.Logger) steprun.Policy {
	p.ReadyWait = func(i int) time.Duration {
		return specs[i].Timeout + e.cfg.ReadyMargin
	}
	p.NotReady = func(i int) {
		log.Warn("background hook not ready (no line on stdout) within its wait; launching the next hooks anyway",
			logging.Hook(specs[i].Key()))
	}
	return p
}
