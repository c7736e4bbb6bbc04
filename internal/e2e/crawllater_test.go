//go:build dev

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/engine"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/pageindex"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestCrawlPagesAreRetriedLater: with crawl.page_attempts 2 and
// hooks.retry_later [1s, 2s], a page that answers 503 three times waits
// for one later retry and then succeeds; a page that always answers 503
// waits for both and is failed after the last. While they wait the pages
// are READY with status waiting and a due time, and the job is in the
// retry_at set; at the end every page has one final result, the counters
// count each response once (failed 1, nothing queued), retry_at is empty,
// and the flaky page's earlier attempts' results are kept.
func TestCrawlPagesAreRetriedLater(t *testing.T) {
	site := newLaterSite(t, map[string]string{"/": `<a href="/flaky">f</a> <a href="/dead">d</a> <a href="/ok">o</a>`, "/flaky": "fine", "/dead": "", "/ok": "fine"},
		func(path string, n int) bool { return path == "/flaky" && n <= 3 || path == "/dead" })
	s, job, ctx, f := startLaterCrawl(t, site, func(c *config.Config) {
		c.Crawl.PageAttempts = 2
		c.Hooks.RetryLater = []time.Duration{time.Second, 2 * time.Second}
	})

	// The wait: a waiting page with its due time, the job in retry_at.
	require.Eventually(t, func() bool {
		p, err := f.Page(ctx, job.Ident, site.URL+"/dead")
		if err != nil || p.Status != frontier.StatusWaiting {
			return false
		}
		assert.Equal(t, frontier.StateReady, p.State)
		assert.False(t, p.RetryAt.IsZero())
		c, err := f.Counts(ctx, job.Ident)
		return err == nil && c.Waiting > 0 && !c.Finished() && s.Redis.ZScore(ctx, "retry_at", job.Ident).Err() == nil
	}, time.Minute, 10*time.Millisecond, "no page waited for a later retry")

	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	pages := crawlPages(t, s, job.Ident)
	require.Len(t, pages, 4)
	for _, p := range pages {
		require.Equal(t, frontier.StateDone, p.State, p.URL)
	}
	flaky, _ := pageByURL(pages, site.URL+"/flaky")
	dead, _ := pageByURL(pages, site.URL+"/dead")
	assert.Equal(t, frontier.StatusSucceeded, flaky.Status)
	assert.Equal(t, 1, flaky.LaterRetries)
	assert.Equal(t, 4, flaky.Attempts, "two attempts, the wait, 503 again, then 200")
	assert.Equal(t, frontier.StatusFailed, dead.Status)
	assert.Equal(t, 2, dead.LaterRetries)
	assert.Equal(t, 6, dead.Attempts, "two attempts per round, three rounds")
	assert.Equal(t, map[string]int{"/": 1, "/ok": 1, "/flaky": 4, "/dead": 6}, site.hitsWithout("/robots.txt"))
	assert.EqualValues(t, 1, st.Counts.Failed)
	assert.EqualValues(t, 3, st.Counts.Succeeded)
	assert.Zero(t, st.Counts.Waiting)

	v, err := s.Store.GetJob(ctx, job.Ident)
	require.NoError(t, err)
	assert.EqualValues(t, 9, v.Responses.R5xx, "every 503 counted once")
	assert.EqualValues(t, v.ItemsDownloaded, v.ItemsQueued, "nothing queued at the end")
	assert.Zero(t, s.Redis.ZCard(ctx, "retry_at").Val())
	assert.Zero(t, s.Redis.HExists(ctx, job.Ident, rkeys.FieldRetryAt).Val())

	attempts, err := pageindex.Page(archivedir.PageIndex(s.Config.ArchiveDir, job.Ident), flaky.ID)
	require.NoError(t, err)
	var kept []string
	for _, a := range attempts {
		kept = append(kept, fmt.Sprintf("%d %s", a.Number(), a.Snapshot.State))
	}
	assert.Equal(t, []string{"1 failed", "2 failed", "3 failed", "4 finished"}, kept, "every attempt of the flaky page is kept")
}

