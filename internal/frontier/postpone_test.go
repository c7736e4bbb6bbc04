package frontier

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/hostbudget"
	"github.com/archiveflow/archiveflow/internal/hostname"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// redisNow is Redis' clock (the frontier's and the host budget's).
func redisNow(t *testing.T, e *env) time.Time {
	now, err := e.rdb.Time(ctxT(t)).Result()
	require.NoError(t, err)
	return now
}

// TestPostponedPageKeepsItsAttempt: a postponed outcome makes the page
// READY again without spending an attempt, not claimable before its time,
// then first of its depth; the postponement survives in Redis.
func TestPostponedPageKeepsItsAttempt(t *testing.T) {
	e := newEnv(t, Options{})
	if !e.srv.Real() {
		t.Skip("needs a real redis-server (TIME in scripts)")
	}
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 2})
	s := claimOne(t, e, "t0")
	_, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 0, links(u("/a"), u("/b")))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	a := claimOne(t, e, "ta")
	require.Equal(t, u("/a"), a.URL)

	at := redisNow(t, e).Add(700 * time.Millisecond)
	c, err := e.f.Complete(ctx, job, a.ID, a.Attempts, Outcome{Status: StatusPostponed, NotBefore: at, Note: "host rate-limited"})
	require.NoError(t, err)
	require.EqualValues(t, 2, c.Ready, "a postponed page is READY")

	// Before its time only /b is claimable.
	ps, _, err := e.f.Claim(ctx, job, 5, "tb", 0)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, u("/b"), ps[0].URL)
	_, err = e.f.Complete(ctx, job, ps[0].ID, ps[0].Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	ps, c, err = e.f.Claim(ctx, job, 5, "tc", 0)
	require.NoError(t, err)
	require.Empty(t, ps, "not before its time")
	require.False(t, c.Finished(), "a postponed page keeps the crawl going")

	// After it: claimed again with every attempt left.
	var again []Page
	require.Eventually(t, func() bool {
		again, _, err = e.f.Claim(ctx, job, 5, "td", 0)
		return err == nil && len(again) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.False(t, redisNow(t, e).Before(at), "claimed no earlier than its not-before time")
	p := again[0]
	require.Equal(t, u("/a"), p.URL)
	require.Equal(t, 2, p.Attempts, "a new attempt number")
	require.Equal(t, 2, p.AttemptsRemaining, "no attempt spent")
	require.Equal(t, StatusPostponed, p.Status)
	stored, err := e.f.PageByID(ctx, job, p.ID)
	require.NoError(t, err)
	require.Equal(t, "host rate-limited", stored.Note, "the note says why it waited")

	// A postponement already due goes straight back to the queue.
	_, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusPostponed})
	require.NoError(t, err)
	p = claimOne(t, e, "te")
	require.Equal(t, 2, p.AttemptsRemaining)
	// Repeat-safe like every outcome.
	twice(t, e, func() error {
		_, err := e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusPostponed, NotBefore: redisNow(t, e).Add(time.Hour)})
		return err
	})
	require.Contains(t, e.f.keyNames(job), e.f.key(job, "later"))
	keys, err := e.f.JobKeys(ctx, job)
	require.NoError(t, err)
	require.Contains(t, keys, e.f.key(job, "later"), "Expire and Delete reach the postponed pages")
}

// TestClaimLeavesBusyHostsReady: with the host budget on, a claim takes
// the pages of hosts that have a turn and leaves a backed-off host's
// pages, and those over a host's concurrency, READY for later.
func TestClaimLeavesBusyHostsReady(t *testing.T) {
	var found []string
	for _, h := range []string{"limited.example", "open.example", "third.example"} {
		for i := range 4 {
			found = append(found, "http://"+h+"/"+string(rune('a'+i)))
		}
	}
	e, keys := hostBudgetCrawl(t, found)
	ctx := ctxT(t)

	g, err := hostbudget.New(e.rdb, keys, hostbudget.Config{Default: hostbudget.Limits{Concurrency: 2}, Lease: time.Minute,
		RateLimit: hostbudget.RateLimit{Statuses: []int{429}, MaxRetryAfter: time.Hour, Backoff: time.Second, MaxBackoff: time.Hour, GiveUpAfter: time.Hour}}, nil)
	require.NoError(t, err)
	_, err = g.Observe(ctx, nil, "limited.example", 429, "600", nil)
	require.NoError(t, err)

	ps, c, err := e.f.Claim(ctx, job, 12, "t1", 0)
	require.NoError(t, err)
	per := map[string]int{}
	for _, p := range ps {
		h, err := hostname.Of(p.URL)
		require.NoError(t, err)
		per[h]++
	}
	require.Equal(t, map[string]int{"open.example": 2, "third.example": 2}, per,
		"the backed-off host gets nothing, the others their concurrency")
	require.EqualValues(t, 8, c.Ready, "the rest stay READY")
	require.EqualValues(t, 4, c.Claimed)
}

// TestClaimBatchTakesPagesWhateverTheirHostsTurn: a page batch's claim
// takes pages in line though their host is at its concurrency: the
// batch takes the host's turns when it fetches.
func TestClaimBatchTakesPagesWhateverTheirHostsTurn(t *testing.T) {
	var found []string
	for i := range 6 {
		found = append(found, "http://one.example/"+string(rune('a'+i)))
	}
	e, _ := hostBudgetCrawl(t, found)
	ctx := ctxT(t)
	ps, _, err := e.f.Claim(ctx, job, 6, "t1", 0)
	require.NoError(t, err)
	require.Len(t, ps, 2, "a claim: the host's concurrency")
	ps, c, err := e.f.ClaimBatch(ctx, job, 6, "t2", 0, 0)
	require.NoError(t, err)
	require.Len(t, ps, 4, "a batch's claim: every page in line")
	require.Zero(t, c.Ready)
}

// hostBudgetCrawl is a crawl on a real redis-server with the host budget
// on (concurrency 2) whose start page succeeded, linking found.
func hostBudgetCrawl(t *testing.T, found []string) (*env, rkeys.Keys) {
	t.Helper()
	keys, err := rkeys.NewKeys("ns:")
	require.NoError(t, err)
	e := newEnv(t, Options{HostBudget: keys.HostBudgetPrefix(), HostConcurrency: 2})
	if !e.srv.Real() {
		t.Skip("needs a real redis-server (TIME in scripts)")
	}
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 3})
	s := claimOne(t, e, "t0")
	_, err = e.f.Discover(ctx, job, s.ID, s.Attempts, 0, links(found...))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	return e, keys
}
