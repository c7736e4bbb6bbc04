package frontier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

const job = "testjob"

func seed(t *testing.T, e *env, cfg Config) Page {
	t.Helper()
	p, err := e.f.Seed(ctxT(t), job, u("/"), cfg)
	require.NoError(t, err)
	return p
}

// claimOne claims exactly the page with the given URL (it must be next).
func claimOne(t *testing.T, e *env, token string) Page {
	t.Helper()
	ps, _, err := e.f.Claim(ctxT(t), job, 1, token, 0)
	require.NoError(t, err)
	require.Len(t, ps, 1, "a page must be ready")
	return ps[0]
}

// succeeded adds urls as the links of claimed page p, then completes it
// succeeded.
func succeeded(t *testing.T, e *env, p Page, urls ...string) {
	t.Helper()
	_, err := e.f.Discover(ctxT(t), job, p.ID, p.Attempts, 0, links(urls...))
	require.NoError(t, err)
	_, err = e.f.Complete(ctxT(t), job, p.ID, p.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
}

func TestNewValidatesOptions(t *testing.T) {
	keys, _ := rkeys.NewKeys("")
	_, err := New(nil, keys, Options{})
	require.Error(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, o := range []Options{{Chunk: MaxChunk + 1}, {Chunk: -1}, {SettleBudget: -1}, {SettleRounds: -2}} {
		_, err := New(rdb, keys, o)
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", o)
	}
}

func TestSeed(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	p := seed(t, e, Config{MaxDepth: 2, MaxAttempts: 3})
	assert.Equal(t, Page{ID: 1, URL: u("/"), Depth: 0, State: StateReady, AttemptsRemaining: 3}, p)

	// Repeat: same page, same state.
	twice(t, e, func() error {
		_, err := e.f.Seed(ctx, job, "HTTP://SITE.example:80/", Config{MaxDepth: 2, MaxAttempts: 3})
		return err
	})
	// Another URL or configuration: conflict.
	_, err := e.f.Seed(ctx, job, u("/other"), Config{MaxDepth: 2, MaxAttempts: 3})
	require.ErrorIs(t, err, ErrSeedConflict)
	_, err = e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 3, MaxAttempts: 3})
	require.ErrorIs(t, err, ErrSeedConflict)

	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, int64(1), c.Total)
	assert.Equal(t, int64(1), c.Ready)
	assert.Equal(t, []DepthCounts{{Depth: 0, StateCounts: StateCounts{Ready: 1}}}, c.ByDepth)
}

func TestSeedRejectsBadInput(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	for _, cfg := range []Config{{MaxDepth: -2, MaxAttempts: 1}, {MaxDepth: 1, MaxAttempts: 0}, {MaxDepth: 1, MaxAttempts: MaxAttempts + 1}} {
		_, err := e.f.Seed(ctx, job, u("/"), cfg)
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", cfg)
	}
	for _, bad := range []string{"", "ftp://x.example/", "not a url", u("/" + strings.Repeat("a", MaxURLBytes))} {
		_, err := e.f.Seed(ctx, job, bad, Config{MaxDepth: 1, MaxAttempts: 1})
		require.ErrorIs(t, err, ErrInvalidURL, "%q", bad)
	}
	_, err := e.f.Seed(ctx, "", u("/"), Config{MaxDepth: 1, MaxAttempts: 1})
	require.ErrorIs(t, err, ErrInvalidArgument)
	// A counter field needs the job hash: a frontier never creates it.
	_, err = e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 1, MaxAttempts: 1, QueuedField: "items_queued"})
	require.ErrorIs(t, err, rkeys.ErrJobNotFound)
	requireNoKeys(t, e, "refused seeds write nothing")
}

func TestWritesWithoutFrontierFail(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	_, err := e.f.Discover(ctx, job, 1, 1, 0, links(u("/a")))
	require.ErrorIs(t, err, ErrNoFrontier)
	_, _, err = e.f.Claim(ctx, job, 1, "t", 0)
	require.ErrorIs(t, err, ErrNoFrontier)
	_, err = e.f.Complete(ctx, job, 1, 1, Outcome{Status: StatusSucceeded})
	require.ErrorIs(t, err, ErrNoFrontier)
	require.ErrorIs(t, e.f.Skip(ctx, job, 1, "x"), ErrNoFrontier)
	_, _, err = e.f.Release(ctx, job, "t")
	require.ErrorIs(t, err, ErrNoFrontier)
	_, err = e.f.Counts(ctx, job)
	require.ErrorIs(t, err, ErrNoFrontier)
	_, err = e.f.PageByID(ctx, job, 1)
	require.ErrorIs(t, err, ErrNoFrontier)
	_, _, err = e.f.Pages(ctx, job, Filter{}, 0, 10)
	require.ErrorIs(t, err, ErrNoFrontier)
	require.ErrorIs(t, e.f.Expire(ctx, job, 1e9), ErrNoFrontier)
	requireNoKeys(t, e, "no ghost keys")
}

