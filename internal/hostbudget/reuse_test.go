package hostbudget

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// countedGates are n gates (worker processes), each on its own Redis
// client whose round trips are counted.
func countedGates(t *testing.T, n int, cfg Config) ([]*Gate, []*roundTrips, *testredis.Server) {
	t.Helper()
	srv := testredis.Start(t)
	if !srv.Real() {
		t.Skip("needs a real redis-server (TIME in scripts)")
	}
	keys, err := rkeys.NewKeys("ns:")
	require.NoError(t, err)
	var gates []*Gate
	var rts []*roundTrips
	for range n {
		c := srv.Client()
		require.NoError(t, c.Ping(context.Background()).Err()) // the handshake is not counted
		rt := &roundTrips{}
		c.AddHook(rt)
		g, err := New(c, keys, cfg, nil)
		require.NoError(t, err)
		gates, rts = append(gates, g), append(rts, rt)
	}
	return gates, rts, srv
}

// fleet runs fetchers goroutines on each gate, each doing fetches of host
// that last work, and returns the most fetches in flight at once across
// every gate and how many each gate did.
func fleet(t *testing.T, gates []*Gate, host string, fetchers, fetches int, work time.Duration) (most int64, done []int64) {
	t.Helper()
	ctx := ctxT(t)
	var inflight, peak atomic.Int64
	done = make([]int64, len(gates))
	var wg sync.WaitGroup
	for gi, g := range gates {
		for range fetchers {
			wg.Go(func() {
				for range fetches {
					s, err := g.Acquire(ctx, host)
					if !assertNoErr(t, err) {
						return
					}
					n := inflight.Add(1)
					for {
						m := peak.Load()
						if n <= m || peak.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(work)
					inflight.Add(-1)
					s.Release()
					atomic.AddInt64(&done[gi], 1)
				}
			})
		}
	}
	wg.Wait()
	return peak.Load(), done
}

// repeat runs f again and again in a goroutine until the returned stop
// is called (it waits for the last run).
func repeat(f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				f()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// TestKeptTurnsCutRoundTrips: with Reuse, a host without delay costs a
// round trip per turn and Reuse, not two per fetch; without it, two per
// fetch (take and give back). The concurrency holds either way.
func TestKeptTurnsCutRoundTrips(t *testing.T) {
	const fetchers, fetches = 4, 50
	for _, c := range []struct {
		reuse    time.Duration
		min, max int64
	}{
		{0, 2 * fetchers * fetches, 2*fetchers*fetches + 20},
		{time.Minute, fetchers, 4 * fetchers}, // a turn each, and a new connection's handshake
	} {
		cfg := testConfig()
		cfg.Default = Limits{Concurrency: fetchers}
		cfg.Reuse = c.reuse
		gates, rts, _ := countedGates(t, 1, cfg)
		most, done := fleet(t, gates, "many.example", fetchers, fetches, time.Millisecond)
		require.EqualValues(t, fetchers*fetches, done[0])
		require.LessOrEqual(t, most, int64(fetchers), "reuse %s: the host's concurrency", c.reuse)
		n := rts[0].Load()
		t.Logf("reuse %s: %d round trips for %d fetches", c.reuse, n, fetchers*fetches)
		assert.GreaterOrEqual(t, n, c.min, "reuse %s", c.reuse)
		assert.LessOrEqual(t, n, c.max, "reuse %s", c.reuse)
	}
}

// TestKeptTurnsHoldTheBudgetAcrossGates: two gates (worker processes)
// reusing their turns never have more fetches in flight than the host's
// concurrency, each gets turns, and the Redis in-flight set never counts
// more than the concurrency.
func TestKeptTurnsHoldTheBudgetAcrossGates(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 3}
	cfg.Reuse = 200 * time.Millisecond
	gates, _, srv := countedGates(t, 2, cfg)
	rdb := srv.Client()
	var most atomic.Int64
	stop := repeat(func() { // Redis' own count, as the claim and other gates see it
		n, err := rdb.ZCard(context.Background(), gates[0].keys.HostInflight("shared.example")).Result()
		if err == nil && n > most.Load() {
			most.Store(n)
		}
	})
	peak, done := fleet(t, gates, "shared.example", 4, 40, 2*time.Millisecond)
	stop()
	require.Equal(t, []int64{160, 160}, done, "every fetch of both gates got its turn")
	require.LessOrEqual(t, peak, int64(3), "fetches in flight across both gates")
	require.LessOrEqual(t, most.Load(), int64(3), "turns held in Redis")
}

// TestAWaitingGateGetsATurn: a gate that keeps its host's only turn busy
// gives it back within Reuse once another gate waits for the host.
func TestAWaitingGateGetsATurn(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 1}
	cfg.Reuse = 100 * time.Millisecond
	cfg.MaxWait = 5 * time.Second
	gates, _, _ := countedGates(t, 2, cfg)
	ctx := ctxT(t)
	var fetched atomic.Int64
	stop := repeat(func() { // gate 0 fetches the host back to back
		s, err := gates[0].Acquire(ctx, "one.example")
		if assertNoErr(t, err) {
			fetched.Add(1)
			time.Sleep(time.Millisecond) // the fetch
			s.Release()
		}
	})
	require.Eventually(t, func() bool { return fetched.Load() >= 3 }, 5*time.Second, time.Millisecond,
		"gate 0 keeps the host's turn busy")
	for range 3 {
		s, err := gates[1].Acquire(ctx, "one.example")
		require.NoError(t, err, "the waiting gate gets a turn within max_wait")
		s.Release()
	}
	stop()
}

