package hostbudget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/metrics"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Limits are one host's politeness limits.
type Limits struct {
	// Concurrency is the most fetches in flight on the host (1..1e6).
	Concurrency int
	// Delay is the least time between two fetch starts on the host.
	Delay time.Duration
}

// MaxConcurrency bounds Limits.Concurrency (a per-host limit this high
// turns politeness off in practice: the bench's "on, high limit").
const MaxConcurrency = 1_000_000

// Validate checks l, naming what.
func (l Limits) Validate(what string) error {
	switch {
	case l.Concurrency < 1 || l.Concurrency > MaxConcurrency:
		return fmt.Errorf("%s: concurrency %d: must be 1..%d", what, l.Concurrency, MaxConcurrency)
	case l.Delay < 0 || l.Delay > time.Hour:
		return fmt.Errorf("%s: delay %s: must be 0..1h", what, l.Delay)
	}
	return nil
}

// Marker is a configured rate-limit answer: its status and, when set, a
// regular expression its body must match.
type Marker struct {
	Status int
	Body   *regexp.Regexp
}

// RateLimit says which answers are rate limits and how a host backs off.
type RateLimit struct {
	// Statuses are rate limits whatever their body (default 429).
	Statuses []int
	// RetryAfterStatuses are rate limits when the answer carries a
	// Retry-After (default 503: a server saying when to come back; a
	// plain 503 is an error of the page, retried as any other).
	RetryAfterStatuses []int
	// Markers are further rate-limit answers.
	Markers []Marker
	// MaxRetryAfter caps an answer's Retry-After.
	MaxRetryAfter time.Duration
	// Backoff is the first wait without Retry-After; each further rate
	// limit in a row doubles it, up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// GiveUpAfter: a host rate-limited this long without an answer that
	// was not a rate limit fails its pages.
	GiveUpAfter time.Duration
}

// Config configures a Gate.
type Config struct {
	// Default limits of every host without an override.
	Default Limits
	// Hosts are configured overrides by host name (lower case); a live
	// override (SetOverride) wins over both.
	Hosts map[string]Limits
	// Lease is how long a fetch holds its slot without renewal (renewed
	// every Lease/3 while it runs): the slot of a killed worker's fetch
	// frees itself after it.
	Lease time.Duration
	// MaxWait is how long a fetch waits for its host's turn before its
	// page is postponed.
	MaxWait time.Duration
	// Poll is the wait between two tries while a host is at its
	// concurrency (default 50ms).
	Poll time.Duration
	// Reuse: a turn taken on a host without delay (no configured, live
	// or Crawl-delay delay, no rate-limit streak, no other worker
	// waiting for the host) is kept by this Gate when its fetch ends and
	// reused by its next fetch of the host without a Redis round trip,
	// for Reuse after Redis last granted it; then the next fetch asks
	// Redis again with the same turn (one round trip, which sees changed
	// limits, a backoff or a waiting worker). A kept turn still counts in
	// the host's concurrency, so the budget holds exactly; one left idle
	// for Reuse/2 is given back. 0: every fetch asks Redis and gives its
	// turn back when it ends.
	Reuse     time.Duration
	RateLimit RateLimit
	// MaxCrawlDelay caps a robots.txt's Crawl-delay (SetCrawlDelay); 0
	// ignores Crawl-delay.
	MaxCrawlDelay time.Duration
}

// Gate applies the host budget and the rate-limit backoff.
type Gate struct {
	rdb  redis.UniversalClient
	keys rkeys.Keys
	cfg  Config
	log  *zap.Logger

	mu sync.Mutex
	// held are the turns this Gate holds in Redis by host: kept idle
	// for reuse (idle) and how many in all, busy ones included (holds).
	idle  map[string][]*lease
	holds map[string]int
	// fresh is when Redis last granted a turn of the host that may be
	// reused (local clock, taken before asking): at that moment the host
	// had no delay, streak or waiting worker, and every turn held, this
	// Gate's kept ones included, fitted its concurrency, so reusing a
	// kept turn until fresh+Reuse adds none. Absent: the host's turns are
	// given back when their fetch ends.
	fresh map[string]time.Time
	// epoch counts the times a host's turns stopped being reusable
	// (forget): an answer asked for in an older epoch sets no fresh.
	epoch map[string]uint64
	// closed: Close was called; no turn is kept from then on.
	closed bool
}

