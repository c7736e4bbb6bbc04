package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/archiveflow/archiveflow/internal/model"
)

// A hook the worker's plan says cannot run on its host (SkipReason: a
// missing binary, a malformed plugin, a name breaking the grammar) is
// recorded skipped with that reason and never started, per hook and under
// host steps alike; the hooks around it run.
func TestHookSkippedAtPlanningIsNeverStarted(t *testing.T) {
	const (
		before = "on_Snapshot__10_before.sh"
		needy  = "on_Snapshot__20_needy.sh"
		after  = "on_Snapshot__30_after.sh"
		reason = "plugin needy needs binary node from {NODE_BINARY} (config.json): not found on the hooks' PATH"
	)
	for name, in := range map[string]SnapshotInput{"per hook": input(2), "host steps": hostSteps(2)} {
		t.Run(name, func(t *testing.T) {
			p := plan(before, needy, after)
			p.Hooks[1].SkipReason = reason
			h := newHarness(t, p)
			st := h.run(in)
			assert.Equal(t, model.StateFinished, st.State, st.Error)
			res := result(t, st, needy)
			assert.Equal(t, model.StatusSkipped, res.Status)
			assert.Equal(t, reason, res.OutputStr)
			ev := h.runner.snapshot()
			assert.Zero(t, count(ev, needy, "start"), "never started")
			for _, ran := range []string{before, after} {
				assert.Equal(t, model.StatusSucceeded, result(t, st, ran).Status, ran)
			}
		})
	}
}