func TestDiscover(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: 1, MaxAttempts: 2})
	s := claimOne(t, e, "tok")
	res, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 0, []Link{
		{URL: u("/a")}, {URL: u("/b"), Requisite: true}, {URL: "http://off.example/x", NoRecurse: true},
		{URL: u("/")}, {URL: u("/a#frag")}, {URL: u("/a")}, {URL: ""}, {URL: "mailto:x@example.com"},
		{URL: u("/") + strings.Repeat("x", 100<<10)},
	})
	require.NoError(t, err)
	assert.Equal(t, 4, res.Added) // /a, /b, off.example/x, /a#frag (the ident's normal form keeps fragments)
	assert.Equal(t, 1, res.SelfLinks)
	assert.Equal(t, 1, res.Duplicates)
	require.Len(t, res.Invalid, 3)
	for _, inv := range res.Invalid {
		require.ErrorIs(t, inv.Err, ErrInvalidURL)
	}
	assert.Equal(t, "not a valid URL", res.Invalid[0].Rule)
	long := res.Invalid[2]
	assert.Equal(t, "longer than 8192 bytes", long.Rule, "the rule, short, for the job log")
	assert.Equal(t, len(u("/"))+100<<10, long.Bytes)
	assert.Len(t, long.URL, 200)
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)

	b, err := e.f.Page(ctx, job, "HTTP://site.example/b")
	require.NoError(t, err)
	assert.Equal(t, Page{ID: 3, URL: u("/b"), Depth: 1, Parent: 1, State: StateReady, AttemptsRemaining: 2, Requisite: true}, b)
	off, err := e.f.Page(ctx, job, "http://off.example/x")
	require.NoError(t, err)
	assert.True(t, off.NoRecurse)

	// Links of a page at depth 1 are beyond the limit: DEFERRED; links of
	// a no-recurse page are dropped; links to known pages are relations.
	a := claimOne(t, e, "tok-a")
	require.Equal(t, u("/a"), a.URL)
	res, err = e.f.Discover(ctx, job, a.ID, a.Attempts, 0, links(u("/c"), u("/b"), u("/")))
	require.NoError(t, err)
	assert.Equal(t, DiscoverResult{Deferred: 1, Known: 2}, res)
	claimOne(t, e, "tok-b")
	x := claimOne(t, e, "tok-x")
	require.True(t, x.NoRecurse)
	res, err = e.f.Discover(ctx, job, x.ID, x.Attempts, 0, links(u("/d"), u("/e")))
	require.NoError(t, err)
	assert.Equal(t, DiscoverResult{Dropped: 2}, res)
	_, err = e.f.Page(ctx, job, u("/d"))
	require.ErrorIs(t, err, ErrUnknownPage)

	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, int64(6), c.Total)
	assert.Equal(t, int64(1), c.Deferred)
	assert.Equal(t, int64(3), c.Claimed)
	assert.Equal(t, int64(1), c.Ready)
}

func TestDiscoverRefusals(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 3})
	// Not claimed yet (attempt 1 does not exist).
	_, err := e.f.Discover(ctx, job, 1, 1, 0, links(u("/a")))
	require.ErrorIs(t, err, ErrNotClaimed)
	// Unknown parent.
	_, err = e.f.Discover(ctx, job, 99, 1, 0, links(u("/a")))
	require.ErrorIs(t, err, ErrUnknownPage)
	// Bad arguments.
	for _, f := range []func() error{
		func() error { _, err := e.f.Discover(ctx, job, 0, 1, 0, nil); return err },
		func() error { _, err := e.f.Discover(ctx, job, 1, 0, 0, nil); return err },
		func() error { _, err := e.f.Discover(ctx, job, 1, 1, -1, nil); return err },
	} {
		require.ErrorIs(t, f(), ErrInvalidArgument)
	}
	s := claimOne(t, e, "t1")
	// Batch 1 before batch 0.
	_, err = e.f.Discover(ctx, job, 1, s.Attempts, 1, links(u("/a")))
	require.ErrorIs(t, err, ErrOutOfOrder)
	// Stale attempt after a release and a new claim.
	_, _, err = e.f.Release(ctx, job, "t1")
	require.NoError(t, err)
	_, err = e.f.Discover(ctx, job, 1, s.Attempts, 0, links(u("/a")))
	require.ErrorIs(t, err, ErrNotClaimed, "released: no new batch")
	s2 := claimOne(t, e, "t2")
	require.Equal(t, s.Attempts+1, s2.Attempts)
	_, err = e.f.Discover(ctx, job, 1, s.Attempts, 0, links(u("/a")))
	require.ErrorIs(t, err, ErrNotClaimed, "stale attempt")
	_, err = e.f.Discover(ctx, job, 1, s2.Attempts, 0, links(u("/a")))
	require.NoError(t, err)
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.Equal(t, int64(2), c.Total, "refused batches added nothing")
}