// New returns a Gate on rdb.
func New(rdb redis.UniversalClient, keys rkeys.Keys, cfg Config, log *zap.Logger) (*Gate, error) {
	if rdb == nil {
		return nil, errors.New("host budget: redis client must not be nil")
	}
	if err := cfg.Default.Validate("crawl.per_host"); err != nil {
		return nil, err
	}
	for h, l := range cfg.Hosts {
		if err := l.Validate("crawl.per_host.hosts." + h); err != nil {
			return nil, err
		}
	}
	if cfg.Lease < time.Second {
		return nil, fmt.Errorf("crawl.per_host.lease %s: must be >= 1s", cfg.Lease)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if cfg.Reuse < 0 {
		return nil, fmt.Errorf("crawl.per_host.reuse %s: must be >= 0", cfg.Reuse)
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Gate{rdb: rdb, keys: keys, cfg: cfg, log: log.Named("hostbudget"),
		idle: map[string][]*lease{}, holds: map[string]int{}, fresh: map[string]time.Time{}, epoch: map[string]uint64{}}, nil
}

// limits are host's configured limits (a live override is applied by the
// script).
func (g *Gate) limits(host string) Limits {
	if l, ok := g.cfg.Hosts[host]; ok {
		return l
	}
	return g.cfg.Default
}

// Slot is one fetch's place in its host's budget: a turn (lease) the
// Gate holds in Redis, for this fetch until Release.
type Slot struct {
	g      *Gate
	l      *lease
	host   string
	streak bool // the host was in a rate-limit streak when the slot was taken
	once   sync.Once
}

// lease is one member of a host's in-flight set in Redis, renewed while
// this Gate holds it (busy with a fetch, or kept idle for reuse).
type lease struct {
	host, token string
	gen         uint64 // bumped each time it is kept idle or taken (Gate.mu)
	stop        chan struct{}
	done        chan struct{}
}

// turn is one acquire script's answer.
type turn struct {
	granted  bool
	now      int64 // Redis' clock, ms
	at       int64 // when the host may take the fetch (0: unknown, busy)
	reason   string
	since    int64 // start of the host's rate-limit streak (0: none)
	reusable bool  // granted with no delay, streak or waiting worker
}

// Wait is a fetch that did not get its host's turn within MaxWait.
type Wait struct {
	Host   string
	Reason string    // backoff, delay or busy
	Until  time.Time // when to try again (Redis' clock)
	Since  time.Time // start of the host's rate-limit streak (zero: none)
}

func (w *Wait) Error() string {
	return fmt.Sprintf("host %s: no turn within crawl.per_host.max_wait (%s): try again after %s", w.Host, w.Reason, w.Until.UTC().Format(time.RFC3339Nano))
}

// Acquire waits for host's turn and takes a slot, or returns a *Wait when
// the turn is further than MaxWait away (a backoff or delay known to end
// later, or the host busy for MaxWait). A turn this Gate keeps idle for
// the host is taken first (Config.Reuse).
func (g *Gate) Acquire(ctx context.Context, host string) (*Slot, error) {
	l := g.limits(host)
	var waited time.Duration
	for {
		s, t, err := g.take(ctx, host, l)
		if err != nil {
			return nil, err
		}
		if s != nil {
			if waited > 0 {
				metrics.HostBudgetWait(waited)
			}
			return s, nil
		}
		d := g.cfg.Poll
		if t.at > 0 {
			d = time.Duration(t.at-t.now) * time.Millisecond
		}
		if waited+d > g.cfg.MaxWait {
			until := t.at
			if until == 0 {
				until = t.now + max(l.Delay, time.Second).Milliseconds()
			}
			w := &Wait{Host: host, Reason: t.reason, Until: time.UnixMilli(until)}
			if t.since > 0 {
				w.Since = time.UnixMilli(t.since)
			}
			return nil, w
		}
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
		waited += d
	}
}

// take is one try for host's turn: a kept turn reused without Redis
// while Redis granted it less than Reuse ago, else asked again (its
// token: the same turn; one refused is given up and the next kept one
// asked), else a new turn. A nil Slot with the script's answer: no turn
// now.
func (g *Gate) take(ctx context.Context, host string, l Limits) (*Slot, turn, error) {
	for {
		g.mu.Lock()
		kept := g.pop(host)
		if f, ok := g.fresh[host]; kept != nil && ok && time.Since(f) < g.cfg.Reuse {
			g.mu.Unlock()
			return &Slot{g: g, l: kept, host: host}, turn{granted: true}, nil
		}
		holds, epoch := g.holds[host], g.epoch[host]
		g.mu.Unlock()
		token := newToken()
		if kept != nil {
			token = kept.token
		}
		checked := time.Now()
		t, err := g.try(ctx, host, token, l, holds)
		if err != nil {
			if kept != nil {
				g.drop([]*lease{kept}, true)
			}
			return nil, turn{}, err
		}
		if !t.granted {
			if kept != nil {
				g.drop([]*lease{kept}, false) // the script took it out
				continue
			}
			return nil, t, nil
		}
		ls := kept
		if ls == nil {
			ls = &lease{host: host, token: token, stop: make(chan struct{}), done: make(chan struct{})}
			go g.renew(ls)
		}
		g.mu.Lock()
		if kept == nil {
			g.holds[host]++
		}
		switch {
		case !t.reusable || g.cfg.Reuse <= 0:
			delete(g.fresh, host)
		case epoch == g.epoch[host] && checked.After(g.fresh[host]):
			g.fresh[host] = checked
		}
		g.mu.Unlock()
		return &Slot{g: g, l: ls, host: host, streak: t.since > 0}, t, nil
	}
}

// pop takes the last kept turn of host, or nil (g.mu held).
func (g *Gate) pop(host string) *lease {
	ls := g.idle[host]
	n := len(ls)
	if n == 0 {
		return nil
	}
	l := ls[n-1]
	if n == 1 {
		delete(g.idle, host)
	} else {
		g.idle[host] = ls[:n-1]
	}
	l.gen++ // its idle expiry no longer applies
	return l
}

func (g *Gate) try(ctx context.Context, host, token string, l Limits, holds int) (turn, error) {
	keys := []string{g.keys.HostBudget(host), g.keys.HostInflight(host), g.keys.HostOverrides()}
	v, err := acquireScript.Run(ctx, g.rdb, keys, nil, host, token, l.Concurrency, l.Delay.Milliseconds(), g.cfg.Lease.Milliseconds(),
		holds, g.cfg.Reuse.Milliseconds()).Slice()
	if err != nil {
		return turn{}, fmt.Errorf("host budget of %s: %w", host, err)
	}
	if len(v) != 6 {
		return turn{}, fmt.Errorf("host budget of %s: reply of %d parts", host, len(v))
	}
	n := func(i int) int64 { x, _ := v[i].(int64); return x }
	reason, _ := v[3].(string)
	return turn{granted: n(0) == 1, now: n(1), at: n(2), reason: reason, since: n(4), reusable: n(5) == 1}, nil
}

// Release ends the slot's fetch (repeatable): its turn is kept for the
// Gate's next fetch of the host when it may be reused, else given back.
func (s *Slot) Release() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		g, l := s.g, s.l
		g.mu.Lock()
		if _, ok := g.fresh[s.host]; ok && !g.closed {
			l.gen++
			gen := l.gen
			g.idle[s.host] = append(g.idle[s.host], l)
			g.mu.Unlock()
			time.AfterFunc(g.cfg.Reuse/2, func() { g.expire(l, gen) })
			return
		}
		g.mu.Unlock()
		g.drop([]*lease{l}, true)
	})
}

