package workflows_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/crawltest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// batchInput is crawlInput with page batches of up to pages pages.
func batchInput(concurrency, pages int) workflows.CrawlInput {
	in := crawlInput(concurrency)
	in.Timing.BatchPages, in.Timing.BatchTime = pages, 20*time.Second
	return in
}

// TestCrawlInBatchesRunsEveryPageOnce: with page batches every page ends
// exactly once (a transient one twice), in batches of the claim's size,
// and the history holds a few events per batch, not per page.
func TestCrawlInBatchesRunsEveryPageOnce(t *testing.T) {
	fake := crawltest.New(600, 3)
	fake.TransientOnce = map[int64]bool{5: true, 40: true}
	st, runs := runCrawl(t, fake, batchInput(8, 50))
	require.Len(t, runs, 1)
	r := fake.Report()
	assert.Equal(t, int64(600), r.Done, "every page ends")
	assert.Empty(t, r.Twice, "no page ends twice")
	assert.Equal(t, int64(601), r.Runs, "599 pages, two retried once")
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, int64(0), st.Counts.Queued())
	assert.Equal(t, []string{"host-1", "host-seed"}, st.Hosts)
	assert.GreaterOrEqual(t, r.Batches, int64(12), "at most 50 pages a batch")
	perPage := float64(runs[0]) / 600
	assert.Less(t, perPage, 0.5, "modelled history events per page (single pages: ~7)")
	t.Logf("%d batches, modelled history events per page %.2f", r.Batches, perPage)
}

// TestCrawlInBatchesHandsOnAtItsHistoryBudget: a batched crawl still
// continues as new at crawl.history_events, every page once.
func TestCrawlInBatchesHandsOnAtItsHistoryBudget(t *testing.T) {
	fake := crawltest.New(5000, 10)
	in := batchInput(4, 10)
	in.Timing.HistoryEvents = 200
	st, runs := runCrawl(t, fake, in)
	r := fake.Report()
	assert.Equal(t, int64(5000), r.Done)
	assert.Empty(t, r.Twice)
	assert.Equal(t, model.StateFinished, st.State)
	assert.Greater(t, len(runs), 1, "the run continued as new")
	assert.Equal(t, int64(4999), st.PagesLaunched)
	for i, n := range runs {
		assert.LessOrEqual(t, n, in.Timing.HistoryEvents+eventsPerPage+20, "run %d", i+1)
	}
}

// TestCrawlBatchAbortReleasesItsPages: an abort cancels the batch in
// flight and releases its pages.
func TestCrawlBatchAbortReleasesItsPages(t *testing.T) {
	fake := crawltest.New(50, 5)
	env := newCrawlEnv(t, fake)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalAbort, workflows.AbortRequest{Reason: "test", By: "me"})
	}, time.Minute)
	env.OnActivity("RunPageBatch", mock.Anything, mock.Anything).After(time.Hour).Return(
		func(ctx context.Context, in activities.RunPageBatchInput) (activities.BatchResult, error) {
			return activities.BatchResult{}, ctx.Err()
		})
	env.ExecuteWorkflow(workflows.CrawlWorkflow, batchInput(4, 50))
	require.NoError(t, env.GetWorkflowError())
	var st workflows.CrawlStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, model.StateAborted, st.State)
	assert.Zero(t, st.Counts.Claimed, "the batch's claims are released")
	assert.Equal(t, int64(5), st.Counts.Ready, "the start page's five links")
	assert.Equal(t, int64(1), st.Counts.Done)
}

// TestCrawlBatchFailureIsRecorded: a batch that fails for good ends its
// pages still claimed transient: they run again in a later batch, and
// every page ends once.
func TestCrawlBatchFailureIsRecorded(t *testing.T) {
	fake := crawltest.New(20, 3)
	acts := fake.Activities()
	env := newCrawlEnv(t, fake)
	failed := false
	env.OnActivity("RunPageBatch", mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunPageBatchInput) (activities.BatchResult, error) {
			if !failed && len(in.Pages) > 0 && in.Pages[0].ID == 2 {
				failed = true
				return activities.BatchResult{}, temporal.NewNonRetryableApplicationError("worker lost", "test", nil)
			}
			return acts.RunPageBatch(ctx, in)
		})
	env.ExecuteWorkflow(workflows.CrawlWorkflow, batchInput(4, 2))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var st workflows.CrawlStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, model.StateFinished, st.State)
	r := fake.Report()
	assert.Zero(t, r.Failed, "the failed batch's pages ran again")
	assert.Equal(t, int64(20), r.Done)
	assert.Empty(t, r.Twice)
	assert.Equal(t, 1, r.PageRuns[2], "page 2 ran in a later batch (its first batch failed before running it)")
}

// TestCrawlRunsBatchesAtOnceWithShares: with crawl.batch_concurrency 4 a
// crawl of concurrency 8 runs two batches at once (on any workers), each
// holding 4 of the 8, never more; every page ends once. A full batch (20
// pages: 40 split as the concurrency) waits (2 s at most) for a second
// one to be running, so a workflow that runs one batch at a time fails.
func TestCrawlRunsBatchesAtOnceWithShares(t *testing.T) {
	fake := crawltest.New(400, 6)
	acts := fake.Activities()
	in := batchInput(8, 40)
	in.Timing.BatchConcurrency = 4
	var mu sync.Mutex
	running, most, shares := 0, 0, 0
	two := make(chan struct{})
	st, _ := runCrawlWith(t, fake, in, func(env *crawlEnv) {
		env.SetTestTimeout(time.Minute)
		env.OnActivity("RunPageBatch", mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.RunPageBatchInput) (activities.BatchResult, error) {
				mu.Lock()
				running++
				shares += in.Share
				most = max(most, running)
				assert.Equal(t, 8, in.ShareOf)
				assert.LessOrEqual(t, shares, 8, "the batches at once hold at most the concurrency")
				if running == 2 {
					select {
					case <-two:
					default:
						close(two)
					}
				}
				mu.Unlock()
				if len(in.Pages) == 20 {
					select {
					case <-two:
					case <-time.After(2 * time.Second):
					}
				}
				res, err := acts.RunPageBatch(ctx, in)
				mu.Lock()
				running--
				shares -= in.Share
				mu.Unlock()
				return res, err
			})
	})
	assert.Equal(t, model.StateFinished, st.State)
	r := fake.Report()
	assert.Equal(t, int64(400), r.Done)
	assert.Empty(t, r.Twice)
	assert.Equal(t, 2, most, "two batches ran at once, never more")
}
