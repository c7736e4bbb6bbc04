package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// A retry runs only the hooks that failed, keeps every other result as it
// was (not run, not written again), reopens the job in Redis once, and
// ends with the new results in place of the failed ones.
func TestRerunRunsOnlyTheFailedHooks(t *testing.T) {
	const (
		ok   = "on_Snapshot__10_ok.sh"
		bad  = "on_Snapshot__20_bad.sh"
		bg   = "on_Snapshot__30_bg.bg.sh"
		soft = "on_Snapshot__40_soft.sh"
	)
	p := plan(ok, bad, bg, soft)
	first := newHarness(t, p)
	first.runner.on(bad, transient)
	first.runner.on(soft, softFail)
	st := first.run(input(2))
	// The background hook either started before the seal (and was stopped
	// there: succeeded) or did not (skipped); the test suite's scheduling
	// decides. Neither is a failure, so a retry never runs it again.
	bgWas := result(t, st, bg).Status
	require.Contains(t, []model.Status{model.StatusSucceeded, model.StatusSkipped}, bgWas)
	bgOK, bgSkipped := 0, 0
	if bgWas == model.StatusSucceeded {
		bgOK = 1
	} else {
		bgSkipped = 1
	}
	require.Equal(t, activities.Counters{Total: 4, Succeeded: 1 + bgOK, Skipped: bgSkipped, Failed: 2}, st.Counters)

	rerun, err := RerunOf("run-1", st)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"bad/" + bad, "soft/" + soft}, rerun.Hooks)
	assert.Len(t, rerun.Kept, 2)

	second := newHarness(t, p)
	second.runner.on(soft, softFail) // still fails
	in := input(2)
	in.Rerun = rerun
	st2 := second.run(in)

	ev := second.runner.snapshot()
	assert.Zero(t, count(ev, ok, "start"), "a succeeded hook is not run again")
	assert.Zero(t, count(ev, bg, "start"), "a background hook that did not fail is not run again")
	assert.Equal(t, 1, count(ev, bad, "start"))
	assert.Equal(t, 1, count(ev, soft, "start"))
	assert.Equal(t, result(t, st, ok), result(t, st2, ok), "the kept result is the previous one")
	assert.Equal(t, model.StatusSucceeded, result(t, st2, bad).Status)
	assert.Equal(t, model.StatusFailed, result(t, st2, soft).Status)
	assert.Equal(t, model.StateFinished, st2.State)
	assert.Equal(t, bgWas, result(t, st2, bg).Status, "the background hook keeps its result")
	assert.Equal(t, activities.Counters{Total: 4, Succeeded: 2 + bgOK, Skipped: bgSkipped, Failed: 1}, st2.Counters)

	require.Len(t, second.store.reopens, 1)
	assert.Equal(t, 2, second.store.reopens[0].Hooks)
	assert.Len(t, second.store.results, 2, "only the hooks run again are recorded")
	require.Len(t, second.sealer.all(), 1)
	assert.Len(t, second.sealer.all()[0].Results, 4, "the seal indexes every result, kept ones included")
}

func TestRerunOfNothingFailedIsRefused(t *testing.T) {
	st := Status{Ident: testIdent, Hooks: []HookStatus{{Plugin: "a", Hook: "h", Phase: PhaseDone,
		Result: &model.ArchiveResult{Plugin: "a", Hook: "h", Status: model.StatusSucceeded}}}}
	_, err := RerunOf("run-1", st)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no hook to run again (none failed)")

	in := input(1)
	in.Rerun = &Rerun{PreviousRunID: "run-1"}
	assert.ErrorContains(t, in.Validate(), "no hook to run again")
}