// laterSite serves the later-retry tests' pages to crawlUA only, counting
// the requests per path: busy(path, n), n the path's requests so far,
// says when a page answers 503; otherwise each path of pages is an HTML
// page with that body.
type laterSite struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newLaterSite(t *testing.T, pages map[string]string, busy func(path string, n int) bool) *laterSite {
	s := &laterSite{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, known := pages[r.URL.Path]
		if r.Header.Get("User-Agent") != crawlUA {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.hits[r.URL.Path]++
		n := s.hits[r.URL.Path]
		s.mu.Unlock()
		switch {
		case !known:
			http.NotFound(w, r)
		case busy(r.URL.Path, n):
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body>%s</body></html>`, r.URL.Path, body)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// hitsWithout are the requests per path, less path.
func (s *laterSite) hitsWithout(path string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.hits {
		if k != path {
			out[k] = v
		}
	}
	return out
}

// startLaterCrawl crawls site one link deep on a stack with the built-in
// pagefetch, title and outlinks, response counters and adjust's config;
// it returns the stack, the job, a context for the rest of the test and
// the crawl's frontier.
func startLaterCrawl(t *testing.T, site *laterSite, adjust func(*config.Config)) (*Stack, Job, context.Context, *frontier.Frontier) {
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Redis.ResponseCounters = true
		adjust(c)
	})
	s.StartPools(t, env)
	job := s.SubmitCrawl(t, site.URL+"/", 1, func(r *submit.Request) { r.Settings.UserAgent = crawlUA })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	f, err := frontier.New(s.Redis, s.Store.Keys(), frontier.Options{})
	require.NoError(t, err)
	return s, job, ctx, f
}

// TestCrawlStartPageIsRetriedLater: with two in-run hook attempts
// (retry.maximum_attempts 2) and hooks.retry_later [4s], a start page that
// answers 503 three times waits after its snapshot's two attempts (READY,
// status waiting; the job in retry_at, its hash's retry_at set: starter
// status shows it waiting, and so do the workflow's status query, its
// ArchiveflowState search attribute and its Web UI details line), runs again as the start page when due (503,
// then 200) and the crawl goes on with its links. Every request is counted
// once, nothing is left queued, retry_at is empty at the end, and the
// first attempt's records are kept under attempts/1.
func TestCrawlStartPageIsRetriedLater(t *testing.T) {
	waitingDrill(t)
	site := newLaterSite(t, map[string]string{"/": `<a href="/a">a</a> <a href="/b">b</a>`, "/a": "fine", "/b": "fine"},
		func(path string, n int) bool { return path == "/" && n <= 3 })
	s, job, ctx, f := startLaterCrawl(t, site, func(c *config.Config) {
		c.Retry.MaximumAttempts = 2
		c.Retry.InitialInterval = 200 * time.Millisecond
		c.Hooks.RetryLater = []time.Duration{4 * time.Second}
	})

	// The wait: the start page waiting, the job waiting in retry_at.
	require.Eventually(t, func() bool {
		p, err := f.Page(ctx, job.Ident, site.URL+"/")
		if err != nil || p.Status != frontier.StatusWaiting {
			return false
		}
		assert.Equal(t, frontier.StateReady, p.State)
		v, err := s.Store.GetJob(ctx, job.Ident)
		return err == nil && !v.RetryAt.IsZero() && v.State == model.StateActive && s.Redis.ZScore(ctx, "retry_at", job.Ident).Err() == nil &&
			shownWaiting(ctx, s, job.Ident)
	}, time.Minute, 10*time.Millisecond, "the start page never waited for a later retry (shown waiting by the workflow too)")

	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	pages := crawlPages(t, s, job.Ident)
	require.Len(t, pages, 3, "the start page's links were crawled")
	start, _ := pageByURL(pages, site.URL+"/")
	assert.Equal(t, frontier.StatusSucceeded, start.Status)
	assert.Equal(t, 1, start.LaterRetries)
	assert.Equal(t, 2, start.Attempts, "one attempt per snapshot of the start page")
	for _, p := range pages {
		assert.Equal(t, frontier.StateDone, p.State, p.URL)
	}
	assert.Equal(t, map[string]int{"/": 4, "/a": 1, "/b": 1}, site.hitsWithout("/robots.txt"))

	v, err := s.Store.GetJob(ctx, job.Ident)
	require.NoError(t, err)
	assert.EqualValues(t, 3, v.Responses.R5xx, "every 503 counted once")
	assert.EqualValues(t, 3, v.ItemsDownloaded, "the start page, /a and /b")
	assert.EqualValues(t, v.ItemsDownloaded, v.ItemsQueued, "nothing queued at the end")
	assert.True(t, v.RetryAt.IsZero())
	assert.Zero(t, s.Redis.ZCard(ctx, "retry_at").Val())

	earlier, err := os.ReadDir(filepath.Join(s.SnapDir(job), engine.AttemptsDir, "1"))
	require.NoError(t, err, "the first attempt's records are kept")
	assert.NotEmpty(t, earlier)
}

// shownWaiting reports that crawl ident's workflow shows it waiting: its
// status query (StateWaiting with RetryAt), its Web UI details line and
// its ArchiveflowState search attribute (a visibility query finds it).
func shownWaiting(ctx context.Context, s *Stack, ident string) bool {
	v, err := s.Client.QueryWorkflow(ctx, ident, "", workflows.QueryStatus)
	var st workflows.CrawlStatus
	if err != nil || v.Get(&st) != nil || st.State != workflows.StateWaiting || st.RetryAt == nil {
		return false
	}
	v, err = s.Client.QueryWorkflow(ctx, ident, "", "__temporal_workflow_metadata")
	var md sdkpb.WorkflowMetadata
	if err != nil || v.Get(&md) != nil || !strings.Contains(md.GetCurrentDetails(), "waiting (retry at ") {
		return false
	}
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`ArchiveflowIdent = %q AND ArchiveflowState = "waiting"`, ident)})
	return err == nil && len(resp.GetExecutions()) > 0
}
