package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// runLater runs in and returns the input of the later retry the run
// continued as new with (it must have).
func (h *harness) runLater(in SnapshotInput) SnapshotInput {
	h.t.Helper()
	h.env.ExecuteWorkflow(SnapshotWorkflow, in)
	require.True(h.t, h.env.IsWorkflowCompleted(), "workflow did not complete")
	var can *workflow.ContinueAsNewError
	require.True(h.t, errors.As(h.env.GetWorkflowError(), &can), "want a later retry, got %v", h.env.GetWorkflowError())
	var next SnapshotInput
	require.NoError(h.t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

// writtenResults are the hook results the store holds, by hook file name.
func (s *fakeStore) writtenResults() map[string]model.ArchiveResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]model.ArchiveResult{}
	for _, in := range s.results {
		out[in.Result.Hook] = in.Result
	}
	return out
}

// laterInput is input(concurrency) with later retries after delays.
func laterInput(concurrency int, delays ...time.Duration) SnapshotInput {
	in := input(concurrency)
	in.RetryLater = &RetryLater{Default: delays}
	return in
}

// A hook whose attempts run out transiently waits each later-retry delay
// in turn, each wait one run that writes neither its waiting result nor a
// final state (the job is indexed in retry_at and taken out before the
// next run), and each retry runs only that hook again. When its last
// later retry fails too, the job finishes with it failed, written once;
// when one succeeds, with it succeeded.
func TestRetryLaterRunsAFailedHookAgainAfterEachDelay(t *testing.T) {
	const (
		ok    = "on_Snapshot__10_ok.sh"
		flaky = "on_Snapshot__20_flaky.sh"
	)
	key := "flaky/" + flaky
	p := plan(ok, flaky)
	in := laterInput(2, 10*time.Minute, time.Hour)
	// The results of these two runs are the same for both endings.
	first := newHarness(t, p)
	first.runner.on(flaky, transient)
	start := first.env.Now()
	next := first.runLater(in)
	require.NotNil(t, next.Rerun)
	assert.True(t, next.Rerun.Waiting)
	assert.Equal(t, []string{key}, next.Rerun.Hooks)
	assert.Equal(t, map[string]int{key: 1}, next.Rerun.Later)
	require.Len(t, next.Rerun.Kept, 1)
	assert.Equal(t, ok, next.Rerun.Kept[0].Hook)
	assert.Equal(t, 3, count(first.runner.snapshot(), flaky, "start"), "the retry policy's attempts first")
	st := first.query()
	assert.Equal(t, PhaseWaiting, st.Hooks[1].Phase)
	require.NotNil(t, st.Hooks[1].Result.RetryAt)
	assert.Equal(t, model.StatusFailed, st.Hooks[1].Result.Status)
	written := first.store.writtenResults()
	assert.Contains(t, written, ok)
	assert.NotContains(t, written, flaky, "a waiting result is not final: not written")
	assert.Empty(t, first.store.finishes, "the job does not end while a hook waits")
	assert.Empty(t, first.store.reopens)
	require.Len(t, first.store.retryAts, 2)
	assert.WithinDuration(t, start.Add(10*time.Minute), first.store.retryAts[0].At, 5*time.Second)
	assert.True(t, first.store.retryAts[1].At.IsZero(), "taken out of retry_at before the retry")

	second := newHarness(t, p)
	second.runner.on(flaky, transient)
	last := second.runLater(next)
	assert.Equal(t, map[string]int{key: 2}, last.Rerun.Later)
	assert.Zero(t, count(second.runner.snapshot(), ok, "start"), "a final result is kept, not run again")
	assert.Empty(t, second.store.writtenResults())
	assert.Empty(t, second.store.reopens, "a waiting job never ended: nothing to reopen")
	require.Len(t, second.store.retryAts, 2)

	t.Run("last later retry fails", func(t *testing.T) {
		third := newHarness(t, p)
		third.runner.on(flaky, transient)
		st := third.run(last)
		assert.Equal(t, model.StateFinished, st.State)
		res := result(t, st, flaky)
		assert.Equal(t, model.StatusFailed, res.Status)
		assert.Nil(t, res.RetryAt, "no delay left: failed for good")
		assert.Equal(t, activities.Counters{Total: 2, Succeeded: 1, Failed: 1}, st.Counters)
		written := third.store.writtenResults()
		require.Contains(t, written, flaky)
		assert.Len(t, written, 1, "the final failure is written once; the kept result not again")
		require.Len(t, third.store.finishes, 1)
		assert.Equal(t, st.Counters, third.store.finishes[0].Counters)
		assert.Empty(t, third.store.retryAts)
	})
	t.Run("a later retry succeeds", func(t *testing.T) {
		third := newHarness(t, p)
		st := third.run(last)
		assert.Equal(t, model.StatusSucceeded, result(t, st, flaky).Status)
		assert.Equal(t, activities.Counters{Total: 2, Succeeded: 2}, st.Counters)
	})
}

// An abort while hooks wait ends the wait: the job ends aborted with the
// waiting hook failed and written.
func TestAbortWhileWaitingForALaterRetry(t *testing.T) {
	const flaky = "on_Snapshot__20_flaky.sh"
	h := newHarness(t, plan(flaky))
	h.runner.on(flaky, transient)
	in := laterInput(1, time.Hour)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalAbort, AbortRequest{Reason: "test", By: "tester"})
	}, 30*time.Minute)
	st := h.run(in)
	assert.Equal(t, model.StateAborted, st.State)
	res := result(t, st, flaky)
	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Nil(t, res.RetryAt)
	assert.Contains(t, res.Error, "later retry not run")
	assert.Contains(t, h.store.writtenResults(), flaky)
	require.Len(t, h.store.finishes, 1)
}

// A soft failure (the hook's own failed record) is final: never retried
// later.
func TestRetryLaterLeavesASoftFailureFinal(t *testing.T) {
	const soft = "on_Snapshot__20_soft.sh"
	h := newHarness(t, plan(soft))
	h.runner.on(soft, softFail)
	in := laterInput(1, time.Hour)
	st := h.run(in)
	assert.Equal(t, model.StatusFailed, result(t, st, soft).Status)
	assert.Nil(t, result(t, st, soft).RetryAt)
	assert.Empty(t, h.store.retryAts)
}

// While a snapshot only waits for a hook's later retry, its status query
// says StateWaiting with the due time, its ArchiveflowState search
// attribute waiting and its details line "waiting (retry at …)".
func TestWaitingSnapshotShowsWaiting(t *testing.T) {
	const flaky = "on_Snapshot__20_flaky.sh"
	h := newHarness(t, plan(flaky))
	h.runner.on(flaky, transient)
	states := WatchShownStates(h.env)
	start := h.env.Now()
	var during Status
	var details string
	h.env.RegisterDelayedCallback(func() {
		during = h.query()
		details = CurrentDetails(t, h.env)
	}, 30*time.Minute)
	h.runLater(laterInput(1, time.Hour))
	assert.Equal(t, StateWaiting, during.State)
	require.NotNil(t, during.RetryAt)
	assert.WithinDuration(t, start.Add(time.Hour), *during.RetryAt, 5*time.Second)
	assert.Contains(t, details, "waiting (retry at "+during.RetryAt.UTC().Format(time.DateTime)+" UTC)")
	require.NotEmpty(t, *states)
	assert.Equal(t, "waiting", (*states)[len(*states)-1], "shown until the run continues as new: %v", *states)
	assert.Equal(t, 1, CountOf(*states, "waiting"))
}
