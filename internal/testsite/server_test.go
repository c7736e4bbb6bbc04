package testsite

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func start(t testing.TB, cfg Config, opts Options) *Server {
	t.Helper()
	srv, err := Start(generate(t, cfg), opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	return srv
}

// client does not follow redirects, so a 301 is seen as such.
var client = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{MaxIdleConnsPerHost: 16},
	Timeout:       30 * time.Second,
}

func get(t testing.TB, u, ua string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("User-Agent", ua)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

var (
	hrefRE = regexp.MustCompile(`<a href="([^"]+)"`)
	reqRE  = regexp.MustCompile(`<(?:link rel="stylesheet" href|img src)="([^"]+)"`)
)

// extract returns the absolute URLs the pattern finds in body.
func extract(t testing.TB, re *regexp.Regexp, base, body string) []string {
	t.Helper()
	b, err := url.Parse(base)
	require.NoError(t, err)
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		r, err := b.Parse(m[1])
		require.NoError(t, err)
		out = append(out, r.String())
	}
	return out
}

func urls(srv *Server, keys []key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = srv.url(k)
	}
	return out
}

func TestServerServesTheGraph(t *testing.T) {
	srv := start(t, Config{Seed: 2, Pages: 200}, Options{SlowDelay: -1})
	site := srv.Site()
	want := map[Kind]int{
		KindPage: 200, KindSlow: 200, KindFlaky: 500, KindError: 500, KindMissing: 404,
		KindRedirect: 301, KindOffsite: 200, KindAsset: 200, KindCalendar: 200,
	}
	keys := make([]key, 0, len(site.nodes)+3)
	for i := range site.nodes {
		keys = append(keys, key(i))
	}
	keys = append(keys, calendarKey(calendarEntryYM, 0), calendarKey(calendarEntryYM+100, 0), calendarKey(calendarEntryYM-3, 17))
	for _, k := range keys {
		u := srv.url(k)
		kind := site.kind(k)
		assert.Equal(t, kind, srv.Kind(u), u)
		resp, body := get(t, u, "graph-check")
		require.Equal(t, want[kind], resp.StatusCode, "%s (%s)", u, kind)
		switch {
		case kind == KindRedirect:
			assert.Equal(t, srv.url(key(site.nodes[k].target)), resp.Header.Get("Location"))
		case kind == KindAsset:
			assert.NotEmpty(t, body)
		case resp.StatusCode == http.StatusOK:
			assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
			assert.Equal(t, urls(srv, site.links(k)), extract(t, hrefRE, u, body), "links of %s", u)
			var reqs []key
			for _, r := range site.reqs(k) {
				reqs = append(reqs, key(r))
			}
			got := extract(t, reqRE, u, body)
			assert.ElementsMatch(t, urls(srv, reqs), got, "requisites of %s", u)
		default:
			assert.Empty(t, extract(t, hrefRE, u, body), "an error page has no links")
		}
	}
	log := srv.Requests()
	require.Len(t, log, len(keys))
	assert.Equal(t, len(keys), srv.RequestCount())
	for i, r := range log {
		assert.Equal(t, http.MethodGet, r.Method)
		assert.Equal(t, "graph-check", r.UserAgent)
		assert.False(t, r.Time.IsZero())
		assert.Equal(t, srv.url(keys[i]), r.URL, "log in order")
		assert.Equal(t, want[r.Kind], r.Status, r.URL)
	}
	f := Requested(log, nil)
	assert.Len(t, f.Pages, len(keys)-len(f.Requisites))
	assert.Equal(t, 200, f.Requisites[srv.URL(PathCSS)])
	assert.Equal(t, 500, f.Pages[srv.URL(PathFlaky1)])
	assert.Empty(t, f.Other)
}

func TestServerFlakyPagesFailOncePerRun(t *testing.T) {
	srv := start(t, Config{Seed: 2, Pages: MinPages}, Options{})
	u := srv.URL(PathFlaky1)
	status := func() int {
		resp, _ := get(t, u, "flaky")
		return resp.StatusCode
	}
	assert.Equal(t, 500, status())
	assert.Equal(t, 200, status())
	assert.Equal(t, 200, status())
	srv.Reset()
	assert.Equal(t, 500, status(), "Reset brings the failure back")
	assert.Equal(t, 200, status())
	resp, _ := get(t, srv.URL(PathFlaky2), "flaky")
	assert.Equal(t, 500, resp.StatusCode, "each 500-once page fails once")
	assert.Len(t, srv.RequestsSince(3), 3)
	assert.Empty(t, srv.RequestsSince(99))
}

func TestServerBrokenPagesFailUntilRepaired(t *testing.T) {
	srv := start(t, Config{Seed: 2, Pages: MinPages}, Options{})
	status := func(u string) int {
		resp, _ := get(t, u, "broken")
		return resp.StatusCode
	}
	srv.Break(PathDetour1)
	for range 3 {
		assert.Equal(t, 500, status(srv.URL(PathDetour1)))
	}
	assert.Equal(t, 200, status(srv.URL(PathDetour2)), "only the broken path")
	assert.Equal(t, 404, status(srv.OtherURL(PathDetour1)), "only on the main host")
	srv.Repair(PathDetour1)
	assert.Equal(t, 200, status(srv.URL(PathDetour1)))
	log := srv.Requests()
	require.Len(t, log, 6)
	assert.Equal(t, KindPage, log[0].Kind, "a broken page is still logged as the page it is")
}

