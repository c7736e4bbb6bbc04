package activities

import "slices"

// The step/plan rules of DESIGN.md §3-4 have this one owner: the snapshot
// workflow (which launches hooks as activities) and the crawl page runner
// (which runs a page's hooks on one host) both plan with these.

// Launch is how a hook of a plan starts.
type Launch int

// Launch kinds.
const (
	// LaunchSkip: <PLUGIN>_ENABLED is off, or discovery found a reason it
	// cannot run here (SkipReason); recorded skipped, not started.
	LaunchSkip Launch = iota
	// LaunchConfigFailed: the plugin's configuration is invalid; recorded
	// failed, not started.
	LaunchConfigFailed
	// LaunchBackground: started and left running across steps; stopped
	// (SIGTERM, grace, SIGKILL) when the snapshot or page ends.
	LaunchBackground
	// LaunchForeground: blocks its step; takes a concurrency slot.
	LaunchForeground
)

// Launch says how h starts.
func (h HookSpec) Launch() Launch {
	switch {
	case !h.Enabled || h.SkipReason != "":
		return LaunchSkip
	case h.ConfigError != "":
		return LaunchConfigFailed
	case h.Background:
		return LaunchBackground
	}
	return LaunchForeground
}

// TakesSlot reports whether h counts against the concurrency of its step:
// only foreground hooks that start do.
func (h HookSpec) TakesSlot() bool { return h.Launch() == LaunchForeground }

// StepLimit is how many foreground hooks of step may run at once: the
// job's concurrency (0 pauses), 1 in a sequential step.
func StepLimit(concurrency, step int, sequential []int) int {
	if concurrency > 1 && slices.Contains(sequential, step) {
		return 1
	}
	return concurrency
}

// Steps lists the steps that have hooks, in order.
func (p Plan) Steps() []int {
	var out []int
	for _, h := range p.Hooks {
		if len(out) == 0 || out[len(out)-1] != h.Step {
			out = append(out, h.Step)
		}
	}
	return out
}

// Only is the plan restricted to the hooks of plugins, in plan order.
func (p Plan) Only(plugins []string) Plan {
	out := Plan{Hooks: []HookSpec{}}
	for _, h := range p.Hooks {
		if slices.Contains(plugins, h.Plugin) {
			out.Hooks = append(out.Hooks, h)
		}
	}
	return out
}
