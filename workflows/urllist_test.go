package workflows_test

import (
	"context"
	"sync"
	"sync/atomic"
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

func urlListInput(concurrency int) workflows.CrawlInput {
	in := crawlInput(concurrency)
	in.URLList = &activities.URLList{URL: "http://lists.test/l.txt", MaxBytes: 1 << 20, MaxURLs: 100, FetchTimeout: time.Minute}
	return in
}

// TestURLListCrawlStartsFromEveryListedPage: a URL-list crawl runs no
// start-page snapshot; the listed pages and what they link are crawled
// once each, and the listed hosts become the scope's start URLs for every
// page (and the next run).
func TestURLListCrawlStartsFromEveryListedPage(t *testing.T) {
	fake := crawltest.New(60, 3)
	in := urlListInput(4)
	in.Timing.HistoryEvents = 150 // continue as new at least once
	var mu sync.Mutex
	var starts [][]string
	st, runs := runCrawlWith(t, fake, in, func(e *crawlEnv) {
		e.OnActivity("RunPage", mock.Anything, mock.Anything).Return(
			func(ctx context.Context, p activities.RunPageInput) (activities.PageResult, error) {
				mu.Lock()
				starts = append(starts, p.Crawl.Scope.StartURLs)
				mu.Unlock()
				return fake.Activities().RunPage(ctx, p)
			})
	})
	assert.Greater(t, len(runs), 1, "the crawl continued as new")
	r := fake.Report()
	assert.Equal(t, int64(60), r.Done)
	assert.Empty(t, r.Twice)
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Equal(t, []string{"host-1"}, st.Hosts, "no start-page snapshot ran on a host of its own")
	require.NotEmpty(t, starts)
	want := []string{"http://fake.test/p/1", "http://fake.test/p/2", "http://fake.test/p/3"}
	for _, s := range starts {
		assert.Equal(t, want, s)
	}
	assert.Equal(t, want, st.StartURLs, "the final status names the start URLs, for a retry")
}

// TestURLListCrawlFailsOnAListItCannotHave: a list refused by SeedURLList
// fails the crawl with the list named, and nothing is crawled.
func TestURLListCrawlFailsOnAListItCannotHave(t *testing.T) {
	fake := crawltest.New(10, 3)
	env := newCrawlEnv(t, fake)
	env.OnActivity("SeedURLList", mock.Anything, mock.Anything).Return(activities.SeedURLListResult{},
		temporal.NewNonRetryableApplicationError("url list http://lists.test/l.txt: the url list is refused: HTTP status 404 Not Found: must be 2xx", activities.ErrTypeURLList, nil))
	env.ExecuteWorkflow(workflows.CrawlWorkflow, urlListInput(4))
	require.NoError(t, env.GetWorkflowError())
	var st workflows.CrawlStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, model.StateFailed, st.State)
	assert.Equal(t, "url list http://lists.test/l.txt: the url list is refused: HTTP status 404 Not Found: must be 2xx", st.Error)
	r := fake.Report()
	assert.Zero(t, r.Runs, "no page ran")
	assert.Equal(t, model.StateFailed, r.Final)
}

// TestURLListCrawlRetryDoesNotSeedTheListAgain: a URL-list crawl whose
// page 1 (the list's first URL) failed is retried: the retry runs page 1
// again as an ordinary page from the frontier, with the list's start URLs
// (from the last status), and never downloads or seeds the list again, so
// a list gone since (404) does not fail the retry.
func TestURLListCrawlRetryDoesNotSeedTheListAgain(t *testing.T) {
	fake := crawltest.New(12, 3)
	fake.Failing = map[int64]bool{1: true}
	st, _ := runCrawl(t, fake, urlListInput(4))
	require.Equal(t, model.StateFinished, st.State, "a listed page that failed does not fail the crawl: %s", st.Error)
	require.Equal(t, int64(1), fake.Report().Failed)
	want := []string{"http://fake.test/p/1", "http://fake.test/p/2", "http://fake.test/p/3"}
	require.Equal(t, want, st.StartURLs)

	fake.Fix()
	fake.NewRun()
	in := retryInput(st, 1)
	in.URLList = urlListInput(4).URLList
	in.Crawl.Scope.StartURLs = st.StartURLs // internal/submit's crawlRerunInput
	var mu sync.Mutex
	lists := 0
	page1 := 0
	var starts [][]string
	st, _ = runCrawlWith(t, fake, in, func(e *crawlEnv) {
		e.OnActivity("SeedURLList", mock.Anything, mock.Anything).Return(
			func(context.Context, activities.SeedURLListInput) (activities.SeedURLListResult, error) {
				mu.Lock()
				lists++
				mu.Unlock()
				return activities.SeedURLListResult{}, temporal.NewNonRetryableApplicationError(
					"url list http://lists.test/l.txt: the url list is refused: HTTP status 404 Not Found: must be 2xx", activities.ErrTypeURLList, nil)
			})
		e.OnActivity("RunPage", mock.Anything, mock.Anything).Return(
			func(ctx context.Context, p activities.RunPageInput) (activities.PageResult, error) {
				mu.Lock()
				if p.Page.ID == 1 {
					page1++
				}
				starts = append(starts, p.Crawl.Scope.StartURLs)
				mu.Unlock()
				return fake.Activities().RunPage(ctx, p)
			})
	})
	assert.Zero(t, lists, "the retry downloads and seeds no list")
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	r := fake.Report()
	assert.Equal(t, int64(12), r.Done)
	assert.Zero(t, r.Failed)
	assert.Empty(t, r.Twice)
	assert.Equal(t, 2, r.PageRuns[1], "page 1 ran once more")
	assert.Equal(t, 1, page1, "page 1 ran as an ordinary page (RunPage)")
	require.NotEmpty(t, starts)
	for _, s := range starts {
		assert.Equal(t, want, s, "every page judges links with the list's start URLs")
	}
	assert.Equal(t, want, st.StartURLs)
}

// TestURLListCrawlContinueDoesNotSeedTheListAgain: a URL-list crawl
// stopped at its page limit and continued crawls the READY pages without
// downloading the list again (the continue never asks whether page 1 is
// READY: a URL-list crawl has no start page).
func TestURLListCrawlContinueDoesNotSeedTheListAgain(t *testing.T) {
	fake := crawltest.New(12, 3)
	in := urlListInput(1)
	in.Settings.MaxPages = 2
	st, _ := runCrawl(t, fake, in)
	require.Equal(t, "page limit 2 reached", st.Limit)
	require.Positive(t, st.Counts.Ready)

	fake.NewRun()
	next := retryInput(st, 0)
	next.URLList = in.URLList
	next.Crawl.Scope.StartURLs = st.StartURLs
	next.Rerun.Continue = true
	next.Settings.MaxPages = 0
	var lists atomic.Int32
	st, _ = runCrawlWith(t, fake, next, func(e *crawlEnv) {
		e.OnActivity("SeedURLList", mock.Anything, mock.Anything).Return(
			func(context.Context, activities.SeedURLListInput) (activities.SeedURLListResult, error) {
				lists.Add(1)
				return activities.SeedURLListResult{}, temporal.NewNonRetryableApplicationError("url list gone", activities.ErrTypeURLList, nil)
			})
	})
	assert.Zero(t, lists.Load(), "the continue downloads and seeds no list")
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	r := fake.Report()
	assert.Equal(t, int64(12), r.Done)
	assert.Empty(t, r.Twice)
}
