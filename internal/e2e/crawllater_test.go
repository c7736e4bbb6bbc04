//go:build dev

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/engine"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
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
	var mu sync.Mutex
	hits := map[string]int{}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") != crawlUA {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!DOCTYPE html><html><head><title>start</title></head><body><a href="/flaky">f</a> <a href="/dead">d</a> <a href="/ok">o</a></body></html>`)
		case r.URL.Path == "/flaky" && n <= 3, r.URL.Path == "/dead":
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case r.URL.Path == "/flaky", r.URL.Path == "/ok":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body>fine</body></html>`, r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Crawl.PageAttempts = 2
		c.Hooks.RetryLater = []time.Duration{time.Second, 2 * time.Second}
		c.Redis.ResponseCounters = true
	})
	s.StartPools(t, env)
	job := s.SubmitCrawl(t, site.URL+"/", 1, func(r *submit.Request) { r.Settings.UserAgent = crawlUA })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := frontier.New(s.Redis, s.Store.Keys(), frontier.Options{})
	require.NoError(t, err)

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
	mu.Lock()
	assert.Equal(t, map[string]int{"/": 1, "/ok": 1, "/flaky": 4, "/dead": 6}, without(hits, "/robots.txt"))
	mu.Unlock()
	assert.EqualValues(t, 1, st.Counts.Failed)
	assert.EqualValues(t, 3, st.Counts.Succeeded)
	assert.Zero(t, st.Counts.Waiting)

	v, err := s.Store.GetJob(ctx, job.Ident)
	require.NoError(t, err)
	assert.EqualValues(t, 9, v.Responses.R5xx, "every 503 counted once")
	assert.EqualValues(t, v.ItemsDownloaded, v.ItemsQueued, "nothing queued at the end")
	assert.Zero(t, s.Redis.ZCard(ctx, "retry_at").Val())
	assert.Zero(t, s.Redis.HExists(ctx, job.Ident, rkeys.FieldRetryAt).Val())

	earlier, err := os.ReadDir(filepath.Join(engine.PageDir(s.Config.ArchiveDir, job.Ident, flaky.ID), engine.AttemptsDir))
	require.NoError(t, err)
	assert.Len(t, earlier, 3, "the flaky page's three earlier attempts are kept")
}

// without is m less key.
func without(m map[string]int, key string) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// TestCrawlStartPageIsRetriedLater: with two in-run hook attempts
// (retry.maximum_attempts 2) and hooks.retry_later [4s], a start page that
// answers 503 three times waits after its snapshot's two attempts (READY,
// status waiting; the job in retry_at, its hash's retry_at set: starter
// status shows it waiting), runs again as the start page when due (503,
// then 200) and the crawl goes on with its links. Every request is counted
// once, nothing is left queued, retry_at is empty at the end, and the
// first attempt's records are kept under attempts/1.
func TestCrawlStartPageIsRetriedLater(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") != crawlUA {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/" && n <= 3:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case r.URL.Path == "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!DOCTYPE html><html><head><title>start</title></head><body><a href="/a">a</a> <a href="/b">b</a></body></html>`)
		case r.URL.Path == "/a", r.URL.Path == "/b":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body>fine</body></html>`, r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Retry.MaximumAttempts = 2
		c.Retry.InitialInterval = 200 * time.Millisecond
		c.Hooks.RetryLater = []time.Duration{4 * time.Second}
		c.Redis.ResponseCounters = true
	})
	s.StartPools(t, env)
	job := s.SubmitCrawl(t, site.URL+"/", 1, func(r *submit.Request) { r.Settings.UserAgent = crawlUA })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := frontier.New(s.Redis, s.Store.Keys(), frontier.Options{})
	require.NoError(t, err)

	// The wait: the start page waiting, the job waiting in retry_at.
	require.Eventually(t, func() bool {
		p, err := f.Page(ctx, job.Ident, site.URL+"/")
		if err != nil || p.Status != frontier.StatusWaiting {
			return false
		}
		assert.Equal(t, frontier.StateReady, p.State)
		v, err := s.Store.GetJob(ctx, job.Ident)
		return err == nil && !v.RetryAt.IsZero() && v.State == model.StateActive && s.Redis.ZScore(ctx, "retry_at", job.Ident).Err() == nil
	}, time.Minute, 10*time.Millisecond, "the start page never waited for a later retry")

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
	mu.Lock()
	assert.Equal(t, map[string]int{"/": 4, "/a": 1, "/b": 1}, without(hits, "/robots.txt"))
	mu.Unlock()

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