func TestDiscoverIsRepeatSafe(t *testing.T) {
	e, s := claimedSeed(t, Options{Chunk: 3}, Config{MaxDepth: 1, MaxAttempts: 3})
	ctx := ctxT(t)
	ls := numbered(u("/p%d"), 10)
	// Batch 0 = 4 script calls of ≤3 links; repeating it changes nothing.
	twice(t, e, func() error {
		_, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 0, links(ls...))
		return err
	})
	res, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 0, links(ls...))
	require.NoError(t, err)
	assert.Equal(t, DiscoverResult{Repeated: 4}, res)
	// An empty batch takes its place in the sequence.
	twice(t, e, func() error {
		_, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 1, nil)
		return err
	})
	twice(t, e, func() error {
		_, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 2, links(u("/p0"), u("/q")))
		return err
	})
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	// After completion a repeat is still a no-op; a new batch is refused.
	twice(t, e, func() error {
		_, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 2, links(u("/p0"), u("/q")))
		return err
	})
	_, err = e.f.Discover(ctx, job, s.ID, s.Attempts, 3, links(u("/r")))
	require.ErrorIs(t, err, ErrNotClaimed)
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, int64(12), c.Total)
}

func TestClaimOrderAndAttempts(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 3})
	s := claimOne(t, e, "t0")
	assert.Equal(t, 1, s.Attempts)
	assert.Equal(t, StateClaimed, s.State)
	assert.Equal(t, "t0", s.Claimer)
	_, err := e.f.Discover(ctx, job, 1, 1, 0, links(u("/a"), u("/b"), u("/c")))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, 1, 1, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	a := claimOne(t, e, "ta")
	require.Equal(t, u("/a"), a.URL)
	succeeded(t, e, a, u("/a/1"), u("/a/2"))
	// Depth 1 (/b, /c) before depth 2 (/a/1, /a/2), discovery order within.
	ps, c, err := e.f.Claim(ctx, job, 3, "tb", 42)
	require.NoError(t, err)
	require.Len(t, ps, 3)
	assert.Equal(t, []string{u("/b"), u("/c"), u("/a/1")}, []string{ps[0].URL, ps[1].URL, ps[2].URL})
	for _, p := range ps {
		assert.Equal(t, int64(42), p.RulesVersion)
		assert.Equal(t, 1, p.Attempts)
	}
	assert.Equal(t, int64(3), c.Claimed)
	assert.Equal(t, int64(1), c.Ready)
	assert.Equal(t, int64(2), c.Done)
	assert.False(t, c.Finished())
	assert.False(t, c.Draining())

	// A transient failure goes to the back of its depth; the retry is attempt 2.
	_, err = e.f.Complete(ctx, job, ps[0].ID, 1, Outcome{Status: StatusTransient, Note: "503"})
	require.NoError(t, err)
	last, c, err := e.f.Claim(ctx, job, 10, "tc", 43)
	require.NoError(t, err)
	require.Len(t, last, 2)
	assert.Equal(t, u("/b"), last[0].URL, "depth 1 still comes first")
	assert.Equal(t, 2, last[0].Attempts)
	assert.Equal(t, 2, last[0].AttemptsRemaining)
	assert.Equal(t, StatusTransient, last[0].Status)
	assert.Equal(t, u("/a/2"), last[1].URL)
	assert.True(t, c.Draining())

	_, _, err = e.f.Claim(ctx, job, 0, "x", 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = e.f.Claim(ctx, job, 1, "", 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = e.f.Claim(ctx, job, 1, "x", -1)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestClaimIsRepeatSafe(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 3})
	s := claimOne(t, e, "t0")
	_, err := e.f.Discover(ctx, job, 1, s.Attempts, 0, links(u("/a"), u("/b"), u("/c")))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, 1, 1, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	var first []Page
	twice(t, e, func() error {
		ps, _, err := e.f.Claim(ctx, job, 2, "retried-activity", 0)
		if first == nil {
			first = ps
		} else {
			assert.Equal(t, first, ps, "a repeated claim returns the same pages")
		}
		return err
	})
	require.Len(t, first, 2)
	// Completing one of them leaves the other with the token.
	_, err = e.f.Complete(ctx, job, first[0].ID, first[0].Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	again, _, err := e.f.Claim(ctx, job, 2, "retried-activity", 0)
	require.NoError(t, err)
	assert.Equal(t, first[1:], again)
}

func TestComplete(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 2})
	s := claimOne(t, e, "t")
	_, err := e.f.Discover(ctx, job, 1, 1, 0, links(u("/ok"), u("/fail"), u("/flaky")))
	require.NoError(t, err)
	twice(t, e, func() error {
		_, err := e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded})
		return err
	})
	ok, fail, flaky := claimOne(t, e, "a"), claimOne(t, e, "b"), claimOne(t, e, "c")
	twice(t, e, func() error {
		_, err := e.f.Complete(ctx, job, ok.ID, 1, Outcome{Status: StatusSucceeded})
		return err
	})
	twice(t, e, func() error {
		_, err := e.f.Complete(ctx, job, fail.ID, 1, Outcome{Status: StatusFailed, Note: "404 Not Found"})
		return err
	})
	twice(t, e, func() error {
		_, err := e.f.Complete(ctx, job, flaky.ID, 1, Outcome{Status: StatusTransient, Note: "timeout"})
		return err
	})
	p, err := e.f.PageByID(ctx, job, fail.ID)
	require.NoError(t, err)
	assert.Equal(t, Page{ID: fail.ID, URL: u("/fail"), Depth: 1, Parent: 1, State: StateDone, Status: StatusFailed,
		Attempts: 1, Charged: true, Note: "404 Not Found"}, p)
	p, err = e.f.PageByID(ctx, job, flaky.ID)
	require.NoError(t, err)
	assert.Equal(t, StateReady, p.State)
	assert.Equal(t, 1, p.AttemptsRemaining)
	flaky2 := claimOne(t, e, "d")
	require.Equal(t, flaky.ID, flaky2.ID)
	// The old attempt can no longer complete.
	_, err = e.f.Complete(ctx, job, flaky.ID, 1, Outcome{Status: StatusSucceeded})
	require.NoError(t, err, "attempt 1 already completed: a repeat is a no-op")
	_, err = e.f.Complete(ctx, job, flaky.ID, 3, Outcome{Status: StatusSucceeded})
	require.ErrorIs(t, err, ErrNotClaimed)
	c, err := e.f.Complete(ctx, job, flaky.ID, 2, Outcome{Status: StatusTransient, Note: "timeout again"})
	require.NoError(t, err)
	p, err = e.f.PageByID(ctx, job, flaky.ID)
	require.NoError(t, err)
	assert.Equal(t, StateDone, p.State)
	assert.Equal(t, StatusFailed, p.Status, "transient failures used up the attempts")
	assert.Equal(t, 0, p.AttemptsRemaining)
	assert.Equal(t, "timeout again", p.Note)
	assert.Equal(t, StateCounts{Done: 4, Succeeded: 2, Failed: 2}, c.StateCounts)
	assert.True(t, c.Finished())

	_, err = e.f.Complete(ctx, job, ok.ID, 2, Outcome{Status: StatusSucceeded})
	require.ErrorIs(t, err, ErrNotClaimed, "a DONE page")
	_, err = e.f.Complete(ctx, job, 77, 1, Outcome{Status: StatusSucceeded})
	require.ErrorIs(t, err, ErrUnknownPage)
	_, err = e.f.Complete(ctx, job, ok.ID, 1, Outcome{Status: "maybe"})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = e.f.Complete(ctx, job, ok.ID, 1, Outcome{Status: StatusSkipped})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestSkip(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: 1, MaxAttempts: 2})
	s := claimOne(t, e, "t")
	_, err := e.f.Discover(ctx, job, 1, 1, 0, links(u("/a"), u("/b")))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, 1, 1, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	// READY → SKIPPED.
	twice(t, e, func() error { return e.f.Skip(ctx, job, 2, "rule 3: skip /a") })
	p, err := e.f.PageByID(ctx, job, 2)
	require.NoError(t, err)
	assert.Equal(t, StateSkipped, p.State)
	assert.Equal(t, StatusSkipped, p.Status)
	assert.Equal(t, "rule 3: skip /a", p.Note)
	// CLAIMED → SKIPPED; the claim's attempt cannot complete.
	b := claimOne(t, e, "tb")
	require.Equal(t, int64(3), b.ID)
	_, err = e.f.Discover(ctx, job, b.ID, b.Attempts, 0, links(u("/deep")))
	require.NoError(t, err)
	require.NoError(t, e.f.Skip(ctx, job, b.ID, "dequeued, rules say skip"))
	_, err = e.f.Complete(ctx, job, b.ID, b.Attempts, Outcome{Status: StatusSucceeded})
	require.ErrorIs(t, err, ErrNotClaimed)
	// DONE and DEFERRED pages cannot be skipped.
	require.ErrorIs(t, e.f.Skip(ctx, job, s.ID, "x"), ErrInvalidState)
	require.ErrorIs(t, e.f.Skip(ctx, job, 4, "x"), ErrInvalidState)
	require.ErrorIs(t, e.f.Skip(ctx, job, 5, "x"), ErrUnknownPage)
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, StateCounts{Skipped: 2, Done: 1, Succeeded: 1, Deferred: 1}, c.StateCounts)
	assert.True(t, c.Finished())
	claims, err := e.rdb.HGetAll(ctx, e.f.key(job, "claims")).Result()
	require.NoError(t, err)
	assert.Empty(t, claims, "no claim left behind")
}

