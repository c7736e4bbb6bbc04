package frontier

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failedCrawl is a finished crawl: the seed succeeded with five links;
// /a succeeded, /b and /c failed (a fatal failure and used-up transient
// attempts), /d was skipped, and /a's link /a/x failed at depth 2.
func failedCrawl(t *testing.T, e *env) map[string]Page {
	t.Helper()
	ctx := ctxT(t)
	require.NoError(t, e.rdb.HSet(ctx, e.keys.Job(job), "items_queued", 0).Err())
	seed(t, e, Config{MaxDepth: 2, MaxAttempts: 1, QueuedField: "items_queued"})
	s := claimOne(t, e, "s")
	_, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 0, links(u("/a"), u("/b"), u("/c"), u("/d")))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	got := map[string]Page{}
	for i := range 4 {
		p := claimOne(t, e, fmt.Sprint("c", i))
		got[p.URL] = p
		switch p.URL {
		case u("/a"):
			_, err = e.f.Discover(ctx, job, p.ID, p.Attempts, 0, links(u("/a/x")))
			require.NoError(t, err)
			_, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusSucceeded})
		case u("/b"):
			_, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusFailed, Note: "500 Internal Server Error"})
		case u("/c"):
			_, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusTransient, Note: "timeout"})
		case u("/d"):
			err = e.f.Skip(ctx, job, p.ID, "rule")
		}
		require.NoError(t, err)
	}
	x := claimOne(t, e, "x")
	_, err = e.f.Complete(ctx, job, x.ID, x.Attempts, Outcome{Status: StatusFailed, Note: "connection refused"})
	require.NoError(t, err)
	got[x.URL] = x
	return got
}

func TestRequeueMakesOnlyFailedPagesReady(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	pages := failedCrawl(t, e)
	before, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.True(t, before.Finished())
	require.Equal(t, StateCounts{Done: 5, Succeeded: 2, Failed: 3, Skipped: 1}, before.StateCounts)
	failed, next, err := e.f.Pages(ctx, job, Filter{State: StateDone, Status: StatusFailed}, 0, 100)
	require.NoError(t, err)
	require.Zero(t, next)
	var urls []string
	for _, p := range failed {
		urls = append(urls, p.URL)
	}
	assert.Equal(t, []string{u("/b"), u("/c"), u("/a/x")}, urls, "the listing a retry shows")
	queued := e.rdb.HGet(ctx, e.keys.Job(job), "items_queued").Val()

	var r Requeued
	// Batches of 2 records: 3 script calls for 6 pages; repeating it with
	// the same token changes nothing.
	twice(t, e, func() error {
		r, err = e.f.Requeue(ctx, job, "retry-1", 2)
		return err
	})
	assert.EqualValues(t, 3, r.Pages)
	assert.False(t, r.Seed)
	assert.Equal(t, StateCounts{Ready: 3, Done: 2, Succeeded: 2, Skipped: 1}, r.Counts.StateCounts)
	assert.Equal(t, "0", queued, "every page was final")
	assert.Equal(t, "3", e.rdb.HGet(ctx, e.keys.Job(job), "items_queued").Val(), "the requeued pages wait again")

	p, err := e.f.PageByID(ctx, job, pages[u("/a/x")].ID)
	require.NoError(t, err)
	assert.Equal(t, StateReady, p.State)
	assert.Equal(t, 2, p.Depth, "at its recorded depth")
	assert.Equal(t, pages[u("/a")].ID, p.Parent, "relations kept")
	assert.Equal(t, 1, p.AttemptsRemaining, "fresh attempts")
	assert.Equal(t, StatusNone, p.Status)
	for _, url := range []string{u("/"), u("/a"), u("/d")} {
		p, err := e.f.Page(ctx, job, url)
		require.NoError(t, err)
		assert.NotEqual(t, StateReady, p.State, "%s is left alone", url)
	}

	// The retry claims exactly the requeued pages, lowest depth first,
	// with new attempt numbers, and one of them now succeeds.
	ps, _, err := e.f.Claim(ctx, job, 10, "retry-claim", 0)
	require.NoError(t, err)
	require.Len(t, ps, 3)
	assert.Equal(t, []string{u("/b"), u("/c"), u("/a/x")}, []string{ps[0].URL, ps[1].URL, ps[2].URL})
	assert.Equal(t, 2, ps[0].Attempts)
	c, err := e.f.Complete(ctx, job, ps[0].ID, ps[0].Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	for _, p := range ps[1:] {
		c, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusFailed})
		require.NoError(t, err)
	}
	assert.Equal(t, StateCounts{Done: 5, Succeeded: 3, Failed: 2, Skipped: 1}, c.StateCounts)
	assert.True(t, c.Finished())

	// The same token is done: the pages that failed again stay DONE.
	r, err = e.f.Requeue(ctx, job, "retry-1", 2)
	require.NoError(t, err)
	assert.EqualValues(t, 3, r.Pages, "the token's requeue, reported again")
	assert.Equal(t, int64(0), r.Counts.Ready)
	// A new retry (new token) requeues what failed since.
	r, err = e.f.Requeue(ctx, job, "retry-2", 1000)
	require.NoError(t, err)
	assert.EqualValues(t, 2, r.Pages)
	assert.EqualValues(t, 2, r.Counts.Ready)
}