// expire gives back a kept turn still idle since it was kept (gen).
func (g *Gate) expire(l *lease, gen uint64) {
	g.mu.Lock()
	if l.gen != gen || !g.unkeep(l) {
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	g.drop([]*lease{l}, true)
}

// unkeep takes l out of the idle turns (g.mu held); false when it is not
// there.
func (g *Gate) unkeep(l *lease) bool {
	ls := g.idle[l.host]
	for i, x := range ls {
		if x == l {
			ls = append(ls[:i], ls[i+1:]...)
			if len(ls) == 0 {
				delete(g.idle, l.host)
			} else {
				g.idle[l.host] = ls
			}
			return true
		}
	}
	return false
}

// forget stops reusing host's turns (a rate limit, a Crawl-delay): the
// idle ones are given back (one round trip), busy ones when their fetch
// ends.
func (g *Gate) forget(host string) {
	g.mu.Lock()
	g.epoch[host]++
	delete(g.fresh, host) // busy turns: given back when their fetch ends
	ls := g.idle[host]
	delete(g.idle, host)
	for _, l := range ls {
		l.gen++
	}
	g.mu.Unlock()
	g.drop(ls, true)
}

// Close gives back every turn this Gate keeps idle for reuse, one round
// trip per host, so a worker that shuts down leaves no turn held for the
// next fetcher to wait out; turns still busy are given back when their
// fetch ends. Fetches after Close give their turns back at once.
func (g *Gate) Close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.closed = true
	hosts := slices.Collect(maps.Keys(g.idle))
	g.mu.Unlock()
	for _, h := range hosts {
		g.forget(h)
	}
}

