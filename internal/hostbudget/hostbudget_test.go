package hostbudget

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/hostname"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testConfig() Config {
	return Config{
		Default: Limits{Concurrency: 2},
		Lease:   time.Minute,
		MaxWait: 30 * time.Second,
		Poll:    5 * time.Millisecond,
		RateLimit: RateLimit{Statuses: []int{429, 503}, MaxRetryAfter: time.Minute,
			Backoff: time.Second, MaxBackoff: 10 * time.Second, GiveUpAfter: time.Hour},
	}
}

func newGates(t *testing.T, n int, cfg Config) ([]*Gate, *redis.Client) {
	t.Helper()
	gates, _, srv := countedGates(t, n, cfg)
	return gates, srv.Client()
}

// TestConcurrencyIsSharedByEveryGate: two gates (two worker processes)
// never hold more than the host's concurrency at once, and every fetch
// gets its turn.
func TestConcurrencyIsSharedByEveryGate(t *testing.T) {
	gates, _ := newGates(t, 2, testConfig())
	ctx := ctxT(t)
	most, done := fleet(t, gates, "example.com", 10, 1, 10*time.Millisecond)
	require.Equal(t, []int64{10, 10}, done)
	require.EqualValues(t, 2, most, "at most the host's concurrency in flight, and the budget used")
	// Another host is not held up by this one.
	s, err := gates[0].Acquire(ctx, "other.example")
	require.NoError(t, err)
	s.Release()
}

// requireNoTurn requires that a fetch on host gets no turn within MaxWait.
func requireNoTurn(t *testing.T, g *Gate, host, why string) *Wait {
	t.Helper()
	_, err := g.Acquire(ctxT(t), host)
	var w *Wait
	require.ErrorAs(t, err, &w, why)
	return w
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// TestDelayBetweenStarts: fetch starts on one host are at least its
// delay apart, whichever gate takes them.
func TestDelayBetweenStarts(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 10, Delay: 100 * time.Millisecond}
	gates, _ := newGates(t, 2, cfg)
	ctx := ctxT(t)
	var mu sync.Mutex
	var starts []time.Time
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			s, err := gates[i%2].Acquire(ctx, "slow.example")
			if !assertNoErr(t, err) {
				return
			}
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			s.Release()
		})
	}
	wg.Wait()
	require.Len(t, starts, 6)
	slicesSortTimes(starts)
	for i := 1; i < len(starts); i++ {
		// Redis' clock decides; a few ms of scheduling between the
		// grant and this process noticing it.
		require.GreaterOrEqual(t, starts[i].Sub(starts[i-1]), 90*time.Millisecond, "start %d", i)
	}
}

func slicesSortTimes(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// TestOverrides: a configured host override and a live one (which wins)
// set the host's limits.
func TestOverrides(t *testing.T) {
	cfg := testConfig()
	cfg.MaxWait = 50 * time.Millisecond
	cfg.Hosts = map[string]Limits{"one.example": {Concurrency: 1}}
	gates, rdb := newGates(t, 1, cfg)
	g, ctx := gates[0], ctxT(t)

	s, err := g.Acquire(ctx, "one.example")
	require.NoError(t, err)
	w := requireNoTurn(t, g, "one.example", "a configured concurrency of 1 holds the second fetch")
	require.Equal(t, "busy", w.Reason)
	s.Release()

	keys, _ := rkeys.NewKeys("ns:")
	require.NoError(t, SetOverride(ctx, rdb, keys, "One.Example", Limits{Concurrency: 3}))
	var slots []*Slot
	for range 3 {
		s, err := g.Acquire(ctx, "one.example")
		require.NoError(t, err, "the live override wins over the configuration")
		slots = append(slots, s)
	}
	requireNoTurn(t, g, "one.example", "the live override's concurrency of 3")
	for _, s := range slots {
		s.Release()
	}
	require.NoError(t, ClearOverride(ctx, rdb, keys, "one.example"))
	require.Error(t, SetOverride(ctx, rdb, keys, "x.example", Limits{Concurrency: 0}), "a concurrency of 0 is refused")
}

// TestLeaseOfAKilledFetchExpires: a slot nobody releases or renews (its
// worker killed) frees itself after the lease.
func TestLeaseOfAKilledFetchExpires(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 1}
	cfg.Lease = time.Second
	gates, _ := newGates(t, 1, cfg)
	g, ctx := gates[0], ctxT(t)
	s, err := g.Acquire(ctx, "k.example")
	require.NoError(t, err)
	close(s.l.stop) // the worker dies: no renewal, no release
	<-s.l.done
	start := time.Now()
	s2, err := g.Acquire(ctx, "k.example")
	require.NoError(t, err)
	require.Greater(t, time.Since(start), 500*time.Millisecond, "the dead fetch's slot was held until its lease ended")
	s2.Release()
}

