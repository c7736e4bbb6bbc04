//go:build dev

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/workflows"
)

// origin is a loopback web server on its own address (127.0.0.N) that
// logs every request with the time it arrived and the time its answer
// was written: the evidence of what the host saw.
type origin struct {
	host string // 127.0.0.N
	base string // http://127.0.0.N:PORT
	srv  *http.Server
	// hold is how long each answer takes (overlapping fetches show).
	hold time.Duration
	// answer, when set, may answer a request itself (true).
	answer func(w http.ResponseWriter, r *http.Request) bool

	mu  sync.Mutex
	log []served
}

// served is one request as the origin saw it.
type served struct {
	path       string
	start, end time.Time
	status     int
}

func startOrigin(t *testing.T, ip string, hold time.Duration, pages func(w http.ResponseWriter, r *http.Request)) *origin {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	require.NoError(t, err, "listen on %s (Linux routes 127.0.0.0/8 to loopback)", ip)
	o := &origin{host: ip, base: "http://" + ln.Addr().String(), hold: hold}
	o.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() != crawlUA {
			http.NotFound(w, r)
			return
		}
		start := time.Now()
		rec := &statusWriter{ResponseWriter: w, status: 200}
		time.Sleep(o.hold)
		if o.answer == nil || !o.answer(rec, r) {
			pages(rec, r)
		}
		o.mu.Lock()
		o.log = append(o.log, served{path: r.URL.RequestURI(), start: start, end: time.Now(), status: rec.status})
		o.mu.Unlock()
	})}
	go func() { _ = o.srv.Serve(ln) }()
	t.Cleanup(func() { _ = o.srv.Close() })
	return o
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (o *origin) requests() []served {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := slices.Clone(o.log)
	slices.SortFunc(out, func(a, b served) int { return a.start.Compare(b.start) })
	return out
}

