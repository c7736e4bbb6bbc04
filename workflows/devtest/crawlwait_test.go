//go:build dev

package devtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/archiveflow/archiveflow/internal/crawltest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestCrawlContinueOfAWaitingStartPageOnDevServer: the start page ends
// transiently and waits for its later retry (4 s); the crawl's duration
// limit (2 s) ends the wait and the crawl, the start page left waiting.
// Meanwhile the crawl showed as waiting (its status query). Continued
// (retry --continue, no limit), the new run waits for the start page and
// runs it as the start page, then crawls its links. Both runs' histories
// replay and are recorded for the replay test (GetVersion
// crawl-waiting-shown, waiting-state-shown, crawl-continue-start-page).
func TestCrawlContinueOfAWaitingStartPageOnDevServer(t *testing.T) {
	e := start(t)
	q := e.queue + "-crawlwait"
	fake := crawltest.New(20, 3)
	fake.SeedTransient = 1
	fakeCrawlWorker(t, e.c, q, fake)
	in := crawlInput("devtestcrawlwait", q, 4, 8000)
	in.PageRetryLater = []time.Duration{4 * time.Second}
	in.Settings.MaxDuration = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	opts := client.StartWorkflowOptions{ID: in.Crawl.Job.Ident, TaskQueue: q}
	run, err := e.c.ExecuteWorkflow(ctx, opts, workflows.CrawlWorkflow, in)
	require.NoError(t, err)
	var waiting workflows.CrawlStatus
	require.Eventually(t, func() bool {
		v, err := e.c.QueryWorkflow(ctx, in.Crawl.Job.Ident, run.GetRunID(), workflows.QueryStatus)
		return err == nil && v.Get(&waiting) == nil && waiting.State == workflows.StateWaiting
	}, 10*time.Second, 20*time.Millisecond, "the crawl never showed as waiting: %+v", &waiting)
	assert.NotNil(t, waiting.RetryAt)
	var st workflows.CrawlStatus
	require.NoError(t, run.Get(ctx, &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	require.Equal(t, "duration limit 2s reached", st.Limit)
	require.EqualValues(t, 1, st.Counts.Waiting)
	h := history(ctx, t, e.c, in.Crawl.Job.Ident, run.GetRunID())
	replayCrawl(t, h)
	recordCrawlAs(t, h, "first", waitingHistories)

	in.Settings = st.Settings
	in.Settings.MaxDuration = 0
	in.Rerun = &workflows.CrawlRerun{PreviousRunID: run.GetRunID(), SettingsVersion: st.SettingsVersion, Rules: st.Rules, Continue: true}
	next, err := e.c.ExecuteWorkflow(ctx, opts, workflows.CrawlWorkflow, in)
	require.NoError(t, err)
	require.NoError(t, next.Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	r := fake.Report()
	assert.Equal(t, 2, r.SeedRuns, "run again as the start page")
	assert.Zero(t, r.PageRuns[1], "never as an ordinary page")
	assert.EqualValues(t, 20, r.Done)
	assert.Empty(t, r.Twice)
	h = history(ctx, t, e.c, in.Crawl.Job.Ident, next.GetRunID())
	replayCrawl(t, h)
	recordCrawlAs(t, h, "continue", waitingHistories)
}

// waitingHistories names the recordings of this file's generation.
const waitingHistories = "waitingstate"