// TestRenewedLeaseHoldsTheSlot: a fetch longer than its lease keeps its
// slot.
func TestRenewedLeaseHoldsTheSlot(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 1}
	cfg.Lease = time.Second
	cfg.MaxWait = 2 * time.Second
	gates, _ := newGates(t, 1, cfg)
	g, ctx := gates[0], ctxT(t)
	s, err := g.Acquire(ctx, "r.example")
	require.NoError(t, err)
	requireNoTurn(t, g, "r.example", "a renewed slot is held past its first lease")
	s.Release()
	s.Release() // repeatable
	s, err = g.Acquire(ctx, "r.example")
	require.NoError(t, err)
	s.Release()
}

// TestRetryAfterBacksTheHostOff: a 429 with Retry-After holds every fetch
// of the host until it ends, durable in Redis (a new gate sees it).
func TestRetryAfterBacksTheHostOff(t *testing.T) {
	cfg := testConfig()
	cfg.MaxWait = 100 * time.Millisecond
	gates, _ := newGates(t, 2, cfg)
	ctx := ctxT(t)
	s, err := gates[0].Acquire(ctx, "rl.example")
	require.NoError(t, err)
	b, err := gates[0].Observe(ctx, s, "rl.example", 429, "2", nil)
	require.NoError(t, err)
	s.Release()
	require.NotNil(t, b)
	require.Equal(t, 2*time.Second, b.RetryAfter)
	require.Equal(t, 2*time.Second, b.Until.Sub(b.At))
	require.False(t, b.GiveUp)

	_, err = gates[1].Acquire(ctx, "rl.example")
	var w *Wait
	require.ErrorAs(t, err, &w, "the other worker sees the backoff")
	require.Equal(t, "backoff", w.Reason)
	require.Equal(t, b.Until, w.Until)
	require.Equal(t, b.Since, w.Since)

	// Waiting is allowed: the turn comes at the backoff's end, not before.
	gates[1].cfg.MaxWait = 5 * time.Second
	s, err = gates[1].Acquire(ctx, "rl.example")
	require.NoError(t, err)
	require.False(t, time.Now().Before(b.Until.Add(-20*time.Millisecond)), "no fetch inside the backoff")
	// A good answer ends the streak.
	b2, err := gates[1].Observe(ctx, s, "rl.example", 200, "", nil)
	require.NoError(t, err)
	require.Nil(t, b2)
	s.Release()
	st, err := gates[1].HostState(ctx, "rl.example")
	require.NoError(t, err)
	require.Zero(t, st.Level)
	require.True(t, st.Since.IsZero())
}

