//go:build dev

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// A job whose "slow" hook failed is retried: only that hook runs again (its
// gate now lets it succeed), the "fetch" hook's result and log are left as
// they were, and the counters move the hook from failed to succeeded once.
func TestRetryRunsOnlyTheFailedHook(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("retry")
	id := identOf(t, url)
	gate := filepath.Join(e.gates, id)
	require.NoError(t, os.WriteFile(gate, []byte("fail"), 0o644))

	res := e.run(t, "submit", url, "--wait")
	require.Equal(t, exitOK, res.code, "one failed hook does not fail the job: %s", res.stderr)
	before := e.status(t, id)
	require.Equal(t, model.StateFinished, before.State)
	require.Len(t, before.Hooks, 2)
	require.Equal(t, model.StatusFailed, before.Hooks[1].Status)
	require.EqualValues(t, 1, before.HooksFailed)
	require.NotEmpty(t, before.ExpiresIn, "a finished job has its retention")
	res = e.run(t, "logs", id)
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 1, strings.Count(res.stdout, "fetch hook says hello"))

	require.NoError(t, os.WriteFile(gate, nil, 0o644)) // succeeds from now on
	res = e.run(t, "retry", id, "--wait")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "retrying 1 failed hook(s) of "+id)
	assert.Contains(t, res.stdout, "slow/on_Snapshot__20_slow.sh")

	after := e.status(t, id)
	assert.Equal(t, model.StateFinished, after.State)
	assert.NotEqual(t, before.RunID, after.RunID, "a new run of the same job")
	assert.Equal(t, before.WorkflowID, after.WorkflowID)
	require.Len(t, after.Hooks, 2)
	assert.Equal(t, before.Hooks[0], after.Hooks[0], "the fetch hook's result is untouched")
	assert.Equal(t, model.StatusSucceeded, after.Hooks[1].Status)
	assert.Equal(t, "gate opened", after.Hooks[1].Output)
	assert.EqualValues(t, 2, after.HooksSucceeded, "counted once")
	assert.Zero(t, after.HooksFailed)
	assert.Equal(t, before.Bytes, after.Bytes, "fetch's bytes are not counted again")
	assert.NotEmpty(t, after.ExpiresIn, "the retention applies again")
	res = e.run(t, "logs", id)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Equal(t, 1, strings.Count(res.stdout, "fetch hook says hello"), "fetch did not run again")
	assert.Contains(t, res.stdout, "slow hook waiting for its gate")

	res = e.run(t, "retry", id)
	assert.Equal(t, exitConflict, res.code)
	assert.Contains(t, res.stderr, "no hook failed")
}

// A job that still runs is not retried.
func TestRetryIsRefusedWhileTheJobRuns(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("retry-running")
	id := identOf(t, url)
	res := e.run(t, "submit", url)
	require.Equal(t, exitOK, res.code, res.stderr)
	e.waitState(t, id, "active")

	res = e.run(t, "retry", id)
	assert.Equal(t, exitConflict, res.code)
	assert.Contains(t, res.stderr, "is still active: wait for it to end (or abort it) before retrying")

	e.open(t, id)
	e.waitState(t, id, "finished")
	res = e.run(t, "retry", "never0submitted")
	assert.Equal(t, exitNotFound, res.code)
}

// An aborted job is un-aborted through retry's path: the hook the abort
// stopped runs again, the fetch hook's result is kept, and the job ends
// finished. Retry refuses the
// aborted job and names unabort; unabort refuses a job not aborted.
func TestUnabortRunsWhatTheAbortStopped(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("unabort")
	id := identOf(t, url)
	res := e.run(t, "submit", url)
	require.Equal(t, exitOK, res.code, res.stderr)
	e.waitState(t, id, "active")
	require.Eventually(t, func() bool {
		h := e.status(t, id).Hooks
		return len(h) == 2 && h[0].Status == model.StatusSucceeded
	}, eventually, 50*time.Millisecond, "the fetch hook ran")
	res = e.run(t, "abort", id)
	require.Equal(t, exitOK, res.code, res.stderr)
	e.waitState(t, id, "aborted")
	before := e.status(t, id)

	res = e.run(t, "retry", id)
	assert.Equal(t, exitConflict, res.code)
	assert.Contains(t, res.stderr, "starter unabort")

	e.open(t, id)
	res = e.run(t, "unabort", id, "--wait")
	require.Equal(t, exitOK, res.code, "%s%s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "slow/on_Snapshot__20_slow.sh")
	after := e.status(t, id)
	assert.Equal(t, model.StateFinished, after.State)
	assert.NotEqual(t, before.RunID, after.RunID, "a new run of the same job")
	require.Len(t, after.Hooks, 2)
	assert.Equal(t, before.Hooks[0], after.Hooks[0], "the fetch hook's result is kept")
	assert.Equal(t, model.StatusSucceeded, after.Hooks[1].Status)
	assert.EqualValues(t, 2, after.HooksSucceeded)
	assert.Zero(t, after.HooksFailed)

	res = e.run(t, "unabort", id)
	assert.Equal(t, exitConflict, res.code)
	assert.Contains(t, res.stderr, "it was not aborted")
}
