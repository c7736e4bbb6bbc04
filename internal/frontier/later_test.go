package frontier

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// laterEnv seeds a frontier with later retries: 1 attempt per round, the
// given delays, a job hash counting items_queued; the start page is done
// and /a and /b are READY at depth 1.
func laterEnv(t *testing.T, delays ...time.Duration) (*env, string) {
	t.Helper()
	e := newEnv(t, Options{})
	if !e.srv.Real() {
		t.Skip("needs a real redis-server (TIME in scripts)")
	}
	ctx := ctxT(t)
	jobKey := e.keys.Job(job)
	require.NoError(t, e.rdb.HSet(ctx, jobKey, "items_queued", 0).Err())
	_, err := e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 1, MaxAttempts: 1, QueuedField: "items_queued", RetryLater: delays})
	require.NoError(t, err)
	s := claimOne(t, e, "seed")
	_, err = e.f.Discover(ctx, job, s.ID, s.Attempts, 0, links(u("/a"), u("/b")))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	return e, jobKey
}

// claimDue claims the one page that becomes due within the deadline,
// using claim (Claim or ClaimBatch).
func claimDue(t *testing.T, e *env, token string, batch bool) Page {
	t.Helper()
	var got []Page
	require.Eventually(t, func() bool {
		var err error
		if batch {
			got, _, err = e.f.ClaimBatch(ctxT(t), job, 5, token, 0, 0)
		} else {
			got, _, err = e.f.Claim(ctxT(t), job, 5, token, 0)
		}
		require.NoError(t, err)
		return len(got) > 0
	}, 10*time.Second, 20*time.Millisecond)
	require.Len(t, got, 1)
	return got[0]
}

// TestTransientPageWaitsForItsLaterRetries: a page whose attempts run out
// transiently waits (READY, status waiting, not claimable, by Claim and
// ClaimBatch alike) for each delay in turn with fresh attempts, keeps the
// crawl unfinished and items_queued counting it, and is DONE failed, and
// counted failed once, only when its last later retry fails.
func TestTransientPageWaitsForItsLaterRetries(t *testing.T) {
	e, jobKey := laterEnv(t, 300*time.Millisecond, 600*time.Millisecond)
	ctx := ctxT(t)
	a := claimOne(t, e, "a1")
	require.Equal(t, u("/a"), a.URL)
	before := redisNow(t, e).Truncate(time.Millisecond)
	c, err := e.f.Complete(ctx, job, a.ID, a.Attempts, Outcome{Status: StatusTransient, Note: "503"})
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Waiting)
	require.EqualValues(t, 2, c.Ready, "a waiting page is READY")
	require.Zero(t, c.Failed)
	require.False(t, c.Finished())
	require.WithinRange(t, c.RetryAt, before.Add(300*time.Millisecond), before.Add(5*time.Second))

	p, err := e.f.PageByID(ctx, job, a.ID)
	require.NoError(t, err)
	require.Equal(t, StatusWaiting, p.Status)
	require.Equal(t, StateReady, p.State)
	require.Equal(t, 1, p.LaterRetries)
	require.Equal(t, 1, p.AttemptsRemaining, "fresh attempts for the later retry")
	require.Equal(t, c.RetryAt, p.RetryAt)
	require.Equal(t, "503", p.Note)
	listed, err := e.f.AllPages(ctx, job, Filter{Status: StatusWaiting})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, c.RetryAt, listed[0].RetryAt, "a listing says when a waiting page is due")

	// Before its time only /b is claimable; then nothing, yet not finished.
	b := claimOne(t, e, "b1")
	require.Equal(t, u("/b"), b.URL)
	_, err = e.f.Complete(ctx, job, b.ID, b.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	ps, c, err := e.f.ClaimBatch(ctx, job, 5, "none", 0, 0)
	require.NoError(t, err)
	require.Empty(t, ps, "a batch claim skips a waiting page too")
	require.False(t, c.Finished())
	queued, err := e.rdb.HGet(ctx, jobKey, "items_queued").Int64()
	require.NoError(t, err)
	require.EqualValues(t, 1, queued, "items_queued still counts the waiting page")

	// First later retry: claimed when due, with a new attempt number.
	a = claimDue(t, e, "a2", true)
	require.False(t, redisNow(t, e).Before(c.RetryAt), "not claimed before it was due")
	require.Equal(t, 2, a.Attempts)
	require.Equal(t, StatusTransient, a.Status, "back from waiting: its last outcome")
	c, err = e.f.Complete(ctx, job, a.ID, a.Attempts, Outcome{Status: StatusTransient, Note: "503 again"})
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Waiting, "the second delay")
	// A repeated completion changes nothing (no second later retry taken).
	twice(t, e, func() error {
		_, err := e.f.Complete(ctx, job, a.ID, a.Attempts, Outcome{Status: StatusTransient})
		return err
	})

	// Second later retry, by a plain Claim: it fails, no delay is left.
	a = claimDue(t, e, "a3", false)
	require.Equal(t, 3, a.Attempts)
	c, err = e.f.Complete(ctx, job, a.ID, a.Attempts, Outcome{Status: StatusTransient, Note: "503 for good"})
	require.NoError(t, err)
	require.Zero(t, c.Waiting)
	require.True(t, c.RetryAt.IsZero())
	require.EqualValues(t, 1, c.Failed, "failed once, at its last later retry")
	require.EqualValues(t, 2, c.Succeeded)
	require.True(t, c.Finished())
	p, err = e.f.PageByID(ctx, job, a.ID)
	require.NoError(t, err)
	require.Equal(t, StatusFailed, p.Status)
	require.Equal(t, 2, p.LaterRetries)
	queued, err = e.rdb.HGet(ctx, jobKey, "items_queued").Int64()
	require.NoError(t, err)
	require.Zero(t, queued)

	// A crawl retry requeues it with its later retries back.
	r, err := e.f.Requeue(ctx, job, "retry", 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, r.Pages)
	p, err = e.f.PageByID(ctx, job, a.ID)
	require.NoError(t, err)
	require.Zero(t, p.LaterRetries)
}