// mostAtOnce is the most requests the origin was answering at one time.
func mostAtOnce(rs []served) int {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, r := range rs {
		evs = append(evs, ev{r.start, 1}, ev{r.end, -1})
	}
	// An answer ending at the instant another starts does not overlap it.
	slices.SortFunc(evs, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	n, most := 0, 0
	for _, e := range evs {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// closestStarts is the shortest time between two request arrivals.
func closestStarts(rs []served) time.Duration {
	closest := time.Duration(1 << 62)
	for i := 1; i < len(rs); i++ {
		closest = min(closest, rs[i].start.Sub(rs[i-1].start))
	}
	return closest
}

// tinyPNG is a 1×1 PNG.
var tinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

func servePNG(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(tinyPNG)
}

// politenessEnv configures the worker processes' host budget.
func politenessEnv(hosts string) []string {
	return []string{
		"PAGEFETCH_ENABLED=true",
		"ARCHIVEFLOW_CRAWL_PER_HOST_ENABLED=true",
		"ARCHIVEFLOW_CRAWL_PER_HOST_CONCURRENCY=2",
		"ARCHIVEFLOW_CRAWL_PER_HOST_MAX_WAIT=30s",
		"ARCHIVEFLOW_CRAWL_PER_HOST_HOSTS=" + hosts,
	}
}

// TestPolitenessAcrossWorkersAndJobs is issue 28's politeness acceptance:
// two worker processes run two crawls of the same site (host A,
// 127.0.0.1) whose pages need images on host B (127.0.0.2, concurrency 1
// and 300 ms between fetches by configuration) and host C (127.0.0.3,
// the default concurrency of 2). By the origins' own request logs no
// host ever answered more fetches at once than its concurrency, and B's
// requests are never closer than its delay, though each crawl runs 8
// pages at a time.
//
// The start pages are left out: a start page runs as a snapshot with
// every plugin, its hooks as processes outside the budget (docs/crawls.md).
func TestPolitenessAcrossWorkersAndJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workers binary")
	}
	const pages = 24
	b := startOrigin(t, "127.0.0.2", 20*time.Millisecond, servePNG)
	c := startOrigin(t, "127.0.0.3", 20*time.Millisecond, servePNG)
	var a *origin
	a = startOrigin(t, "127.0.0.1", 30*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		var n int
		switch {
		case strings.HasPrefix(r.URL.Path, "/start"):
			n = 0
		case r.URL.Path == "/favicon.ico":
			http.NotFound(w, r)
			return
		default:
			if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &n); err != nil || n < 1 || n > pages {
				http.NotFound(w, r)
				return
			}
		}
		var body strings.Builder
		body.WriteString("<!doctype html><title>page</title>")
		for _, k := range []int{2*n + 1, 2*n + 2} {
			if k <= pages {
				fmt.Fprintf(&body, `<a href="%s/p/%d">p%d</a>`, a.base, k, k)
			}
		}
		if n > 0 {
			// Each crawl fetches every image once: many fetches on B and C.
			fmt.Fprintf(&body, `<img src="%s/img/%s/%d.png"><img src="%s/img/%s/%d.png">`,
				b.base, r.URL.Query().Get("j"), n, c.base, r.URL.Query().Get("j"), n)
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(body.String()))
	})
	hosts := `[{"host":"127.0.0.2","concurrency":1,"delay":"300ms"}]`

	bin := BuildWorkers(t)
	root := builtinPlugins(t, "pagefetch", "title", "outlinks")
	s := NewStack(t, server, root, crawlConfig)
	StartWorker(t, bin, s.Config, "w1", politenessEnv(hosts)...)
	StartWorker(t, bin, s.Config, "w2", politenessEnv(hosts)...)

	ua := func(r *submit.Request) { r.Settings.UserAgent = crawlUA }
	jobs := []Job{s.SubmitCrawl(t, a.base+"/start1", -1, ua), s.SubmitCrawl(t, a.base+"/start2", -1, ua)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, j := range jobs {
		var st workflows.CrawlStatus
		require.NoError(t, j.Run.Get(ctx, &st))
		require.Equal(t, "finished", string(st.State), "crawl %s", j.Ident)
		for _, p := range crawlPages(t, s, j.Ident) {
			require.Equal(t, frontier.StatusSucceeded, p.Status, "page %s: %s", p.URL, p.Note)
		}
	}

	var pagesA []served
	for _, r := range a.requests() {
		if !strings.HasPrefix(r.path, "/start") {
			pagesA = append(pagesA, r)
		}
	}
	// Both crawls fetched every page of A and every image on B and C:
	// the two jobs' image URLs are the same, each job fetches them.
	require.Len(t, pagesA, 2*pages, "each crawl fetched each page once")
	require.Len(t, b.requests(), 2*pages, "host B: one image per page and crawl")
	require.Len(t, c.requests(), 2*pages, "host C: one image per page and crawl")

	assert.LessOrEqual(t, mostAtOnce(pagesA), 2, "host A: at most crawl.per_host.concurrency (2) at once")
	assert.Equal(t, 1, mostAtOnce(b.requests()), "host B: its override's concurrency of 1")
	assert.LessOrEqual(t, mostAtOnce(c.requests()), 2, "host C: at most 2 at once")
	// B's fetch starts are 300 ms apart by Redis' clock; an arrival lags
	// its grant by the dial and scheduling, which on this loaded shared
	// machine under -race has reached ~150 ms. Without the delay B's
	// requests come 20–50 ms apart.
	assert.GreaterOrEqual(t, closestStarts(b.requests()), 150*time.Millisecond, "host B: its override's delay between requests")
	t.Logf("host A at most %d at once; B at most %d, closest starts %s; C at most %d",
		mostAtOnce(pagesA), mostAtOnce(b.requests()), closestStarts(b.requests()).Round(time.Millisecond), mostAtOnce(c.requests()))
}