// drop stops renewing ls (one host's) and, when release, takes them out
// of the host's in-flight set in one round trip.
func (g *Gate) drop(ls []*lease, release bool) {
	if len(ls) == 0 {
		return
	}
	host := ls[0].host
	tokens := make([]any, 0, len(ls))
	for _, l := range ls {
		close(l.stop)
		<-l.done
		tokens = append(tokens, l.token)
	}
	g.mu.Lock()
	if g.holds[host] -= len(ls); g.holds[host] <= 0 {
		delete(g.holds, host)
		delete(g.fresh, host) // a new turn is asked for anyway
	}
	g.mu.Unlock()
	if !release {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := g.rdb.ZRem(ctx, g.keys.HostInflight(host), tokens...).Err()
	switch {
	case errors.Is(err, redis.ErrClosed):
		// The worker is stopping (a kept turn's timer fired after its
		// Redis client closed): the lease expires on its own, nothing to say.
	case err != nil:
		// The lease expires on its own.
		g.log.Warn("release a host budget slot", zap.String("host", host), zap.Error(err))
	}
}

// renew keeps a held turn's lease while the Gate holds it.
func (g *Gate) renew(l *lease) {
	defer close(l.done)
	tick := time.NewTicker(g.cfg.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), g.cfg.Lease/3)
			err := renewScript.Run(ctx, g.rdb, []string{g.keys.HostInflight(l.host)}, nil, l.token, g.cfg.Lease.Milliseconds()).Err()
			cancel()
			if err != nil && !errors.Is(err, redis.Nil) {
				g.log.Warn("renew a host budget slot", zap.String("host", l.host), zap.Error(err))
			}
		}
	}
}

// Backoff is a host backed off by a rate-limit answer.
type Backoff struct {
	Host   string
	Status int
	// RetryAfter is the answer's Retry-After as applied (capped); zero
	// when it had none (the exponential backoff applied).
	RetryAfter time.Duration
	At         time.Time // when it was recorded (Redis' clock)
	Until      time.Time // end of the host's backoff (Redis' clock)
	Since      time.Time // start of the host's rate-limit streak
	// GiveUp: the streak is longer than RateLimit.GiveUpAfter.
	GiveUp bool
}

