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