// TestExponentialBackoffAndGiveUp: without Retry-After each rate limit in
// a row doubles the wait up to the cap; a streak past GiveUpAfter gives
// up; Retry-After is capped.
func TestExponentialBackoffAndGiveUp(t *testing.T) {
	cfg := testConfig()
	cfg.RateLimit.Backoff, cfg.RateLimit.MaxBackoff = time.Second, 3*time.Second
	gates, _ := newGates(t, 1, cfg)
	g, ctx := gates[0], ctxT(t)
	var waits []time.Duration
	for range 4 {
		b, err := g.Observe(ctx, nil, "e.example", 503, "", nil)
		require.NoError(t, err)
		waits = append(waits, b.Until.Sub(b.At))
	}
	// Each backoff ends no earlier than the last one.
	require.Equal(t, time.Second, waits[0])
	require.GreaterOrEqual(t, waits[1], 2*time.Second-10*time.Millisecond)
	require.LessOrEqual(t, waits[1], 2*time.Second)
	require.GreaterOrEqual(t, waits[3], 3*time.Second-10*time.Millisecond)
	require.LessOrEqual(t, waits[3], 3*time.Second, "capped at MaxBackoff")

	b, err := g.Observe(ctx, nil, "cap.example", 429, "86400", nil)
	require.NoError(t, err)
	require.Equal(t, time.Minute, b.RetryAfter, "Retry-After capped at MaxRetryAfter")

	g.cfg.RateLimit.GiveUpAfter = 0
	b, err = g.Observe(ctx, nil, "e.example", 429, "1", nil)
	require.NoError(t, err)
	require.True(t, b.GiveUp)
	require.Contains(t, b.Note(g), "longer than crawl.rate_limit.give_up_after")
}

func TestRateLimitedRules(t *testing.T) {
	g := &Gate{cfg: Config{RateLimit: RateLimit{Statuses: []int{429}, RetryAfterStatuses: []int{503}, Markers: []Marker{
		{Status: 200, Body: regexp.MustCompile(`(?i)slow down`)}, {Status: 403}}}}}
	require.True(t, g.RateLimited(429, "", nil))
	require.False(t, g.RateLimited(503, "", nil), "a plain 503 is the page's error")
	require.True(t, g.RateLimited(503, "120", nil), "a 503 saying when to come back is a rate limit")
	require.False(t, g.RateLimited(500, "120", nil))
	require.True(t, g.RateLimited(200, "", []byte("please SLOW DOWN")))
	require.False(t, g.RateLimited(200, "", []byte("hello")))
	require.True(t, g.RateLimited(403, "", nil))
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"3", 3 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	} {
		got, ok := ParseRetryAfter(c.in, now)
		require.Equal(t, c.ok, ok, c.in)
		require.Equal(t, c.want, got, c.in)
	}
}

// TestLuaHostWait checks the claim's view of the budget: host names as
// Host derives them, backoff and delay waits, a host at its concurrency.
func TestLuaHostWait(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 1, Delay: 10 * time.Second}
	gates, rdb := newGates(t, 1, cfg)
	g, ctx := gates[0], ctxT(t)
	probe := redis.NewScript(luaNow + LuaHostWait + `
if ARGV[1] == 'host' then return host_of(ARGV[2]) or false end
return host_wait(ARGV[2], ARGV[3], now_ms(), tonumber(ARGV[4]), tonumber(ARGV[5]))
`)
	for _, u := range []string{"http://Example.COM/a", "https://user:pw@example.com:8443/?q", "http://[::1]:80/x", "http://127.0.0.2:9000"} {
		want, err := hostname.Of(u)
		require.NoError(t, err)
		got, err := probe.Run(ctx, rdb, nil, "host", u).Text()
		require.NoError(t, err, u)
		require.Equal(t, want, got, u)
	}
	prefix := g.keys.HostBudgetPrefix()
	wait := func(host string, extra int) int64 {
		n, err := probe.Run(ctx, rdb, nil, "wait", prefix, host, extra, 2).Int64()
		require.NoError(t, err)
		return n
	}
	require.Zero(t, wait("fresh.example", 0), "an unknown host may start")
	require.EqualValues(t, -1, wait("fresh.example", 2), "two planned fetches reach the default concurrency")
	s, err := g.Acquire(ctx, "busy.example")
	require.NoError(t, err)
	w := wait("busy.example", 0)
	require.Greater(t, w, int64(9000), "the host's delay is waited for")
	s.Release()
	_, err = g.Observe(ctx, nil, "rl.example", 429, "30", nil)
	require.NoError(t, err)
	require.Greater(t, wait("rl.example", 0), int64(29000))
}