func TestRelease(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: 1, MaxAttempts: 2})
	claimOne(t, e, "t")
	_, err := e.f.Discover(ctx, job, 1, 1, 0, links(u("/a"), u("/b"), u("/c")))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, 1, 1, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	ps, _, err := e.f.Claim(ctx, job, 2, "run-1", 0)
	require.NoError(t, err)
	require.Len(t, ps, 2)
	c3 := claimOne(t, e, "run-2")
	var n int
	twice(t, e, func() error {
		var err error
		var got int
		got, _, err = e.f.Release(ctx, job, "run-1")
		n += got
		return err
	})
	assert.Equal(t, 2, n, "released once")
	for _, p := range ps {
		got, err := e.f.PageByID(ctx, job, p.ID)
		require.NoError(t, err)
		assert.Equal(t, StateReady, got.State)
		assert.Equal(t, 2, got.AttemptsRemaining, "no attempt spent")
		assert.Equal(t, 1, got.Attempts)
		_, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusSucceeded})
		require.ErrorIs(t, err, ErrNotClaimed, "a released attempt cannot complete")
	}
	// Released pages come first again, with a new attempt.
	again, _, err := e.f.Claim(ctx, job, 2, "run-3", 0)
	require.NoError(t, err)
	require.Len(t, again, 2)
	for _, p := range again {
		assert.Equal(t, 2, p.Attempts)
	}
	n, c, err := e.f.ReleasePages(ctx, job, []int64{c3.ID, again[0].ID, 1})
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the seed is DONE: left alone")
	assert.Equal(t, int64(1), c.Claimed)
	_, _, err = e.f.ReleasePages(ctx, job, []int64{0})
	require.ErrorIs(t, err, ErrInvalidArgument)
	n, _, err = e.f.ReleasePages(ctx, job, nil)
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestPagesListing(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: 1, MaxAttempts: 2})
	claimOne(t, e, "t")
	ls := numbered(u("/p/%04d"), 1500) // spans two record buckets
	_, err := e.f.Discover(ctx, job, 1, 1, 0, links(ls...))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, 1, 1, Outcome{Status: StatusSucceeded, Note: "fine"})
	require.NoError(t, err)
	claimOne(t, e, "tok")

	all, next, err := e.f.Pages(ctx, job, Filter{}, 0, MaxPagesLimit)
	require.NoError(t, err)
	require.Zero(t, next)
	require.Len(t, all, 1501)
	assert.Equal(t, "fine", all[0].Note)
	assert.Equal(t, "tok", all[1].Claimer)
	for i, p := range all {
		require.Equal(t, int64(i+1), p.ID)
	}

	one := 1
	var got []Page
	cursor := int64(0)
	for {
		ps, n, err := e.f.Pages(ctx, job, Filter{State: StateReady, Depth: &one}, cursor, 700)
		require.NoError(t, err)
		got = append(got, ps...)
		if n == 0 {
			break
		}
		cursor = n
	}
	require.Len(t, got, 1499)
	assert.Equal(t, u("/p/0001"), got[0].URL)
	assert.Equal(t, u("/p/1499"), got[len(got)-1].URL)

	zero := 0
	ps, _, err := e.f.Pages(ctx, job, Filter{Depth: &zero}, 0, 10)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	ps, _, err = e.f.Pages(ctx, job, Filter{State: StateDeferred}, 0, 10)
	require.NoError(t, err)
	require.Empty(t, ps)
	_, _, err = e.f.Pages(ctx, job, Filter{State: "bogus"}, 0, 10)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = e.f.Pages(ctx, job, Filter{}, 0, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = e.f.PageByID(ctx, job, 1502)
	require.ErrorIs(t, err, ErrUnknownPage)
	_, err = e.f.Page(ctx, job, "")
	require.ErrorIs(t, err, ErrInvalidURL)
}