// TestChangesReachKeptTurnsWithinReuse: a live override (lower
// concurrency, a delay) and another gate's backoff apply to a gate's kept
// turns once Reuse has passed since Redis granted them.
func TestChangesReachKeptTurnsWithinReuse(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 3}
	cfg.Reuse = 200 * time.Millisecond
	cfg.MaxWait = 100 * time.Millisecond
	gates, _, srv := countedGates(t, 2, cfg)
	g, ctx := gates[0], ctxT(t)
	keys, _ := rkeys.NewKeys("ns:")
	rdb := srv.Client()

	take := func(n int) []*Slot {
		var ss []*Slot
		for range n {
			s, err := g.Acquire(ctx, "c.example")
			require.NoError(t, err)
			ss = append(ss, s)
		}
		return ss
	}
	release := func(ss []*Slot) {
		for _, s := range ss {
			s.Release()
		}
	}
	inflight := func() int {
		st, err := g.HostState(ctx, "c.example")
		require.NoError(t, err)
		return st.Inflight
	}
	// Each change comes while the gate's turns are busy; Reuse passes;
	// then they end and are kept: the next fetch asks Redis again.
	ss := take(3)
	require.NoError(t, SetOverride(ctx, rdb, keys, "c.example", Limits{Concurrency: 1}))
	time.Sleep(cfg.Reuse)
	release(ss)
	require.Equal(t, 3, inflight(), "kept turns still count in the host's concurrency")
	ss = take(1)
	requireNoTurn(t, g, "c.example", "the lowered concurrency holds the kept turns")
	require.Equal(t, 1, inflight(), "the kept turns beyond it were given back")

	// A delay: turns are given back and fetch starts spaced.
	require.NoError(t, SetOverride(ctx, rdb, keys, "c.example", Limits{Concurrency: 3, Delay: 150 * time.Millisecond}))
	time.Sleep(cfg.Reuse)
	release(ss)
	g.cfg.MaxWait = 5 * time.Second
	var starts []time.Time
	for range 3 {
		s, err := g.Acquire(ctx, "c.example")
		require.NoError(t, err)
		starts = append(starts, time.Now())
		s.Release()
	}
	for i := 1; i < len(starts); i++ {
		require.GreaterOrEqual(t, starts[i].Sub(starts[i-1]), 120*time.Millisecond, "start %d: the delay (on Redis' clock; this process notices a grant late by its scheduling)", i)
	}
	require.NoError(t, ClearOverride(ctx, rdb, keys, "c.example"))

	// Another gate's backoff.
	ss = take(1)
	_, err := gates[1].Observe(ctx, nil, "c.example", 429, "30", nil)
	require.NoError(t, err)
	time.Sleep(cfg.Reuse)
	release(ss)
	require.Equal(t, 1, inflight(), "kept")
	g.cfg.MaxWait = 100 * time.Millisecond
	w := requireNoTurn(t, g, "c.example", "the other gate's backoff reaches the kept turn")
	require.Equal(t, "backoff", w.Reason)
}

