package jobstore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/model"
)

// recordCrawl is a crawl whose start page linked pages pages, all claimed
// (attempt 1), with fleet health on.
func recordCrawl(t *testing.T, pages int) (*CrawlStore, *redis.Client, []activities.PageSpec) {
	t.Helper()
	ctx := context.Background()
	const ident = "crawl1"
	cs, c := newCrawlJob(t, ident, model.Settings{Concurrency: 8})
	cfg := config.Default()
	h, err := fleethealth.FromConfig(cs.Redis, &cfg)
	require.NoError(t, err)
	cs.Health, cs.Host = h, "host-1"
	seed, err := cs.SeedCrawl(ctx, activities.SeedCrawlInput{Ident: ident, URL: "https://example.com/", MaxDepth: -1, PageAttempts: 2, Token: "seed"})
	require.NoError(t, err)
	var links []activities.Link
	for i := range pages {
		links = append(links, activities.Link{URL: fmt.Sprintf("https://example.com/p%d", i)})
	}
	_, err = cs.Discover(ctx, ident, seed.Page.ID, 1, 0, links)
	require.NoError(t, err)
	_, err = cs.Complete(ctx, ident, seed.Page.ID, 1, activities.PageSucceeded, "", time.Time{}, activities.PageTally{})
	require.NoError(t, err)
	claimed, _, err := cs.Claim(ctx, ident, pages, "batch-1", 0, 0)
	require.NoError(t, err)
	require.Len(t, claimed, pages)
	return cs, c, claimed
}

// pageWrites are the claimed pages' writes: each succeeded with one 200
// answer, a shared stylesheet, two new links, a log line and a hook result.
func pageWrites(claimed []activities.PageSpec) []activities.PageWrite {
	ws := make([]activities.PageWrite, len(claimed))
	for i, p := range claimed {
		tally := activities.Tally([]model.Response{{URL: p.URL, Status: 200, Bytes: 1000},
			{URL: "https://example.com/style.css", Status: 200, Bytes: 100, Requisite: true}})
		tally.PageURL = p.URL
		tally.Results = []model.ArchiveResult{{Hook: "on_Snapshot__21_pagefetch.sh", Plugin: "pagefetch", Status: model.StatusSucceeded}}
		ws[i] = activities.PageWrite{PageID: p.ID, Attempt: p.Attempt, Status: activities.PageSucceeded, Tally: tally,
			Links:   []activities.Link{{URL: p.URL + "/a"}, {URL: p.URL + "/b"}},
			LogKey:  fmt.Sprintf("run/act/attempt-1/page-%d", p.ID),
			Entries: []activities.LogEntry{{Kind: activities.LogStdout, Time: time.Now(), Hook: "page", Message: "done " + p.URL}}}
	}
	return ws
}

// jobFigures are the job hash's counters a page moves.
func jobFigures(t *testing.T, c *redis.Client) map[string]string {
	t.Helper()
	h := c.HGetAll(context.Background(), "crawl1").Val()
	out := map[string]string{}
	for _, f := range []string{"items_queued", "items_downloaded", "bytes_downloaded", "log_score", "heartbeat"} {
		out[f] = h[f]
	}
	return out
}

// TestRecordPagesInAFewRoundTrips: 50 finished pages are recorded in three
// round trips (log packets and links; outcomes; events and fleet health),
// with the job counters, page counts, log, events and health checks a
// page-by-page recording gives; recorded again (a retried flush) they
// change nothing; a page whose attempt no longer holds it is refused alone.
func TestRecordPagesInAFewRoundTrips(t *testing.T) {
	ctx := context.Background()
	const n = 50
	cs, c, claimed := recordCrawl(t, n)
	ws := pageWrites(claimed)
	rt := &benchkit.RoundTrips{}
	c.AddHook(rt)
	written, counts, err := cs.RecordPages(ctx, "crawl1", ws)
	require.NoError(t, err)
	assert.Equal(t, int64(3), rt.Load(), "round trips for %d pages", n)
	for i, w := range written {
		assert.NoError(t, w.Superseded, "page %d", ws[i].PageID)
		assert.Equal(t, 2, w.Queued, "page %d", ws[i].PageID)
	}
	assert.Equal(t, int64(n+1), counts.Succeeded)
	assert.Equal(t, int64(2*n), counts.Ready)
	got := jobFigures(t, c)

	// The same pages recorded one at a time, as RunPage did.
	ref, rc, refClaimed := recordCrawl(t, n)
	for _, w := range pageWrites(refClaimed) {
		require.NoError(t, ref.AppendLog(ctx, "crawl1", w.LogKey, 0, w.Entries))
		_, err := ref.Discover(ctx, "crawl1", w.PageID, w.Attempt, 0, w.Links)
		require.NoError(t, err)
		_, err = ref.Complete(ctx, "crawl1", w.PageID, w.Attempt, w.Status, w.Note, w.NotBefore, w.Tally)
		require.NoError(t, err)
	}
	want := jobFigures(t, rc)
	assert.Equal(t, want, got, "the job's counters, log and heartbeat as page by page")
	wantCounts, err := ref.Counts(ctx, "crawl1")
	require.NoError(t, err)
	assert.Equal(t, wantCounts, counts)
	for _, k := range []string{"event_counters", "event_counters:host-1:42"} {
		assert.Equal(t, rc.HGetAll(ctx, k).Val(), c.HGetAll(ctx, k).Val(), k)
	}
	assert.Equal(t, strconv.Itoa(n), c.HGet(ctx, "event_counters", "all").Val())
	for _, k := range []string{"check:host-1:pagefetch", "check:crawl1:on_Snapshot__21_pagefetch.sh"} {
		assert.Equal(t, strconv.Itoa(n), c.HGet(ctx, k, "count").Val(), "the fleet's health: %s", k)
		assert.Equal(t, rc.HGet(ctx, k, "state").Val(), c.HGet(ctx, k, "state").Val(), "the fleet's health: %s", k)
	}

	// A retried flush: nothing moves.
	written, again, err := cs.RecordPages(ctx, "crawl1", ws)
	require.NoError(t, err)
	for _, w := range written {
		assert.NoError(t, w.Superseded)
	}
	assert.Equal(t, counts, again)
	assert.Equal(t, got, jobFigures(t, c), "a repeat counts nothing twice")
	assert.Equal(t, strconv.Itoa(n), c.HGet(ctx, "event_counters", "all").Val())

	// One page of a flush superseded (a later attempt holds it): refused
	// alone.
	more, _, err := cs.Claim(ctx, "crawl1", 2, "batch-2", 0, 0)
	require.NoError(t, err)
	require.Len(t, more, 2)
	ws = pageWrites(more)
	ws[0].Attempt = 2
	written, _, err = cs.RecordPages(ctx, "crawl1", ws)
	require.NoError(t, err)
	assert.ErrorIs(t, written[0].Superseded, activities.ErrPageNotClaimed)
	assert.NoError(t, written[1].Superseded)
	assert.Equal(t, 2, written[1].Queued)
}