// TestQueuedFieldIsThePagesWaiting: QueuedField moves with the pages
// READY or CLAIMED (what ArchiveBot's !status shows as queued, once the
// job's downloads are added by the caller's counters): a page counts from
// the time it is queued until its outcome is final; deferred pages do not
// wait, a retried one still does.
func TestQueuedFieldIsThePagesWaiting(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	jobKey := e.keys.Job(job)
	require.NoError(t, e.rdb.HSet(ctx, jobKey, "items_queued", 0).Err())
	_, err := e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 1, MaxAttempts: 2, QueuedField: "items_queued"})
	require.NoError(t, err)
	queued := func() int64 {
		n, err := e.rdb.HGet(ctx, jobKey, "items_queued").Int64()
		require.NoError(t, err)
		return n
	}
	require.Equal(t, int64(1), queued(), "the seed is queued")
	s := claimOne(t, e, "t")
	// /slow is claimed later; /a's links go to depth 2: DEFERRED, not queued.
	_, err = e.f.Discover(ctx, job, s.ID, 1, 0, links(u("/a"), u("/slow")))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, s.ID, 1, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	require.Equal(t, int64(2), queued(), "/a and /slow wait; / is done")
	a := claimOne(t, e, "ta")
	res, err := e.f.Discover(ctx, job, a.ID, 1, 0, links(u("/deep1"), u("/deep2")))
	require.NoError(t, err)
	require.Equal(t, 2, res.Deferred)
	twice(t, e, func() error {
		_, err := e.f.Discover(ctx, job, a.ID, 1, 0, links(u("/deep1"), u("/deep2")))
		return err
	})
	require.Equal(t, int64(2), queued(), "deferred pages are not queued")
	// /slow links /deep1 from depth 1: promoted, queued once.
	slow := claimOne(t, e, "tslow")
	require.Equal(t, u("/slow"), slow.URL)
	res, err = e.f.Discover(ctx, job, slow.ID, 1, 0, links(u("/deep1")))
	require.NoError(t, err)
	require.Equal(t, DiscoverResult{Known: 1}, res, "depth 2 either way: nothing lowered")
	require.Equal(t, int64(2), queued())
	_, err = e.f.Complete(ctx, job, a.ID, 1, Outcome{Status: StatusTransient})
	require.NoError(t, err)
	require.Equal(t, int64(2), queued(), "a page to retry still waits, counted once")
	_, err = e.f.Complete(ctx, job, slow.ID, 1, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	require.Equal(t, int64(1), queued(), "a final outcome leaves the queue")
	// Without the job hash the counter is never recreated.
	require.NoError(t, e.rdb.Del(ctx, jobKey).Err())
	a2 := claimOne(t, e, "ta2")
	_, err = e.f.Discover(ctx, job, a2.ID, a2.Attempts, 0, links(u("/new")))
	require.NoError(t, err)
	n, err := e.rdb.Exists(ctx, jobKey).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestBadInputBatches(t *testing.T) {
	e, s := claimedSeed(t, Options{}, Config{MaxDepth: -1, MaxAttempts: 2})
	ctx := ctxT(t)
	// A long line of links (50,000 links, 3.5 MB; a 1,000,000-link list
	// takes the same path, 1000 calls instead of 50): split into script
	// calls of at most MaxChunk links, none lost, a few bad ones in it.
	const n = 50000
	var ls []Link
	for i, x := range numbered("http://site.example/very/long/line/of/links/item-%06d.html", n) {
		ls = append(ls, Link{URL: x})
		if i%12500 == 0 {
			ls = append(ls, Link{URL: "http://bad host/"}, Link{URL: u("/" + strings.Repeat("x", MaxURLBytes))})
		}
	}
	calls := &scriptCounter{}
	e.rdb.AddHook(calls)
	res, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 0, ls)
	require.NoError(t, err)
	assert.Equal(t, n, res.Added)
	assert.Len(t, res.Invalid, 8)
	// evalsha sha numkeys KEYS... parent attempt batch chunk last (url fp flags)...
	assert.LessOrEqual(t, calls.maxArgs, 3+len(scriptKeys)+5+3*MaxChunk, "no script call carries more than MaxChunk links")
	assert.GreaterOrEqual(t, calls.n, n/MaxChunk)
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, int64(n+1), c.Total)
	p, err := e.f.Page(ctx, job, fmt.Sprintf("http://site.example/very/long/line/of/links/item-%06d.html", n-1))
	require.NoError(t, err)
	assert.Equal(t, int64(n+1), p.ID)
	assert.Equal(t, 1, p.Depth)
}

