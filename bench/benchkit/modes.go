package benchkit

import "fmt"

// StepMode is one granularity of a snapshot's hooks (job.host_steps):
// one activity per foreground hook (the default) or one per run of steps.
type StepMode struct {
	Name      string // "perhook" or "hoststeps": the sub-benchmark's name
	HostSteps bool
}

// StepModes are the modes a benchmark runs for its -hoststeps flag:
// "both" (each, in one run, per-hook first), "true" or "false".
func StepModes(flag string) ([]StepMode, error) {
	perHook, hostSteps := StepMode{Name: "perhook"}, StepMode{Name: "hoststeps", HostSteps: true}
	switch flag {
	case "both", "":
		return []StepMode{perHook, hostSteps}, nil
	case "true":
		return []StepMode{hostSteps}, nil
	case "false":
		return []StepMode{perHook}, nil
	}
	return nil, fmt.Errorf("-hoststeps %q: want both, true or false", flag)
}