// TestRateLimitBackoff: a host answering 429 with Retry-After: 3 to every
// request for 5 s gets no request inside a window it announced, no page
// spends an attempt on it (crawl.page_attempts is 1: a spent attempt
// would fail the page), and the crawl completes after the window.
func TestRateLimitBackoff(t *testing.T) {
	waitingDrill(t)
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	rateLimitedCrawl(t, 1, func(c *config.Config) {
		c.Crawl.PerHost = config.PerHost{Enabled: true, Concurrency: 2, Lease: time.Minute, MaxWait: time.Second, Reuse: time.Second,
			Hosts: []config.HostLimits{{Host: rateLimitedHost, Concurrency: 1}}}
	}, root, func(s *Stack) func() {
		s.StartPools(t, env)
		return nil
	})
}

// TestRateLimitBackoffSurvivesWorkerKill is the same with two worker
// processes, one SIGKILLed during the first backoff: the backoff and the
// postponed pages are in Redis, the other worker finishes the crawl
// without a request inside the window, every page succeeded. Here
// crawl.page_attempts is 2, because it is also the tries of a page's
// activity, and the killed worker's pages need their second try on the
// other worker; that no attempt is spent on a rate limit is
// TestRateLimitBackoff's.
func TestRateLimitBackoffSurvivesWorkerKill(t *testing.T) {
	waitingDrill(t)
	if testing.Short() {
		t.Skip("builds the workers binary")
	}
	bin := BuildWorkers(t)
	root := builtinPlugins(t, "pagefetch", "title", "outlinks")
	rateLimitedCrawl(t, 2, nil, root, func(s *Stack) func() {
		env := []string{"PAGEFETCH_ENABLED=true", "ARCHIVEFLOW_CRAWL_PER_HOST_MAX_WAIT=1s",
			`ARCHIVEFLOW_CRAWL_PER_HOST_HOSTS=[{"host":"` + rateLimitedHost + `","concurrency":1}]`}
		w1 := StartWorker(t, bin, s.Config, "w1", env...)
		StartWorker(t, bin, s.Config, "w2", env...)
		return func() {
			require.NoError(t, w1.Process.Kill())
			t.Logf("killed worker w1 (pid %d) during the backoff", w1.Process.Pid)
		}
	})
}

const rateLimitedHost = "127.0.0.4"