// TestPageVerdicts: a page's own rate-limited answer postpones it, a
// requisite's only backs its host off; a turn past MaxWait postpones.
func TestPageVerdicts(t *testing.T) {
	cfg := testConfig()
	cfg.MaxWait = 50 * time.Millisecond
	gates, _ := newGates(t, 1, cfg)
	g, ctx := gates[0], ctxT(t)

	pctx, p := WithPage(ctx, g)
	require.Same(t, p, PageFrom(pctx))
	f, err := p.Start(pctx, "http://cdn.example/style.css", true)
	require.NoError(t, err)
	require.True(t, f.Answer(pctx, &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"5"}}}, nil))
	f.End()
	require.Equal(t, Verdict{}, p.Verdict(), "a requisite's rate limit does not postpone the page by itself")
	_, err = p.Start(pctx, "http://cdn.example/font.woff", true)
	require.ErrorIs(t, err, ErrPostponed, "but waiting for its host past MaxWait does")
	v := p.Verdict()
	require.True(t, v.Postpone)
	require.Contains(t, v.Note, "backoff")

	_, p2 := WithPage(ctx, g)
	f, err = p2.Start(ctx, "http://site.example/page", false)
	require.NoError(t, err)
	require.False(t, f.Answer(ctx, &http.Response{StatusCode: 200, Header: http.Header{}}, nil))
	f.End()
	f, err = p2.Start(ctx, "http://site.example/page2", false)
	require.NoError(t, err)
	require.True(t, f.Answer(ctx, &http.Response{StatusCode: 503, Header: http.Header{}}, nil))
	f.End()
	v = p2.Verdict()
	require.True(t, v.Postpone)
	require.Contains(t, v.Note, "host site.example rate-limited (HTTP 503)")

	var nilPage *Page
	f, err = nilPage.Start(ctx, "http://x/", false)
	require.NoError(t, err)
	require.Nil(t, f)
	f.End()
	require.False(t, f.Answer(ctx, &http.Response{StatusCode: 429}, nil))
	require.False(t, errors.Is(err, ErrPostponed))
}

// TestCrawlDelayIsTheHostsLeastDelay: a robots.txt's Crawl-delay, capped
// at MaxCrawlDelay, spaces the host's fetch starts for every gate when it
// is larger than the configured delay; another host is not touched.
func TestCrawlDelayIsTheHostsLeastDelay(t *testing.T) {
	cfg := testConfig()
	cfg.Default = Limits{Concurrency: 10}
	cfg.MaxCrawlDelay = 300 * time.Millisecond
	gates, _ := newGates(t, 2, cfg)
	ctx := ctxT(t)
	require.NoError(t, gates[0].SetCrawlDelay(ctx, "Polite.example", time.Hour), "capped at 300ms")
	var starts []time.Time
	for i := range 3 {
		s, err := gates[i%2].Acquire(ctx, "polite.example")
		require.NoError(t, err)
		starts = append(starts, time.Now())
		s.Release()
	}
	for i := 1; i < len(starts); i++ {
		gap := starts[i].Sub(starts[i-1])
		require.GreaterOrEqual(t, gap, 280*time.Millisecond, "start %d", i)
		require.Less(t, gap, 3*time.Second, "start %d: the hour was capped", i)
	}
	st, err := gates[0].HostState(ctx, "other.example")
	require.NoError(t, err)
	require.True(t, st.NextStart.IsZero(), "another host is not touched")
}