// A requeue interrupted between batches (the caller crashed) resumes
// with the same token: every failed page is requeued once, none lost.
func TestRequeueResumesAfterACrashBetweenBatches(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	failedCrawl(t, e)
	// One batch by hand, as a crashed caller left it: pages 1..3 read.
	_, err := e.f.run(ctx, requeueScript, job, "tok", 3).Result()
	require.NoError(t, err)
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Ready, "/b (page 3) requeued by the first batch")
	require.EqualValues(t, 2, c.Failed)
	r, err := e.f.Requeue(ctx, job, "tok", 1)
	require.NoError(t, err)
	assert.EqualValues(t, 3, r.Pages)
	assert.EqualValues(t, 3, r.Counts.Ready)
	assert.Zero(t, r.Counts.Failed)
}

func TestRequeueSeedAndRefusals(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	_, err := e.f.Requeue(ctx, job, "t", 10)
	require.ErrorIs(t, err, ErrNoFrontier)
	requireNoKeys(t, e, "a requeue never creates a frontier")
	_, err = e.f.Requeue(ctx, job, "", 10)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = e.f.Requeue(ctx, job, "t", 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = e.f.Requeue(ctx, job, "t", MaxRequeueBatch+1)
	require.ErrorIs(t, err, ErrInvalidArgument)

	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 2})
	s := claimOne(t, e, "s")
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusFailed, Note: "dns"})
	require.NoError(t, err)
	r, err := e.f.Requeue(ctx, job, "t", 10)
	require.NoError(t, err)
	assert.True(t, r.Seed, "the start page failed: the retry runs it again")
	assert.EqualValues(t, 1, r.Pages)
	p := claimOne(t, e, "again")
	assert.Equal(t, s.ID, p.ID)
	assert.Equal(t, 2, p.AttemptsRemaining)
}

// Persist takes the retention off the frontier; Expire gives it back.
func TestPersistUndoesExpire(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	failedCrawl(t, e)
	require.NoError(t, e.f.Expire(ctx, job, time.Hour))
	keys, err := e.f.JobKeys(ctx, job)
	require.NoError(t, err)
	require.NoError(t, e.f.Persist(ctx, job))
	for _, k := range keys {
		if e.rdb.Exists(ctx, k).Val() == 1 {
			assert.Equal(t, time.Duration(-1), e.rdb.TTL(ctx, k).Val(), k)
		}
	}
	require.ErrorIs(t, e.f.Persist(ctx, "other"), ErrNoFrontier)
}

// TestRequeueListPageOne: a URL-list crawl's page 1 (the list's first URL,
// no start page) that failed is requeued as any failed page: READY again
// at depth 0, reported as page 1 (Requeued.Seed, which the crawl
// workflow ignores for a list), its links one level below it.
func TestRequeueListPageOne(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	_, err := e.f.SeedList(ctx, job, "http://lists.example/l.txt", []string{u("/a"), u("/b")}, Config{MaxDepth: 1, MaxAttempts: 1})
	require.NoError(t, err)
	for i := range 2 {
		p := claimOne(t, e, fmt.Sprint("c", i))
		st := StatusSucceeded
		if p.ID == 1 {
			st = StatusFailed
		}
		_, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: st})
		require.NoError(t, err)
	}
	r, err := e.f.Requeue(ctx, job, "t", 10)
	require.NoError(t, err)
	assert.True(t, r.Seed)
	assert.EqualValues(t, 1, r.Pages)
	p := claimOne(t, e, "again")
	assert.Equal(t, int64(1), p.ID)
	assert.Zero(t, p.Depth, "a listed URL stays at depth 0")
	assert.Equal(t, 2, p.Attempts)
	assert.Equal(t, 1, p.AttemptsRemaining, "fresh attempts")
	d, err := e.f.Discover(ctx, job, p.ID, p.Attempts, 0, links(u("/a/x")))
	require.NoError(t, err)
	assert.Equal(t, 1, d.Added, "a link of page 1 is within max depth 1")
	x, err := e.f.PageByID(ctx, job, 3)
	require.NoError(t, err)
	assert.Equal(t, 1, x.Depth)
}