// scriptCounter counts EVALSHA/EVAL calls and their largest argument count.
type scriptCounter struct {
	n, maxArgs int
}

func (s *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			s.n++
			s.maxArgs = max(s.maxArgs, len(cmd.Args()))
		}
		return next(ctx, cmd)
	}
}
func (s *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestErrorsNameTheThing(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 2})
	_, err := e.f.Complete(ctx, job, 1, 1, Outcome{Status: StatusSucceeded})
	require.True(t, errors.Is(err, ErrNotClaimed))
	assert.Contains(t, err.Error(), "job "+job+" page 1 attempt 1")
	assert.Contains(t, err.Error(), "page is ready at attempt 0")
}

func TestCompleteCountsJobCountersOnce(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	jobKey := e.keys.Job(job)
	require.NoError(t, e.rdb.HSet(ctx, jobKey, "items_queued", 0).Err())
	_, err := e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 1, MaxAttempts: 2, QueuedField: "items_queued"})
	require.NoError(t, err)
	s := claimOne(t, e, "t")
	counters := []JobCounter{{"items_downloaded", 2}, {"bytes_downloaded", 1500}, {"r2xx", 2}, {"r5xx", 0}}
	twice(t, e, func() error {
		_, err := e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusTransient, JobCounters: counters})
		return err
	})
	got, err := e.rdb.HGetAll(ctx, jobKey).Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"items_queued": "1", "items_downloaded": "2", "bytes_downloaded": "1500", "r2xx": "2"}, got,
		"counted once, zero increments not written")
	// The next attempt counts its own responses.
	s = claimOne(t, e, "t2")
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded, JobCounters: []JobCounter{{"items_downloaded", 1}}})
	require.NoError(t, err)
	n, err := e.rdb.HGet(ctx, jobKey, "items_downloaded").Int64()
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	// A late completion of another attempt is refused and counts nothing.
	_, err = e.f.Complete(ctx, job, s.ID, 1, Outcome{Status: StatusSucceeded, JobCounters: []JobCounter{{"items_downloaded", 100}}})
	require.ErrorIs(t, err, ErrNotClaimed)
	n, err = e.rdb.HGet(ctx, jobKey, "items_downloaded").Int64()
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded, JobCounters: []JobCounter{{"", 1}}})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// TestOnceCountersCountAKeyOncePerCrawl: a requisite two pages fetch (or
// one page twice, on another attempt) adds its counters once; a repeated
// Complete adds nothing; the set of keys goes with the frontier's other
// keys (TTL, deletion).
func TestOnceCountersCountAKeyOncePerCrawl(t *testing.T) {
	e := newEnv(t, Options{})
	ctx, jobKey := seedCounted(t, e, 2)
	css := OnceCounters{Key: "requisite " + u("/site.css"), Counters: []JobCounter{{"items_downloaded", 1}, {"bytes_downloaded", 100}}}
	img := OnceCounters{Key: "requisite " + u("/logo.png"), Counters: []JobCounter{{"items_downloaded", 1}, {"bytes_downloaded", 1000}}}

	s := claimOne(t, e, "t")
	twice(t, e, func() error {
		_, err := e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusTransient,
			JobCounters: []JobCounter{{"items_downloaded", 1}, {"bytes_downloaded", 10}}, Once: []OnceCounters{css}})
		return err
	})
	s = claimOne(t, e, "t2")
	_, err := e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded,
		JobCounters: []JobCounter{{"items_downloaded", 1}, {"bytes_downloaded", 10}}, Once: []OnceCounters{css, img}})
	require.NoError(t, err)
	got, err := e.rdb.HGetAll(ctx, jobKey).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"items_queued": "0", "items_downloaded": "4", "bytes_downloaded": "1120"}, got,
		"the page's own fetches each attempt, the stylesheet once, the image once")

	keys, err := e.f.JobKeys(ctx, job)
	require.NoError(t, err)
	assert.Contains(t, keys, jobKey+"_frontier_once")
	require.NoError(t, e.f.Expire(ctx, job, time.Hour))
	ttl, err := e.rdb.PTTL(ctx, jobKey+"_frontier_once").Result()
	require.NoError(t, err)
	assert.Positive(t, ttl)

	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded, Once: []OnceCounters{{Key: ""}}})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// TestCompleteCountedSaysWhatItCounted: CompleteCounted names the
