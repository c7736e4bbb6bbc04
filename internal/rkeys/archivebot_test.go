package rkeys

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/abbot"
	"github.com/archiveflow/archiveflow/internal/model"
)

func claimReq(queues ...string) ClaimRequest {
	return ClaimRequest{Queues: queues, PipelineID: "abc123", TaskQueue: "ab", Token: "tok1", Lease: time.Minute}
}

// A claim takes the oldest job of the first queue that has one, moves it
// to working and adopts the bot's hash without touching what the bot wrote.
func TestClaimBotJobOrderAndAdoption(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	bot := abbot.Bot{Redis: e.rdb}
	a1, err := bot.Queue(ctx, "https://a1.example/", abbot.Options{})
	require.NoError(t, err)
	a2, err := bot.Queue(ctx, "https://a2.example/", abbot.Options{})
	require.NoError(t, err)
	ao, err := bot.Queue(ctx, "https://ao.example/", abbot.Options{Shallow: true})
	require.NoError(t, err)
	named, err := bot.Queue(ctx, "https://named.example/", abbot.Options{Pipeline: "nick"})
	require.NoError(t, err)

	qs, err := e.store.NamedQueues(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"pending:nick"}, qs)

	order := []string{"pending:nick", QueuePending, QueuePendingAO}
	var got []string
	for i := range 5 {
		r := claimReq(order...)
		r.Token = fmt.Sprint("tok", i)
		c, err := e.store.ClaimBotJob(ctx, r)
		require.NoError(t, err)
		got = append(got, c.Ident)
	}
	assert.Equal(t, []string{named.Ident, a1.Ident, a2.Ident, ao.Ident, ""}, got)

	h, err := e.rdb.HGetAll(ctx, a1.Ident).Result()
	require.NoError(t, err)
	assert.Equal(t, "https://a1.example/", h["url"])
	assert.Equal(t, "inf", h["fetch_depth"])
	assert.Equal(t, "3", h["concurrency"], "the bot's settings stay")
	assert.Equal(t, "2", h["settings_age"], "the bot's settings_age stays")
	assert.Equal(t, "pipeline:abc123", h["pipeline_id"])
	assert.NotEmpty(t, h["started_at"])
	assert.Equal(t, "pending", h["state"])
	assert.Equal(t, "pending", h["claim_queue"])
	assert.Equal(t, "tok1", h["claim_token"])
	assert.Equal(t, "0", h["items_downloaded"])
	working, err := e.rdb.LRange(ctx, "working", 0, -1).Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{named.Ident, a1.Ident, a2.Ident, ao.Ident}, working)
	n, err := e.rdb.ZCard(ctx, "pipeline-claims").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 4, n)
	isPending, err := e.rdb.SIsMember(ctx, "state:pending", a1.Ident).Result()
	require.NoError(t, err)
	assert.True(t, isPending)
}

// Entries whose job is gone or final are dropped; jobs archiveflow itself
// submitted (mirrored in pending) are left where they are.
func TestClaimBotJobSkipsOwnAndDropsDead(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	bot := abbot.Bot{Redis: e.rdb}
	own := testJob(t, "https://own.example/")
	require.NoError(t, e.store.CreateJob(ctx, own)) // LPUSH pending
	b, err := bot.Queue(ctx, "https://bot.example/", abbot.Options{})
	require.NoError(t, err)
	require.NoError(t, e.rdb.LPush(ctx, "pending", "ghost").Err())
	done, err := bot.Queue(ctx, "https://done.example/", abbot.Options{})
	require.NoError(t, err)
	require.NoError(t, e.rdb.HSet(ctx, done.Ident, "finished_at", "1").Err())
	// pending, head first: done, ghost, bot, own
	c, err := e.store.ClaimBotJob(ctx, claimReq(QueuePending))
	require.NoError(t, err)
	assert.Equal(t, b.Ident, c.Ident)
	assert.Empty(t, c.Dropped, "nothing dead lies before the bot job")
	c, err = e.store.ClaimBotJob(ctx, claimReq(QueuePending))
	require.NoError(t, err)
	assert.Empty(t, c.Ident)
	assert.ElementsMatch(t, []string{"ghost", done.Ident}, c.Dropped)
	pending, err := e.rdb.LRange(ctx, "pending", 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{own.Ident}, pending)
}