func TestServerAnswersWhatIsNotInTheGraph(t *testing.T) {
	srv := start(t, Config{Seed: 2, Pages: MinPages}, Options{})
	for _, c := range []struct {
		method, url string
		status      int
	}{
		{http.MethodGet, srv.URL("/nowhere.html"), 404},
		{http.MethodGet, srv.URL("/p/1.html?x=1"), 404},
		{http.MethodGet, srv.URL("/calendar/2024/13/"), 404},
		{http.MethodGet, srv.OtherURL(PathCalendar), 404},
		{http.MethodGet, srv.OtherURL(PathStart), 404},
		{http.MethodPost, srv.URL(PathStart), 405},
		{http.MethodHead, srv.URL(PathStart), 200},
	} {
		req, err := http.NewRequest(c.method, c.url, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, c.status, resp.StatusCode, "%s %s", c.method, c.url)
	}
	log := srv.Requests()
	assert.Equal(t, KindUnknown, log[0].Kind)
	assert.Equal(t, srv.URL("/p/1.html?x=1"), log[1].URL)
	assert.Equal(t, http.MethodHead, log[6].Method)
	assert.Equal(t, KindPage, log[6].Kind)
	assert.Zero(t, log[6].Bytes, "HEAD sends no body")
	assert.Positive(t, log[0].Bytes)
	f := Requested(log, func(r Request) bool { return r.Method == http.MethodGet })
	assert.Len(t, f.Other, 5, "URLs outside the site")
	assert.Equal(t, KindUnknown, srv.Kind("http://example.com/"))
	assert.Equal(t, KindUnknown, srv.Kind("::"))
	assert.Equal(t, KindOffsite, srv.Kind(srv.OtherURL(PathOffsite1)))
}

func TestServerSlowPagesWaitAndCloseReleasesThem(t *testing.T) {
	srv := start(t, Config{Seed: 2, Pages: MinPages}, Options{SlowDelay: 50 * time.Millisecond})
	began := time.Now()
	resp, _ := get(t, srv.URL(PathSlow1), "slow")
	assert.Equal(t, 200, resp.StatusCode)
	assert.GreaterOrEqual(t, time.Since(began), 50*time.Millisecond)

	stuck, err := Start(srv.Site(), Options{SlowDelay: time.Hour})
	require.NoError(t, err)
	errs := make(chan error, 1)
	go func() {
		resp, err := client.Get(stuck.URL(PathSlow1))
		if err == nil {
			_ = resp.Body.Close()
		}
		errs <- err
	}()
	require.Eventually(t, func() bool { return stuck.InFlight() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, stuck.Close())
	select {
	case err := <-errs:
		assert.Error(t, err, "the slow answer was cut off")
	case <-time.After(10 * time.Second):
		t.Fatal("Close left a slow request hanging")
	}
}

func TestServerLogsConcurrentRequests(t *testing.T) {
	srv := start(t, Config{Seed: 2, Pages: 300}, Options{SlowDelay: -1})
	var pages []string
	for path, id := range srv.Site().paths[hostMain] {
		if srv.Site().nodes[id].kind == KindPage {
			pages = append(pages, srv.URL(path))
		}
	}
	for u, status := range fetchAll(t, pages, 8) {
		assert.Equal(t, 200, status, u)
	}
	assert.LessOrEqual(t, srv.MaxInFlight(), 8)
	assert.Positive(t, srv.MaxInFlight())
	assert.Zero(t, srv.InFlight())
	f := Requested(srv.Requests(), func(r Request) bool { return strings.HasPrefix(r.UserAgent, "Go-http-client") })
	assert.Len(t, f.Pages, len(pages))
}

// fetchAll GETs every URL with workers clients in parallel and returns
// the statuses.
func fetchAll(t testing.TB, urls []string, workers int) map[string]int {
	t.Helper()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = make(map[string]int, len(urls))
	)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(urls); i += workers {
				resp, err := client.Get(urls[i])
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				mu.Lock()
				statuses[urls[i]] = resp.StatusCode
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return statuses
}

// BenchmarkServe measures the server's requests per second on loopback
// with a keep-alive Go client, as many clients in parallel as GOMAXPROCS:
// "testsite" walks the 10,000-page site's pages, "constant" is the
// baseline, a handler writing one fixed page of the same size.
func BenchmarkServe(b *testing.B) {
	srv, err := Start(generate(b, AcceptanceConfig), Options{SlowDelay: -1})
	require.NoError(b, err)
	defer func() { _ = srv.Close() }()
	var pages []string
	for path, id := range srv.Site().paths[hostMain] {
		if srv.Site().nodes[id].kind == KindPage {
			pages = append(pages, srv.URL(path))
		}
	}
	slices.Sort(pages)
	resp, body := get(b, pages[0], "bench")
	require.Equal(b, 200, resp.StatusCode)

	constant := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", htmlType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = io.WriteString(w, body)
	})}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(b, err)
	go func() { _ = constant.Serve(ln) }()
	defer func() { _ = constant.Close() }()

	b.Run("testsite", func(b *testing.B) { benchGet(b, pages) })
	b.Run("constant", func(b *testing.B) { benchGet(b, []string{"http://" + ln.Addr().String() + "/"}) })
}

func benchGet(b *testing.B, urls []string) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer c.CloseIdleConnections()
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	began := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, urls[int(next.Add(1))%len(urls)], nil)
			resp, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "req/s")
}
