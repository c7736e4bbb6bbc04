package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/crawltest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// A crawl with a page limit ends finished at exactly that many pages,
// naming the limit, its other pages READY; a transient page charged
// before the limit is still retried. Continued (retry --continue, the
// limit lifted), it crawls the rest, no page twice.
func TestCrawlStopsAtItsPageLimitAndContinues(t *testing.T) {
	fake := crawltest.New(300, 3)
	fake.TransientOnce = map[int64]bool{5: true, 40: true}
	fake.HoldAtLimit = 100 // the last page charged is still in flight at the limit
	in := crawlInput(8)
	in.Settings.MaxPages = 100
	st, _ := runCrawl(t, fake, in)
	r := fake.Report()
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, "page limit 100 reached", st.Limit)
	assert.Empty(t, st.Error)
	assert.Equal(t, model.StateFinished, r.Final)
	assert.Equal(t, "page limit 100 reached", r.Limit, "FinishCrawl names the limit")
	assert.Equal(t, int64(100), r.Done, "exactly 100 pages, each ended (the transient ones retried)")
	assert.Equal(t, int64(100), st.Counts.Charged)
	assert.Positive(t, st.Counts.Ready, "the rest stays READY")
	assert.Zero(t, st.Counts.Claimed)
	assert.Len(t, r.PageRuns, 99, "99 pages besides the start page ran")
	assert.Contains(t, r.States, model.StateDraining, "the crawl drains its pages in flight at the limit")

	fake.NewRun()
	next := retryInput(st, 0)
	next.Rerun.Continue = true
	next.Settings.MaxPages = 0
	st2, _ := runCrawl(t, fake, next)
	r = fake.Report()
	assert.Equal(t, model.StateFinished, st2.State)
	assert.Empty(t, st2.Limit)
	assert.Equal(t, "", r.Limit)
	assert.Equal(t, int64(300), r.Done, "every page ends")
	assert.Empty(t, r.Twice, "no page ends twice")
	for id, n := range r.PageRuns {
		want := 1
		if fake.TransientOnce[id] {
			want = 2
		}
		assert.Equal(t, want, n, "page %d ran %d times", id, n)
	}
	assert.Zero(t, st2.Settings.MaxPages, "the continued crawl's settings are the job's")
}

// A byte limit stops claims once bytes_downloaded reached it: the pages
// in flight end, so it may be passed by up to a claim's pages.
func TestCrawlStopsAtItsByteLimit(t *testing.T) {
	fake := crawltest.New(300, 3)
	fake.PageBytes = 1000
	in := crawlInput(8)
	in.Settings.MaxBytes = 50_000
	st, _ := runCrawl(t, fake, in)
	r := fake.Report()
	assert.Equal(t, model.StateFinished, st.State)
	assert.Contains(t, st.Limit, "byte limit 48.8 KiB reached")
	assert.Equal(t, st.Limit, r.Limit)
	assert.GreaterOrEqual(t, r.Done, int64(50))
	assert.LessOrEqual(t, r.Done, int64(50+8), "passed by the pages in flight at most")
	assert.Positive(t, st.Counts.Ready)
}

// A duration limit stops claims when it passes (a timer, counted from
// the crawl's start); the pages in flight end.
func TestCrawlStopsAtItsDurationLimit(t *testing.T) {
	fake := crawltest.New(300, 3)
	in := crawlInput(2)
	in.Settings.MaxDuration = 10 * time.Minute
	env := newCrawlEnv(t, fake)
	minutePages(env, fake)
	env.ExecuteWorkflow(workflows.CrawlWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	var st workflows.CrawlStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, "duration limit 10m0s reached", st.Limit)
	r := fake.Report()
	assert.Equal(t, st.Limit, r.Limit)
	// Two pages a minute for ten minutes, the last two ending after it.
	assert.InDelta(t, 21, r.Done, 2)
	assert.Positive(t, st.Counts.Ready)
}

// A limit set while the crawl runs (starter set max_pages=N) applies to
// the claims after it.
func TestCrawlPageLimitSetLive(t *testing.T) {
	fake := crawltest.New(300, 3)
	in := crawlInput(2)
	env := newCrawlEnv(t, fake)
	minutePages(env, fake)
	env.RegisterDelayedCallback(func() {
		set := in.Settings
		set.MaxPages = 30
		env.SignalWorkflow(workflows.SignalSetSettings, set)
	}, 5*time.Minute)
	env.ExecuteWorkflow(workflows.CrawlWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	var st workflows.CrawlStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, "page limit 30 reached", st.Limit)
	assert.Equal(t, int64(30), fake.Report().Done)
}

// minutePages makes every page of fake take a minute in env.
func minutePages(env *crawlEnv, fake *crawltest.Fake) {
	acts := fake.Activities()
	env.OnActivity("RunPage", mock.Anything, mock.Anything).After(time.Minute).Return(
		func(ctx context.Context, in activities.RunPageInput) (activities.PageResult, error) {
			return acts.RunPage(ctx, in)
		})
}

// A crawl's final status has the frontier's counts, not those of the
// result it took in last: each result's counts are a snapshot of their own
// time, and results that end together are taken in in either order (a
// claim that found the page limit while pages were in flight, taken in
// after their results, showed one still claimed). Here every result's
// counts are one page behind (BehindCounts).
func TestCrawlEndsWithTheFrontiersCounts(t *testing.T) {
	fake := crawltest.New(300, 3)
	fake.BehindCounts = true
	in := crawlInput(8)
	in.Settings.MaxPages = 100
	st, _ := runCrawl(t, fake, in)
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, int64(100), fake.Report().Done)
	assert.Equal(t, int64(100), st.Counts.Done, "the frontier's count, not the last snapshot's")
	assert.Zero(t, st.Counts.Claimed)
}