// increments it added to the job hash, so a second count of them (the
// metrics) matches the job's counters exactly: none on a repeat, a
// once-counted key only the first time, nothing when the job hash is gone.
func TestCompleteCountedSaysWhatItCounted(t *testing.T) {
	e := newEnv(t, Options{})
	ctx, jobKey := seedCounted(t, e, 3)
	css := OnceCounters{Key: "requisite " + u("/site.css"), Counters: []JobCounter{{"items_downloaded", 1}}}
	img := OnceCounters{Key: "requisite " + u("/logo.png"), Counters: []JobCounter{{"items_downloaded", 1}}}
	own := []JobCounter{{"items_downloaded", 1}}

	s := claimOne(t, e, "t")
	o := Outcome{Status: StatusTransient, JobCounters: own, Once: []OnceCounters{css}}
	done, err := e.f.CompleteCounted(ctx, job, s.ID, s.Attempts, o)
	require.NoError(t, err)
	assert.True(t, done.Counted)
	assert.Equal(t, []bool{true}, done.Once)
	assert.Equal(t, int64(1), done.Counts.Ready)
	done, err = e.f.CompleteCounted(ctx, job, s.ID, s.Attempts, o)
	require.NoError(t, err)
	assert.False(t, done.Counted, "a repeat adds nothing")
	assert.Equal(t, []bool{false}, done.Once)

	s = claimOne(t, e, "t2")
	done, err = e.f.CompleteCounted(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusTransient, JobCounters: own, Once: []OnceCounters{css, img}})
	require.NoError(t, err)
	assert.True(t, done.Counted)
	assert.Equal(t, []bool{false, true}, done.Once, "the stylesheet was counted before")
	n, err := e.rdb.HGet(ctx, jobKey, "items_downloaded").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(4), n, "1 own + 1 css, then 1 own + 1 img")

	require.NoError(t, e.rdb.Del(ctx, jobKey).Err())
	s = claimOne(t, e, "t3")
	done, err = e.f.CompleteCounted(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded, JobCounters: own,
		Once: []OnceCounters{{Key: "requisite " + u("/new.js"), Counters: own}}})
	require.NoError(t, err)
	assert.False(t, done.Counted, "no job hash, nothing counted")
	assert.Equal(t, []bool{false}, done.Once)
}