// Note says what happened, for a page's note and the job's log.
func (b *Backoff) Note(g *Gate) string {
	why := fmt.Sprintf("HTTP %d", b.Status)
	if b.RetryAfter > 0 {
		why += fmt.Sprintf(", Retry-After %s", b.RetryAfter)
	}
	if b.GiveUp {
		return fmt.Sprintf("host %s rate-limited since %s (%s), longer than crawl.rate_limit.give_up_after (%s): page failed",
			b.Host, b.Since.UTC().Format(time.RFC3339), why, g.cfg.RateLimit.GiveUpAfter)
	}
	return fmt.Sprintf("host %s rate-limited (%s): backed off until %s, the page waits without spending an attempt",
		b.Host, why, b.Until.UTC().Format(time.RFC3339Nano))
}

// RateLimited says whether an answer (its status, Retry-After header and
// body) is a rate limit by the rules.
func (g *Gate) RateLimited(status int, retryAfter string, body []byte) bool {
	for _, s := range g.cfg.RateLimit.Statuses {
		if s == status {
			return true
		}
	}
	if strings.TrimSpace(retryAfter) != "" {
		for _, s := range g.cfg.RateLimit.RetryAfterStatuses {
			if s == status {
				return true
			}
		}
	}
	for _, m := range g.cfg.RateLimit.Markers {
		if m.Status == status && (m.Body == nil || m.Body.Match(body)) {
			return true
		}
	}
	return false
}

// Observe takes an answer of host into account: a rate limit backs the
// host off (returned); any other answer ends a rate-limit streak the host
// was in when the fetch's slot was taken (s, may be nil).
func (g *Gate) Observe(ctx context.Context, s *Slot, host string, status int, retryAfter string, body []byte) (*Backoff, error) {
	if !g.RateLimited(status, retryAfter, body) {
		if s != nil && s.streak {
			if err := g.rdb.HDel(ctx, g.keys.HostBudget(host), "level", "since").Err(); err != nil {
				return nil, fmt.Errorf("host budget of %s: end its rate-limit streak: %w", host, err)
			}
		}
		return nil, nil
	}
	ra, ok := ParseRetryAfter(retryAfter, time.Now())
	raMS := int64(-1)
	if ok {
		ra = min(ra, g.cfg.RateLimit.MaxRetryAfter)
		raMS = ra.Milliseconds()
	}
	g.forget(host)
	v, err := backoffScript.Run(ctx, g.rdb, []string{g.keys.HostBudget(host)}, nil, raMS,
		g.cfg.RateLimit.Backoff.Milliseconds(), g.cfg.RateLimit.MaxBackoff.Milliseconds()).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("host budget of %s: back off: %w", host, err)
	}
	if len(v) != 3 {
		return nil, fmt.Errorf("host budget of %s: back off: reply of %d parts", host, len(v))
	}
	b := &Backoff{Host: host, Status: status, At: time.UnixMilli(v[0]), Until: time.UnixMilli(v[1]), Since: time.UnixMilli(v[2])}
	if ok {
		b.RetryAfter = ra
	}
	b.GiveUp = time.Duration(v[0]-v[2])*time.Millisecond >= g.cfg.RateLimit.GiveUpAfter
	reason := metrics.BackoffMarker
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		reason = strconv.Itoa(status)
	}
	metrics.RateLimitBackoff(reason, b.Until.Sub(b.At))
	g.log.Info("host rate-limited: backing off", zap.String("host", host), zap.Int("status", status),
		zap.Duration("retry_after", b.RetryAfter), zap.Time("until", b.Until), zap.Time("since", b.Since), zap.Bool("give_up", b.GiveUp))
	return b, nil
}

// GivenUp says whether a host's rate-limit streak that began at since
// (zero: none) is past RateLimit.GiveUpAfter at now.
func (g *Gate) GivenUp(since, now time.Time) bool {
	return !since.IsZero() && now.Sub(since) >= g.cfg.RateLimit.GiveUpAfter
}

