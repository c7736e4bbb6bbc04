//go:build dev

package devtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// upsertedSteps lists the ArchiveflowStep value of every search-attribute
// upsert in the run's history, in order.
func (e *env) upsertedSteps(run client.WorkflowRun) []int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	it := e.c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var steps []int64
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		p := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()[searchattr.NameStep]
		if p == nil {
			continue
		}
		var step int64
		require.NoError(e.t, converter.GetDefaultDataConverter().FromPayload(p, &step))
		steps = append(steps, step)
	}
	return steps
}

// currentStep reads ArchiveflowStep from the running workflow.
func (e *env) currentStep(run client.WorkflowRun) (int64, bool) {
	d, err := e.c.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
	if err != nil {
		return 0, false
	}
	p := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[searchattr.NameStep]
	var step int64
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &step) != nil {
		return 0, false
	}
	return step, true
}

// Steps shorter than step_attribute_delay are not upserted one by one, and
// neither is the active state: only the final state writes the search
// attributes (with the step of the end).
func TestStepAttributeSkipsShortStepsOnDevServer(t *testing.T) {
	e := start(t)
	for _, name := range []string{"on_Snapshot__00_a.sh", "on_Snapshot__10_b.sh", "on_Snapshot__30_c.sh", "on_Snapshot__60_d.sh", "on_Snapshot__90_e.sh"} {
		e.hook(name[12:len(name)-3], name, `true`)
	}
	in := e.input("devteststepshort", 4)
	in.Timing.StepAttributeDelay = time.Hour // never reached by this snapshot
	var run client.WorkflowRun
	st := e.execute(in, func(r client.WorkflowRun) { run = r })

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, []int64{9}, e.upsertedSteps(run), "the end after step 9: no per-step upserts, no upsert of a short active state")
}

// Without the delay every step with hooks is upserted as it starts (the
// behaviour of every input recorded before the field existed).
func TestStepAttributeWithoutDelayOnDevServer(t *testing.T) {
	e := start(t)
	for _, name := range []string{"on_Snapshot__00_a.sh", "on_Snapshot__30_c.sh", "on_Snapshot__90_e.sh"} {
		e.hook(name[12:len(name)-3], name, `true`)
	}
	var run client.WorkflowRun
	st := e.execute(e.input("devteststepeach", 4), func(r client.WorkflowRun) { run = r })

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, []int64{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9}, e.upsertedSteps(run))
}

// A step that lasts longer than the delay shows in ArchiveflowStep while it
// runs.
func TestStepAttributeShowsALongStepOnDevServer(t *testing.T) {
	e := start(t)
	gate := filepath.Join(t.TempDir(), "gate")
	e.hook("a", "on_Snapshot__00_a.sh", `true`)
	e.hook("b", "on_Snapshot__10_b.sh", `true`)
	e.hook("gated", "on_Snapshot__30_gated.sh", `while [ ! -e "`+gate+`" ]; do sleep 0.02; done`)
	e.hook("z", "on_Snapshot__90_z.sh", `true`)
	in := e.input("devteststeplong", 4)
	in.Timing.StepAttributeDelay = 200 * time.Millisecond

	var run client.WorkflowRun
	st := e.execute(in, func(r client.WorkflowRun) {
		run = r
		require.Eventually(t, func() bool {
			step, ok := e.currentStep(r)
			return ok && step == 3
		}, deadline, 20*time.Millisecond, "the gated step 3 never showed in ArchiveflowStep")
		require.NoError(t, os.WriteFile(gate, nil, 0o644))
	})

	assert.Equal(t, model.StateFinished, st.State)
	steps := e.upsertedSteps(run)
	assert.Contains(t, steps, int64(3))
	assert.Equal(t, int64(9), steps[len(steps)-1], "the end after step 9")
}
