package jobstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// newCrawlJob returns a CrawlStore on a fresh Redis with the crawl job
// ident (https://example.com/, settings) created, and a raw client of the
// same server.
func newCrawlJob(t *testing.T, ident string, settings model.Settings) (*CrawlStore, *redis.Client) {
	t.Helper()
	s, rs, c := newRedisStore(t)
	f, err := frontier.New(c, rs.Keys(), frontier.Options{})
	require.NoError(t, err)
	require.NoError(t, rs.CreateJob(context.Background(), rkeys.Job{Ident: ident, URL: "https://example.com/", FetchDepth: model.FetchInf,
		Settings: settings, WorkflowID: ident}))
	return &CrawlStore{RedisStore: s, Frontier: f, Log: zap.NewNop()}, c
}

// TestPageBatchReadsItsPaceAndClaims: a page batch reads the job's live
// concurrency, delays and bytes_downloaded with its live settings, and a
// batch run again finds the pages still claimed by their attempt: not
// one recorded, nor one claimed again by a later attempt.
func TestPageBatchReadsItsPaceAndClaims(t *testing.T) {
	ctx := context.Background()
	const ident = "crawl1"
	cs, _ := newCrawlJob(t, ident, model.Settings{Concurrency: 3, DelayMinMS: 10, DelayMaxMS: 20})
	s := cs.RedisStore
	live, err := cs.LiveSettings(ctx, ident)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 10, 20}, []int{live.Concurrency, live.DelayMinMS, live.DelayMaxMS})
	assert.Zero(t, live.BytesDownloaded)
	require.NoError(t, s.ApplySettings(ctx, activities.SettingsInput{Ident: ident, Settings: model.Settings{Concurrency: 0}}))
	live, err = cs.LiveSettings(ctx, ident)
	require.NoError(t, err)
	assert.Equal(t, 0, live.Concurrency, "a pause is read by the next refresh")

	seed, err := cs.SeedCrawl(ctx, activities.SeedCrawlInput{Ident: ident, URL: "https://example.com/", MaxDepth: -1, PageAttempts: 3, Token: "t"})
	require.NoError(t, err)
	_, err = cs.Discover(ctx, ident, 1, 1, 0, []activities.Link{{URL: "https://example.com/a"}, {URL: "https://example.com/b"}, {URL: "https://example.com/c"}})
	require.NoError(t, err)
	_, err = cs.Complete(ctx, ident, seed.Page.ID, seed.Page.Attempt, activities.PageSucceeded, "", time.Time{},
		activities.Tally([]model.Response{{URL: "https://example.com/", Status: 200, Bytes: 500}}))
	require.NoError(t, err)
	pages, _, err := cs.Claim(ctx, ident, 3, "batch-1", 0, 0)
	require.NoError(t, err)
	require.Len(t, pages, 3)
	_, err = cs.Complete(ctx, ident, pages[0].ID, pages[0].Attempt, activities.PageSucceeded, "", time.Time{}, activities.PageTally{})
	require.NoError(t, err)
	_, err = cs.Complete(ctx, ident, pages[1].ID, pages[1].Attempt, activities.PageTransient, "503", time.Time{}, activities.PageTally{})
	require.NoError(t, err)
	again, _, err := cs.Claim(ctx, ident, 1, "batch-2", 0, 0)
	require.NoError(t, err)
	require.Len(t, again, 1, "the transient page, READY again")
	still, err := cs.StillClaimed(ctx, ident, pages)
	require.NoError(t, err)
	assert.Equal(t, []activities.PageSpec{pages[2]}, still, "only the page no attempt recorded, claimed by the batch's attempt")
	live, err = cs.LiveSettings(ctx, ident)
	require.NoError(t, err)
	assert.Equal(t, int64(500), live.BytesDownloaded)
}