// ParseRetryAfter reads a Retry-After value: delay-seconds or an HTTP
// date (relative to now; a date past is 0). ok is false when absent or
// malformed.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > math.MaxInt64/int64(time.Second) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := time.Parse(time.RFC1123, v) // http.TimeFormat is RFC 1123 in GMT
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// Override is a host's live limits.
type Override struct {
	Host string
	Limits
}

// SetOverride sets host's live limits for every worker and job (they
// win over the configuration's).
func (g *Gate) SetOverride(ctx context.Context, host string, l Limits) error {
	return SetOverride(ctx, g.rdb, g.keys, host, l)
}

// SetOverride is Gate.SetOverride without a Gate (the starter's).
func SetOverride(ctx context.Context, rdb redis.UniversalClient, keys rkeys.Keys, host string, l Limits) error {
	host = strings.ToLower(host)
	if host == "" || strings.ContainsAny(host, "/ \t\r\n") {
		return fmt.Errorf("host %q: must be a host name", host)
	}
	if err := l.Validate("host " + host); err != nil {
		return err
	}
	v := fmt.Sprintf("%d %d", l.Concurrency, l.Delay.Milliseconds())
	if err := rdb.HSet(ctx, keys.HostOverrides(), host, v).Err(); err != nil {
		return fmt.Errorf("set limits of host %s: %w", host, err)
	}
	return nil
}

// ClearOverride removes host's live limits.
func ClearOverride(ctx context.Context, rdb redis.UniversalClient, keys rkeys.Keys, host string) error {
	if err := rdb.HDel(ctx, keys.HostOverrides(), strings.ToLower(host)).Err(); err != nil {
		return fmt.Errorf("clear limits of host %s: %w", host, err)
	}
	return nil
}

// SetCrawlDelay makes a robots.txt's Crawl-delay (capped at
// Config.MaxCrawlDelay) the least delay between fetch starts on host, for
// every worker and job, as long as the host's state lives (a day after
// its last fetch); a larger configured or live delay still wins. A crawl
// that obeys robots.txt sets it when it reads the file.
func (g *Gate) SetCrawlDelay(ctx context.Context, host string, d time.Duration) error {
	if g == nil || g.cfg.MaxCrawlDelay <= 0 || d <= 0 {
		return nil
	}
	d = min(d, g.cfg.MaxCrawlDelay)
	k := g.keys.HostBudget(strings.ToLower(host))
	if err := g.rdb.HSet(ctx, k, "crawl_delay", d.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("crawl-delay of host %s: %w", host, err)
	}
	if err := g.rdb.PExpire(ctx, k, d+24*time.Hour).Err(); err != nil {
		return fmt.Errorf("crawl-delay of host %s: %w", host, err)
	}
	g.forget(strings.ToLower(host))
	return nil
}

// State is a host's budget state, for tests and status.
type State struct {
	Inflight     int
	NextStart    time.Time // zero: none recorded
	BackoffUntil time.Time
	Since        time.Time
	Level        int
}

// HostState reads host's state.
func (g *Gate) HostState(ctx context.Context, host string) (State, error) {
	var st State
	now := time.Now().UnixMilli()
	vals, err := g.rdb.HMGet(ctx, g.keys.HostBudget(host), "next", "until", "since", "level").Result()
	if err != nil {
		return st, err
	}
	n, err := g.rdb.ZCount(ctx, g.keys.HostInflight(host), strconv.FormatInt(now, 10), "+inf").Result()
	if err != nil {
		return st, err
	}
	st.Inflight = int(n)
	ms := func(v any) (time.Time, int64) {
		s, _ := v.(string)
		x, _ := strconv.ParseInt(s, 10, 64)
		if x == 0 {
			return time.Time{}, 0
		}
		return time.UnixMilli(x), x
	}
	st.NextStart, _ = ms(vals[0])
	st.BackoffUntil, _ = ms(vals[1])
	st.Since, _ = ms(vals[2])
	_, lv := ms(vals[3])
	st.Level = int(lv)
	return st, nil
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
