package jobstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
)

// TestContinueSaysWhetherTheStartPageIsReady: a continue asked for it
// (RequeueInput.StartPage) reports a start page waiting for its later
// retry as READY, so the continued run runs it as the start page; one
// that succeeded is not, and a continue not asking is told nothing.
// Nothing is requeued either way.
func TestContinueSaysWhetherTheStartPageIsReady(t *testing.T) {
	ctx := context.Background()
	const ident = "crawl1"
	seed := func(cs *CrawlStore) activities.PageSpec {
		t.Helper()
		res, err := cs.SeedCrawl(ctx, activities.SeedCrawlInput{Ident: ident, URL: "https://example.com/", MaxDepth: -1, PageAttempts: 1,
			Token: "t", RetryLater: []time.Duration{time.Hour}})
		require.NoError(t, err)
		require.NotNil(t, res.Page)
		return *res.Page
	}
	continued := func(cs *CrawlStore, ask bool) activities.RequeueResult {
		t.Helper()
		res, err := cs.Requeue(ctx, activities.RequeueInput{Ident: ident, Token: "run-2/requeue", Continue: true, StartPage: ask})
		require.NoError(t, err)
		assert.Zero(t, res.Pages, "a continue requeues nothing")
		return res
	}

	cs, _ := newCrawlJob(t, ident, model.Settings{Concurrency: 1})
	p := seed(cs)
	_, err := cs.Frontier.Complete(ctx, ident, p.ID, p.Attempt, frontier.Outcome{Status: frontier.StatusTransient, Note: "503", Last: true})
	require.NoError(t, err)
	res := continued(cs, true)
	assert.True(t, res.Seed, "the waiting start page is READY")
	assert.EqualValues(t, 1, res.Counts.Waiting)
	assert.False(t, continued(cs, false).Seed, "not asked: as before")

	cs, _ = newCrawlJob(t, ident, model.Settings{Concurrency: 1})
	p = seed(cs)
	_, err = cs.Frontier.Complete(ctx, ident, p.ID, p.Attempt, frontier.Outcome{Status: frontier.StatusSucceeded})
	require.NoError(t, err)
	assert.False(t, continued(cs, true).Seed, "a done start page is not run again")
}
