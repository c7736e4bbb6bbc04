//go:build dev

package e2e

import (
	"context"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/abbot"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/internal/testsite"
	"github.com/archiveflow/archiveflow/workflows"
)

// crawlUA is the User-Agent of the crawls of these tests: the site's
// request log is filtered by it.
const crawlUA = "archiveflow-e2e-crawl"

// EnvCrawlPages sets the size of the generated site of TestCrawlDepthLimit
// (default 400 pages; docs/crawls.md's figures use 10000).
const EnvCrawlPages = "ARCHIVEFLOW_E2E_CRAWL_PAGES"

// crawlConfig is the configuration of these tests' crawls: pagefetch for
// the start page too, fast retries.
func crawlConfig(c *config.Config) {
	c.Plugins.Values = map[string]any{"PAGEFETCH_ENABLED": true}
	c.Crawl.AttrInterval = 500 * time.Millisecond
	c.Job.Concurrency = 8
}

func sitePages(t testing.TB, def int) int {
	if v := os.Getenv(EnvCrawlPages); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, EnvCrawlPages)
		return n
	}
	return def
}

// crawlSite generates and serves a test site.
func crawlSite(t testing.TB, pages int) *testsite.Server {
	t.Helper()
	site, err := testsite.Generate(testsite.Config{Seed: testsite.AcceptanceConfig.Seed, Pages: pages})
	require.NoError(t, err)
	srv, err := testsite.Start(site, testsite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// crawlOutcome is what a finished crawl left.
type crawlOutcome struct {
	status  workflows.CrawlStatus
	fetched *testsite.Fetched
	job     rkeys.JobView
	pages   []frontier.Page
	// requests are the site's log of the crawl's requests; killedAt is
	// when its fault killed a process running page attempts (zero: none).
	requests []testsite.Request
	killedAt time.Time
}

// runSiteCrawl crawls srv depth links deep with the calendar contained by
// a skip rule and returns what it did. adjust, when set, changes the
// request (settings); fault, when set, runs while the crawl is under way.
func runSiteCrawl(t *testing.T, s *Stack, srv *testsite.Server, depth int, adjust func(*submit.Request), fault func(Job)) crawlOutcome {
	t.Helper()
	skip, err := srv.CalendarSkipPattern(6)
	require.NoError(t, err)
	srv.Reset()
	mark := srv.RequestCount()
	job := s.SubmitCrawl(t, srv.StartURL(), depth, func(r *submit.Request) {
		r.Settings.UserAgent = crawlUA
		r.Rules = scope.Rules{{Pattern: skip, Skip: scope.Bool(true)}}
		if adjust != nil {
			adjust(r)
		}
	})
	if fault != nil {
		fault(job)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	out := crawlOutcome{status: st}
	out.requests = crawlRequests(srv.RequestsSince(mark))
	out.fetched = testsite.Requested(out.requests, nil)
	out.job, err = s.Store.GetJob(ctx, job.Ident)
	require.NoError(t, err)
	out.pages = crawlPages(t, s, job.Ident)
	return out
}

// crawlRequests are the requests in log that the drills' crawls made (the
// crawl's user agent).
func crawlRequests(log []testsite.Request) []testsite.Request {
	return slices.DeleteFunc(log, func(r testsite.Request) bool { return r.UserAgent != crawlUA })
}

// crawlPages lists every page of a crawl's frontier.
func crawlPages(t *testing.T, s *Stack, ident string) []frontier.Page {
	t.Helper()
	f, err := frontier.New(s.Redis, s.Store.Keys(), frontier.Options{})
	require.NoError(t, err)
	return frontierPages(t, f, ident)
}

// frontierPages lists every page of a crawl in f.
func frontierPages(t *testing.T, f *frontier.Frontier, ident string) []frontier.Page {
	t.Helper()
	var pages []frontier.Page
	for cursor := int64(0); ; {
		ps, next, err := f.Pages(context.Background(), ident, frontier.Filter{}, cursor, frontier.MaxPagesLimit)
		require.NoError(t, err)
		pages = append(pages, ps...)
		if next == 0 {
			return pages
		}
		cursor = next
	}
}

// TestCrawlDepthLimit is issue 12's acceptance on a generated site: the
// crawl with a depth limit fetches exactly the pages within it (the site's
// own BFS), the calendar is contained by a skip rule, every page has one
// final result, the counters mean what ArchiveBot's do, and wget
// --level=N on the same site misses pages the crawl gets.
func TestCrawlDepthLimit(t *testing.T) {
	const depth = 3
	srv := crawlSite(t, sitePages(t, 400))
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, crawlConfig)
	s.StartPools(t, env)
	got := runSiteCrawl(t, s, srv, depth, nil, nil)

	skip, err := srv.CalendarSkipPattern(6)
	require.NoError(t, err)
	want, err := srv.Expected(testsite.Scope{MaxDepth: depth, OffsiteOnce: true, Skip: []string{skip}})
	require.NoError(t, err)

	assert.Equal(t, model.StateFinished, got.status.State, got.status.Error)
	diff := testsite.Compare(want.Pages, got.fetched.Pages)
	assert.Empty(t, diff.Missing, "pages within the limit the crawl did not fetch")
	assert.Empty(t, diff.Extra, "pages the crawl fetched beyond the limit or out of scope")
	rdiff := testsite.Compare(want.Requisites, got.fetched.Requisites)
	assert.Empty(t, rdiff.Missing, "requisites not fetched")
	assert.Empty(t, rdiff.Extra, "requisites fetched that no page within the limit needs")
	for u := range got.fetched.Pages {
		assert.NotContains(t, u, "/calendar/2023/", "the skip rule contains the calendar")
	}

	// Every page has one final result; depths are the site's shortest link
	// distances. A redirect target is requested inside the redirecting
	// page's fetch (at its depth), but as a page of its own it has the
	// depth of its shortest link: between the two expectations.
	asLinks, err := srv.Expected(testsite.Scope{MaxDepth: depth + 1, OffsiteOnce: true, Skip: []string{skip}, RedirectAsLink: true})
	require.NoError(t, err)
	done := 0
	for _, p := range got.pages {
		switch p.State {
		case frontier.StateDone:
			done++
			d, ok := want.Depth(p.URL)
			if !assert.True(t, ok, "fetched page %s not expected", p.URL) {
				continue
			}
			if p.Depth != d {
				dl, _ := asLinks.Depth(p.URL)
				assert.True(t, p.Depth > d && p.Depth <= dl, "depth of %s: %d, want %d (%d with redirects as links)", p.URL, p.Depth, d, dl)
			}
		case frontier.StateReady, frontier.StateClaimed:
			t.Errorf("page %s is still %s", p.URL, p.State)
		}
	}
	flaky := srv.URL(testsite.PathFlaky1)
	fp, ok := pageByURL(got.pages, flaky)
	require.True(t, ok)
	assert.Equal(t, frontier.StatusSucceeded, fp.Status, "the 500-once page succeeds on its second attempt")
	assert.Equal(t, 2, fp.Attempts)

	// Counters with ArchiveBot's meaning (docs/redis-layout.md, "Counters").
	j := got.job
	assert.Equal(t, j.ItemsDownloaded, j.ItemsQueued, "items_queued - items_downloaded (!status: queued) is 0 at the end")
	assert.Equal(t, j.Responses.R2xx+j.Responses.R3xx, j.ItemsDownloaded, "items_downloaded = 2xx and 3xx responses")
	assert.Positive(t, j.Responses.R5xx, "the 500 answers are counted")
	assert.Positive(t, j.Responses.R4xx, "the 404 answers are counted")
	assert.Positive(t, j.BytesDownloaded)
	// Read as ArchiveBot's !status reads it (Job#to_status): nothing
	// queued, the errors are the 4xx and 5xx (and fetches without an
	// answer), the megabytes are the bytes fetched.
	fg, err := abbot.Bot{Redis: s.Redis}.JobFigures(t.Context(), j.Ident)
	require.NoError(t, err)
	assert.Equal(t, abbot.Figures{MB: math.Round(float64(j.BytesDownloaded)/1e4) / 100, Errors: j.Responses.R4xx + j.Responses.R5xx + j.Responses.Runk},
		fg, "!status figures")
	assert.Equal(t, int64(done), got.status.Counts.Done)

	// The job's WARC holds every page.
	warcs, err := filepath.Glob(filepath.Join(s.Config.ArchiveDir, "crawls", got.status.Ident, "warc", "*.warc.gz"))
	require.NoError(t, err)
	assert.NotEmpty(t, warcs)

	// wget --level=N on the same site, in the same run, misses pages the
	// crawl gets (the depth bug and its relatives, docs/crawls.md).
	wget, err := srv.RunWget(context.Background(), depth, testsite.WgetOptions{})
	require.NoError(t, err)
	wdiff := testsite.Compare(got.fetched.Pages, wget.Pages)
	assert.NotEmpty(t, wdiff.Missing, "wget misses pages the crawl gets")
	assert.Contains(t, wdiff.Missing, srv.URL(testsite.PathLate1a), "the depth bug: found one level too deep")
	// Both page sets: the crawl's is the expected set (asserted above);
	// wget's is the crawl's without what it misses, with what it adds.
	t.Logf("depth %d on a %d-page site: expected %d pages, crawl fetched %d (%d requisites), wget fetched %d; wget misses %d: %s; wget adds %d: %s",
		depth, sitePages(t, 400), len(want.Pages), len(got.fetched.Pages), len(got.fetched.Requisites), len(wget.Pages),
		len(wdiff.Missing), strings.Join(shortURLs(srv, wdiff.Missing), " "),
		len(wdiff.Extra), strings.Join(shortURLs(srv, wdiff.Extra), " "))
	t.Logf("crawl pages: %s", strings.Join(shortURLs(srv, slices.Collect(maps.Keys(got.fetched.Pages))), " "))
	t.Logf("wget pages: %s", strings.Join(shortURLs(srv, slices.Collect(maps.Keys(wget.Pages))), " "))
}

func pageByURL(pages []frontier.Page, u string) (frontier.Page, bool) {
	for _, p := range pages {
		if p.URL == u {
			return p, true
		}
	}
	return frontier.Page{}, false
}

func shortURLs(srv *testsite.Server, us []string) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = strings.TrimPrefix(u, srv.MainBase())
	}
	sort.Strings(out)
	return out
}