// seedCounted seeds job's start page with maxAttempts attempts and a job
// hash counting items_queued; it returns the test's context and the job
// hash's key.
func seedCounted(t *testing.T, e *env, maxAttempts int) (context.Context, string) {
	t.Helper()
	ctx := ctxT(t)
	jobKey := e.keys.Job(job)
	require.NoError(t, e.rdb.HSet(ctx, jobKey, "items_queued", 0).Err())
	_, err := e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 1, MaxAttempts: maxAttempts, QueuedField: "items_queued"})
	require.NoError(t, err)
	return ctx, jobKey
}

// TestCompleteBatchSumsTheJobCounters: a batch of outcomes (a page sink
// flush's) leaves the same state as completing them one at a time, with
// one HINCRBY per job counter for all of them; a repeated batch changes
// nothing, and a page the batch no longer holds gets its own error while
// the others apply.
func TestCompleteBatchSumsTheJobCounters(t *testing.T) {
	counters := []JobCounter{{"items_downloaded", 1}, {"bytes_downloaded", 100}, {"r2xx", 1}}
	css := OnceCounters{Key: "requisite " + u("/site.css"), Counters: []JobCounter{{"items_downloaded", 1}, {"bytes_downloaded", 10}}}
	// claimed seeds a crawl of five pages besides the start page, done,
	// and claims them.
	claimed := func(t *testing.T) (*env, []Completion) {
		e := newEnv(t, Options{})
		ctx, _ := seedCounted(t, e, 3)
		succeeded(t, e, claimOne(t, e, "seed"), numbered(u("/p%d"), 5)...)
		ps, _, err := e.f.Claim(ctx, job, 5, "t", 0)
		require.NoError(t, err)
		require.Len(t, ps, 5)
		var cs []Completion
		for i, p := range ps {
			o := Outcome{Status: StatusSucceeded, JobCounters: counters, Once: []OnceCounters{css}}
			if i == 3 {
				o = Outcome{Status: StatusTransient, Note: "timed out", JobCounters: []JobCounter{{"error_count", 1}}}
			}
			cs = append(cs, Completion{PageID: p.ID, Attempt: p.Attempts, Outcome: o})
		}
		return e, cs
	}
	hincrby := func(t *testing.T, e *env) int64 {
		calls, err := testredis.CommandCalls(ctxT(t), e.rdb)
		require.NoError(t, err)
		return calls["hincrby"]
	}
	ctx := ctxT(t)
	alone, cs := claimed(t)
	before := hincrby(t, alone)
	for _, c := range cs {
		_, err := alone.f.Complete(ctx, job, c.PageID, c.Attempt, c.Outcome)
		require.NoError(t, err)
	}
	aloneCalls := hincrby(t, alone) - before

	e, cs := claimed(t)
	before = hincrby(t, e)
	var done []Completed
	twice(t, e, func() error {
		op, res, err := e.f.CompleteBatchOp(ctx, job, cs)
		require.NoError(t, err)
		var errs []error
		done, errs, err = res(op(e.rdb))
		require.NoError(t, err)
		return errors.Join(errs...)
	})
	assert.Equal(t, testredis.Dump(t, alone.rdb, "*"), testredis.Dump(t, e.rdb, "*"), "the same state as one at a time")
	assert.Equal(t, map[string]string{"items_queued": "1", "items_downloaded": "5", "bytes_downloaded": "410", "r2xx": "4", "error_count": "1"},
		e.rdb.HGetAll(ctx, e.keys.Job(job)).Val())
	assert.Equal(t, int64(1), done[0].Counts.Ready, "the counts after the batch")
	for i := range done {
		assert.False(t, done[i].Counted, "the repeat counted nothing")
	}
	if e.srv.Real() {
		// The job's three counters, error_count and items_queued: once.
		assert.LessOrEqual(t, hincrby(t, e)-before, aloneCalls-(4*3+3), "one HINCRBY per job counter field for the batch, then none for its repeat")
	}

	// A page claimed again by a later attempt: its own error.
	e, cs = claimed(t)
	n, _, err := e.f.ReleasePages(ctx, job, []int64{cs[1].PageID})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	p := claimOne(t, e, "t2")
	require.Equal(t, cs[1].PageID, p.ID)
	op, res, err := e.f.CompleteBatchOp(ctx, job, cs)
	require.NoError(t, err)
	done, errs, err := res(op(e.rdb))
	require.NoError(t, err)
	require.ErrorIs(t, errs[1], ErrNotClaimed)
	for i, err := range errs {
		if i != 1 {
			require.NoError(t, err)
			assert.True(t, done[i].Counted)
		}
	}
	assert.Equal(t, "4", e.rdb.HGet(ctx, e.keys.Job(job), "items_downloaded").Val(), "three pages and the stylesheet")

	// Without a frontier: the batch's error.
	op, res, err = e.f.CompleteBatchOp(ctx, "nojob", cs[:1])
	require.NoError(t, err)
	_, _, err = res(op(e.rdb))
	require.ErrorIs(t, err, ErrNoFrontier)
}