// TestOwnRateLimitStopsReuseAtOnce: a gate's own rate-limited answer
// gives back its kept turns at once, before Reuse.
func TestOwnRateLimitStopsReuseAtOnce(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 2}
	cfg.Reuse = time.Minute
	cfg.MaxWait = 50 * time.Millisecond
	gates, _, _ := countedGates(t, 1, cfg)
	g, ctx := gates[0], ctxT(t)
	a, err := g.Acquire(ctx, "rl.example")
	require.NoError(t, err)
	b, err := g.Acquire(ctx, "rl.example")
	require.NoError(t, err)
	a.Release() // kept
	_, err = g.Observe(ctx, b, "rl.example", 429, "30", nil)
	require.NoError(t, err)
	b.Release() // given back: granted before the rate limit
	w := requireNoTurn(t, g, "rl.example", "no kept turn outlives the rate limit")
	require.Equal(t, "backoff", w.Reason)
	st, err := g.HostState(ctx, "rl.example")
	require.NoError(t, err)
	require.Zero(t, st.Inflight)
}

// TestKeptTurnsOfAKilledWorkerExpire: turns a killed worker kept (no
// renewal, no release) free themselves after the lease, as a fetch's.
func TestKeptTurnsOfAKilledWorkerExpire(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 1}
	cfg.Lease = time.Second
	cfg.Reuse = time.Minute
	gates, _, _ := countedGates(t, 2, cfg)
	ctx := ctxT(t)
	s, err := gates[0].Acquire(ctx, "k.example")
	require.NoError(t, err)
	s.Release()     // kept for reuse
	close(s.l.stop) // the worker dies: no renewal, no release
	<-s.l.done
	start := time.Now()
	s2, err := gates[1].Acquire(ctx, "k.example")
	require.NoError(t, err)
	require.Greater(t, time.Since(start), 500*time.Millisecond, "the kept turn was held until its lease ended")
	s2.Release()
}

// TestCloseGivesBackKeptTurns: a worker shutting down gives its kept
// turns back at once, not after Reuse/2, and keeps none after.
func TestCloseGivesBackKeptTurns(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 2}
	cfg.Reuse = time.Minute
	gates, _, _ := countedGates(t, 1, cfg)
	g, ctx := gates[0], ctxT(t)
	inflight := func() int {
		st, err := g.HostState(ctx, "close.example")
		require.NoError(t, err)
		return st.Inflight
	}
	a, err := g.Acquire(ctx, "close.example")
	require.NoError(t, err)
	b, err := g.Acquire(ctx, "close.example")
	require.NoError(t, err)
	a.Release() // kept for a minute
	require.Equal(t, 2, inflight(), "one busy, one kept")
	g.Close()
	require.Equal(t, 1, inflight(), "the kept turn is given back at Close")
	b.Release() // busy at Close: given back when its fetch ends, not kept
	require.Zero(t, inflight())
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Empty(t, g.idle, "nothing kept after Close")
}

// roundTrips counts a client's round trips: one per command or pipeline
// (bench/benchkit.RoundTrips, which imports this package through the
// frontier).
type roundTrips struct{ atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.Add(1); return next(ctx, cmd) }
}

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.Add(1); return next(ctx, cmds) }
}