// rateLimitedCrawl crawls a site on rateLimitedHost that answers 429
// (Retry-After: 3) from its 4th request on for 5 s, with crawl.page_attempts
// attempts, on workers start starts; start's returned func, when not nil, runs at
// the first 429 answered. It requires the crawl to finish with every page
// succeeded and no request inside a Retry-After window.
func rateLimitedCrawl(t *testing.T, attempts int, configure func(*config.Config), root string, start func(*Stack) func()) {
	const pages = 12
	var mu sync.Mutex
	var limitedUntil time.Time
	served := 0
	firstLimit := make(chan struct{})
	var a *origin
	a = startOrigin(t, rateLimitedHost, 5*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		var n int
		if r.URL.Path != "/start" {
			if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &n); err != nil || n < 1 || n > pages {
				http.NotFound(w, r)
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>p</title>")
		for _, k := range []int{2*n + 1, 2*n + 2} {
			if k <= pages {
				fmt.Fprintf(w, `<a href="%s/p/%d">p%d</a>`, a.base, k, k)
			}
		}
	})
	a.answer = func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		served++
		if served == 4 { // the host starts rate-limiting with the 4th request, for 5 s
			limitedUntil = time.Now().Add(5 * time.Second)
			close(firstLimit)
		}
		if time.Now().Before(limitedUntil) {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, "slow down")
			return true
		}
		return false
	}
	s := NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Crawl.PageAttempts = attempts
		if configure != nil {
			configure(c)
		}
	})
	fault := start(s)
	j := s.SubmitCrawl(t, a.base+"/start", -1, func(r *submit.Request) {
		r.Settings.UserAgent = crawlUA
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if fault != nil {
		select {
		case <-firstLimit:
			fault()
		case <-ctx.Done():
			t.Fatal("the host never rate-limited")
		}
	}
	var st workflows.CrawlStatus
	require.NoError(t, j.Run.Get(ctx, &st))
	require.Equal(t, "finished", string(st.State))

	got := crawlPages(t, s, j.Ident)
	require.Len(t, got, pages+1)
	for _, p := range got {
		require.Equal(t, frontier.StatusSucceeded, p.Status, "page %s lost no attempt to the rate limit: %s", p.URL, p.Note)
	}
	rs := a.requests()
	limited := 0
	for i, r := range rs {
		if r.status != http.StatusTooManyRequests {
			continue
		}
		limited++
		// The host said "not for 3 s" when it answered: nothing arrives
		// within that window (the fetch after the answer is held by the
		// backoff; concurrency 1 leaves none in flight meanwhile).
		if i+1 < len(rs) {
			next := rs[i+1]
			assert.GreaterOrEqual(t, next.start.Sub(r.end), 3*time.Second-50*time.Millisecond,
				"request %s at %s inside the Retry-After window of %s answered at %s", next.path, next.start, r.path, r.end)
		}
	}
	require.Positive(t, limited, "the host rate-limited some requests")
	t.Logf("%d requests, %d answered 429, crawl done %s after the first", len(rs), limited, rs[len(rs)-1].start.Sub(rs[0].start).Round(time.Millisecond))
}

// TestSlowHostDoesNotHoldOthersUp: a crawl whose start page links to ten
// pages on a slow host S (concurrency 1, 1 s between fetches) and ten on
// a fast host F (offsite pages: fetched once, crawl.scope.offsite_once)
// with a job concurrency of 4: F's pages are not held behind S's turns
// (the claim passes over S's pages while S is busy), so F is done before
// S has had half of its fetches, though S's pages come first in line.
func TestSlowHostDoesNotHoldOthersUp(t *testing.T) {
	const each = 10
	page := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>p</title>")
	}
	slow := startOrigin(t, "127.0.0.5", 5*time.Millisecond, page)
	fast := startOrigin(t, "127.0.0.6", 5*time.Millisecond, page)
	start := startOrigin(t, "127.0.0.7", 5*time.Millisecond, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>start</title>")
		for i := range each {
			fmt.Fprintf(w, `<a href="%s/s/%d">s</a>`, slow.base, i)
		}
		for i := range each {
			fmt.Fprintf(w, `<a href="%s/f/%d">f</a>`, fast.base, i)
		}
	})
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Job.Concurrency = 4
		c.Crawl.PerHost = config.PerHost{Enabled: true, Concurrency: 2, Lease: time.Minute, MaxWait: 10 * time.Second, Reuse: time.Second,
			Hosts: []config.HostLimits{{Host: "127.0.0.5", Concurrency: 1, Delay: time.Second}}}
	})
	s.StartPools(t, env)
	j := s.SubmitCrawl(t, start.base+"/", 1, func(r *submit.Request) { r.Settings.UserAgent = crawlUA })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var st workflows.CrawlStatus
	require.NoError(t, j.Run.Get(ctx, &st))
	require.Equal(t, "finished", string(st.State))
	sr, fr := slow.requests(), fast.requests()
	require.Len(t, sr, each)
	require.Len(t, fr, each)
	// 1 s apart by Redis' clock; an arrival lags its grant by the dial
	// and scheduling (see TestPolitenessAcrossWorkersAndJobs).
	assert.GreaterOrEqual(t, closestStarts(sr), 700*time.Millisecond, "S: its delay")
	assert.True(t, fr[len(fr)-1].start.Before(sr[each/2].start),
		"F's last page (%s) came before S's 6th (%s): S's turns held nothing up", fr[len(fr)-1].start, sr[each/2].start)
	t.Logf("F done %s after S's first fetch; S took %s", fr[len(fr)-1].start.Sub(sr[0].start).Round(time.Millisecond),
		sr[len(sr)-1].start.Sub(sr[0].start).Round(time.Millisecond))
}
