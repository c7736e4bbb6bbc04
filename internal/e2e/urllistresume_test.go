//go:build dev

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/jobstore"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/internal/testredis"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestURLListCutShortIsSeededToItsEndByRetry: a URL-list crawl whose
// list could not be had fails, and `starter retry` finds nothing to do
// (no frontier: the list was never seeded). Its list then seeded the way
// a SeedURLList cut short leaves it (the first of SeedList's script calls
// written, Redis gone for the next: the frontier holds the list's first
// URL and marks the list partial), `starter retry` says so and seeds the
// rest: every listed page is fetched once, the list downloaded once more,
// and the mark is gone.
func TestURLListCutShortIsSeededToItsEndByRetry(t *testing.T) {
	var listUp atomic.Bool
	site := newLoggingSite(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/list.txt":
			if !listUp.Load() {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			for _, p := range []string{"/a", "/b", "/c"} {
				fmt.Fprintln(w, "http://"+r.Host+p)
			}
		case "/a", "/b", "/c":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body><p>page</p></body></html>`, r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	})
	s := NewStack(t, server, builtinPlugins(t, "pagefetch", "title", "outlinks"), crawlConfig)
	s.StartPools(t, builtinEnv(t))
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	listURL := site.URL + "/list.txt"
	job := s.SubmitCrawl(t, site.URL+"/", 0, func(r *submit.Request) { r.URLList = listURL })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	require.Equal(t, model.StateFailed, st.State)
	require.Contains(t, st.Error, "404")

	res := runStarter(t, bin, s, "retry", job.Ident)
	assert.NotZero(t, res.code, "a list never seeded: nothing to retry, as before")
	assert.NotContains(t, res.stdout, "cut short")

	// The first SeedList call of three (one URL each) written, the next
	// refused: what a SeedURLList whose Redis went away leaves.
	var in workflows.CrawlInput
	it := s.Client.GetWorkflowHistory(ctx, job.Ident, job.Run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := it.Next()
	require.NoError(t, err)
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0], &in))
	opts, err := redis.ParseURL(s.RedisURL)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(&testredis.CutScripts{After: 1})
	cut, err := frontier.New(rdb, s.Store.Keys(), frontier.Options{Chunk: 1})
	require.NoError(t, err)
	urls := []string{site.URL + "/a", site.URL + "/b", site.URL + "/c"}
	_, err = (&jobstore.CrawlStore{Frontier: cut}).SeedList(ctx, activities.SeedListInput{Ident: job.Ident, List: in.URLList.URL, URLs: urls,
		MaxDepth: in.Crawl.MaxDepth, PageAttempts: in.Crawl.PageAttempts, RetryLater: in.PageRetryLater})
	require.ErrorIs(t, err, testredis.ErrScriptsCut)
	require.Len(t, crawlPages(t, s, job.Ident), 1)

	listUp.Store(true)
	res = runStarter(t, bin, s, "retry", job.Ident, "--wait")
	require.Equal(t, 0, res.code, "starter retry --wait: %s%s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "its URL list was cut short")
	assert.Contains(t, res.stdout, job.Ident+"  FINISHED ")
	assert.NotContains(t, res.stdout, "retrying 0 failed page(s)", "no failed page to list")
	st = workflows.CrawlStatus{}
	require.NoError(t, s.Client.GetWorkflow(ctx, job.Ident, "").Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.False(t, st.Counts.ListPartial)
	pages := crawlPages(t, s, job.Ident)
	require.Len(t, pages, 3)
	for i, p := range pages {
		assert.Equal(t, urls[i], p.URL, "list order")
		assert.Equal(t, frontier.StatusSucceeded, p.Status, p.URL)
	}
	for _, p := range []string{"/a", "/b", "/c"} {
		assert.Equal(t, 1, site.count(p), "%s fetched once", p)
	}
	assert.Equal(t, 2, site.count("/list.txt"), "the first run's download (404) and the retry's")

	res = runStarter(t, bin, s, "retry", job.Ident)
	assert.Equal(t, 4, res.code, "seeded to its end, nothing failed: %s%s", res.stdout, res.stderr)
}
