//go:build dev

package devtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestCrawlStartPageOnDevServer runs a SnapshotWorkflow in the role of a
// crawl's start page (Job.CrawlPage) as internal/submit builds it for a
// crawl submitted paused: it waits, follows the settings the crawl
// signals it, fails a hook whose attempts ran out at once instead of
// waiting for a later retry (the crawl retries the page), and writes its
// hooks' results only: the crawl owns the job hash. Its
// recorded history guards the start page's own branches in the replay
// test (jobhash.go pageHash, retrylater.go).
func TestCrawlStartPageOnDevServer(t *testing.T) { testCrawlStartPage(t, false) }

// TestCrawlStartPageHostStepsOnDevServer runs it with host steps.
func TestCrawlStartPageHostStepsOnDevServer(t *testing.T) { testCrawlStartPage(t, true) }

func testCrawlStartPage(t *testing.T, hostSteps bool) {
	e := start(t)
	e.hostSteps = hostSteps
	e.hook("a", "on_Snapshot__10_a.sh", `echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	e.hook("flaky", "on_Snapshot__20_flaky.sh", `n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; [ $n -ge 2 ] || exit 1; echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	e.hook("soft", "on_Snapshot__30_soft.sh", `echo '{"type":"ArchiveResult","status":"failed","error":"no title"}'`)
	e.hook("always", "on_Snapshot__31_always.sh", `exit 1`)

	ident := "devteststartpage"
	if hostSteps {
		ident += "hoststeps"
	}
	in := e.input(ident, 0) // the crawl was submitted paused
	in.Job.CrawlPage = true
	in.Job.FetchDepth = model.FetchShallow
	// Later retries are on for snapshots (a snapshot would wait an hour
	// for always's); a crawl page is never retried later by its snapshot.
	in.RetryLater = &workflows.RetryLater{Default: []time.Duration{time.Hour}}
	workflowID := workflows.CrawlSeedID(ident)

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: e.queue, StaticSummary: in.Job.URL}, workflows.SnapshotWorkflow, in)
	require.NoError(t, err)
	e.awaitPlan(ctx, run, 4)
	assert.NoFileExists(t, e.events, "no hook runs at concurrency 0")
	// The crawl resumes: it signals its start page the new settings
	// (crawlcontrol.go applySettings).
	require.NoError(t, e.c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.SignalSetSettings, model.Settings{Concurrency: 1}))
	var st workflows.Status
	require.NoError(t, run.Get(ctx, &st))
	e.record(ctx, run)

	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Equal(t, 1, st.Settings.Concurrency, "the start page follows the crawl's settings")
	res := map[string]model.ArchiveResult{}
	for _, h := range st.Hooks {
		require.NotNil(t, h.Result, h.Hook)
		res[h.Plugin] = *h.Result
	}
	assert.Equal(t, model.StatusSucceeded, res["a"].Status)
	assert.Equal(t, model.StatusSucceeded, res["flaky"].Status, res["flaky"].Error)
	assert.Equal(t, 2, res["flaky"].Attempts)
	assert.Equal(t, model.StatusFailed, res["soft"].Status)
	assert.Equal(t, model.StatusFailed, res["always"].Status, "failed for good, not waiting")
	assert.Nil(t, res["always"].RetryAt, "no later retry")
	assert.Equal(t, 3, res["always"].Attempts)

	e.store.mu.Lock()
	defer e.store.mu.Unlock()
	assert.Zero(t, e.store.hashWrites, "no step, state or settings write: the crawl owns the job hash")
	assert.Empty(t, e.store.finishes, "the crawl finishes the job, not its start page")
	require.Len(t, e.store.results, 4, "one result per hook")
	for _, r := range e.store.results {
		assert.True(t, r.CrawlPage, "%s: the crawl counts a start page's fetches", r.Result.Plugin)
	}
}