// An unconfirmed claim goes back to the tail of its queue (taken next);
// a confirmed one or one with another token is left alone.
func TestRequeueAndConfirmClaim(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	bot := abbot.Bot{Redis: e.rdb}
	j1, err := bot.Queue(ctx, "https://one.example/", abbot.Options{Shallow: true})
	require.NoError(t, err)
	j2, err := bot.Queue(ctx, "https://two.example/", abbot.Options{Shallow: true})
	require.NoError(t, err)
	c, err := e.store.ClaimBotJob(ctx, claimReq(QueuePendingAO))
	require.NoError(t, err)
	require.Equal(t, j1.Ident, c.Ident)

	none, err := e.store.ExpiredClaims(ctx, e.clock.Now(), 10)
	require.NoError(t, err)
	assert.Empty(t, none, "the lease has not ended")
	e.clock.Add(2 * time.Minute)
	exp, err := e.store.ExpiredClaims(ctx, e.clock.Now(), 10)
	require.NoError(t, err)
	require.Len(t, exp, 1)
	assert.Equal(t, Claim{Ident: j1.Ident, Queue: QueuePendingAO, Token: "tok1"}, exp[0])

	stale := exp[0]
	stale.Token = "other"
	ok, err := e.store.RequeueClaim(ctx, stale)
	require.NoError(t, err)
	assert.False(t, ok, "another token's claim is not requeued")

	ok, err = e.store.RequeueClaim(ctx, exp[0])
	require.NoError(t, err)
	assert.True(t, ok)
	q, err := e.rdb.LRange(ctx, "pending-ao", 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{j2.Ident, j1.Ident}, q, "back at the tail: taken next")
	working, err := e.rdb.LLen(ctx, "working").Result()
	require.NoError(t, err)
	assert.Zero(t, working)
	h, err := e.rdb.HGetAll(ctx, j1.Ident).Result()
	require.NoError(t, err)
	assert.NotContains(t, h, "started_at")
	assert.NotContains(t, h, "pipeline_id")

	r := claimReq(QueuePendingAO)
	r.Token = "tok2"
	c, err = e.store.ClaimBotJob(ctx, r)
	require.NoError(t, err)
	require.Equal(t, j1.Ident, c.Ident)
	ok, err = e.store.ConfirmClaim(ctx, j1.Ident, "tok1")
	require.NoError(t, err)
	assert.False(t, ok, "the old token confirms nothing")
	ok, err = e.store.ConfirmClaim(ctx, j1.Ident, "tok2")
	require.NoError(t, err)
	assert.True(t, ok)
	e.clock.Add(2 * time.Minute)
	exp, err = e.store.ExpiredClaims(ctx, e.clock.Now(), 10)
	require.NoError(t, err)
	assert.Empty(t, exp, "a confirmed claim has no lease")

	jobs, err := e.store.WorkingBotJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []BotJob{{Ident: j1.Ident, SettingsAge: 2}}, jobs)
	require.NoError(t, bot.Abort(ctx, j1.Ident))
	jobs, err = e.store.WorkingBotJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []BotJob{{Ident: j1.Ident, SettingsAge: 3, AbortRequested: true}}, jobs)
	require.NoError(t, e.store.Finish(ctx, j1.Ident, model.StateAborted))
	jobs, err = e.store.WorkingBotJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, jobs, "a finished job is no longer watched")
}

// Claimers racing over one set of queues take every job exactly once.
func TestClaimBotJobConcurrent(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	bot := abbot.Bot{Redis: e.rdb}
	const n = 100
	for i := range n {
		_, err := bot.Queue(ctx, fmt.Sprintf("https://race%d.example/", i), abbot.Options{Shallow: i%2 == 0})
		require.NoError(t, err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := NewStore(e.srv.Client(), testOptions(Options{}), nil)
			if !assert.NoError(t, err) {
				return
			}
			for i := 0; ; i++ {
				r := claimReq(QueuePending, QueuePendingAO)
				r.Token = fmt.Sprintf("w%d-%d", w, i)
				c, err := st.ClaimBotJob(ctx, r)
				if !assert.NoError(t, err) || c.Ident == "" {
					return
				}
				mu.Lock()
				seen[c.Ident]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, seen, n)
	for id, k := range seen {
		assert.Equal(t, 1, k, "job %s claimed %d times", id, k)
	}
}

// Settings read from the bot's hash are never written back: a write-back
// could undo a change the bot made after the read.
func TestSetSettingsLeavesBotOwnedSettingsAlone(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	bot := abbot.Bot{Redis: e.rdb}
	j, err := bot.Queue(ctx, "https://owned.example/", abbot.Options{Shallow: true})
	require.NoError(t, err)
	require.NoError(t, bot.AddIgnore(ctx, j.Ident, `\.gif$`))
	before := dump(t, e.rdb)
	age, err := e.store.SetSettings(ctx, j.Ident, model.Settings{Concurrency: 9, BotOwned: true})
	require.NoError(t, err)
	assert.Zero(t, age)
	assert.Equal(t, before, dump(t, e.rdb))
}