// TestWaitingPageSucceedsOnItsLaterRetry: the page succeeds on its later
// retry and is counted succeeded only; the frontier is then finished.
func TestWaitingPageSucceedsOnItsLaterRetry(t *testing.T) {
	e, _ := laterEnv(t, 200*time.Millisecond)
	ctx := ctxT(t)
	for _, tok := range []string{"a", "b"} {
		p := claimOne(t, e, tok)
		_, err := e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusTransient})
		require.NoError(t, err)
	}
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.EqualValues(t, 2, c.Waiting)
	require.False(t, c.RetryAt.IsZero())
	var got []Page
	require.Eventually(t, func() bool {
		ps, _, err := e.f.Claim(ctx, job, 5, "later-"+time.Now().String(), 0)
		require.NoError(t, err)
		got = append(got, ps...)
		return len(got) == 2
	}, 10*time.Second, 20*time.Millisecond)
	for _, p := range got {
		c, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusSucceeded})
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, c.Succeeded)
	require.Zero(t, c.Failed)
	require.True(t, c.Finished())
}

// TestFailWaitingEndsTheWait: a stopped crawl's waiting pages are DONE
// failed with the reason before their last note, once; a shorter path
// found meanwhile moves a waiting page's depth without making it
// claimable; a skipped waiting page leaves the wait.
func TestFailWaitingEndsTheWait(t *testing.T) {
	e, jobKey := laterEnv(t, time.Hour)
	ctx := ctxT(t)
	for _, tok := range []string{"a", "b"} {
		p := claimOne(t, e, tok)
		_, err := e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusTransient, Note: "timeout"})
		require.NoError(t, err)
	}
	b, err := e.f.Page(ctx, job, u("/b"))
	require.NoError(t, err)
	require.NoError(t, e.f.Skip(ctx, job, b.ID, "rule"))
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Waiting, "a skipped page waits no more")
	ps, _, err := e.f.Claim(ctx, job, 5, "early", 0)
	require.NoError(t, err)
	require.Empty(t, ps)

	n, c, err := e.f.FailWaiting(ctx, job, "later retry not run (aborted)")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, c.Waiting)
	require.EqualValues(t, 1, c.Failed)
	require.True(t, c.Finished())
	a, err := e.f.Page(ctx, job, u("/a"))
	require.NoError(t, err)
	require.Equal(t, StatusFailed, a.Status)
	require.Equal(t, "later retry not run (aborted): timeout", a.Note)
	queued, err := e.rdb.HGet(ctx, jobKey, "items_queued").Int64()
	require.NoError(t, err)
	require.Zero(t, queued)
	twice(t, e, func() error {
		_, _, err := e.f.FailWaiting(ctx, job, "again")
		return err
	})
}

// TestRetryLaterIsPartOfTheSeed: the delays are the frontier's
// configuration: seeding again with others conflicts, and a frontier
// without them fails a page at once, as before.
func TestRetryLaterIsPartOfTheSeed(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	cfg := Config{MaxDepth: 0, MaxAttempts: 1, RetryLater: []time.Duration{time.Minute}}
	seed(t, e, cfg)
	seed(t, e, cfg)
	_, err := e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 0, MaxAttempts: 1})
	require.ErrorIs(t, err, ErrSeedConflict)
	_, err = e.f.Seed(ctx, "other", u("/"), Config{MaxAttempts: 1, RetryLater: []time.Duration{0}})
	require.ErrorIs(t, err, ErrInvalidArgument)

	e2 := newEnv(t, Options{})
	seed(t, e2, Config{MaxDepth: 0, MaxAttempts: 1})
	p := claimOne(t, e2, "t")
	c, err := e2.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusTransient})
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Failed)
	require.Zero(t, c.Waiting)
}

// TestLastAttemptWaitsAtOnce: an outcome that spends every attempt left
// (Outcome.Last: a crawl's start page, whose snapshot ran its in-run
// attempts) makes a page with attempts left wait for its later retry at
// once, with fresh attempts; after the last delay it is DONE failed.
func TestLastAttemptWaitsAtOnce(t *testing.T) {
	e := newEnv(t, Options{})
	if !e.srv.Real() {
		t.Skip("needs a real redis-server (TIME in scripts)")
	}
	ctx := ctxT(t)
	_, err := e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 1, MaxAttempts: 3, RetryLater: []time.Duration{100 * time.Millisecond}})
	require.NoError(t, err)
	s := claimOne(t, e, "seed")
	c, err := e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusTransient, Note: "503", Last: true})
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Waiting, "it waits although 2 of its 3 attempts are left")
	p, err := e.f.PageByID(ctx, job, s.ID)
	require.NoError(t, err)
	require.Equal(t, StatusWaiting, p.Status)
	require.Equal(t, 3, p.AttemptsRemaining)

	s = claimDue(t, e, "seed-later", false)
	c, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusTransient, Note: "503 again", Last: true})
	require.NoError(t, err)
	require.Zero(t, c.Waiting)
	require.EqualValues(t, 1, c.Failed, "no delay left: failed")
	require.True(t, c.Finished())
}
