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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestLockedCrawlRunsOnItsPipeline: a pipeline locked to a crawl (`starter
// lock PIPELINE IDENT`) takes no work from the shared queue, yet runs the
// crawl's pages: they are sent to its host queue. Here the only pipeline
// is locked while the start page runs (a hook of the start page holds it);
// the crawl's pages then all run on the pipeline's host queue and the
// crawl finishes (with the pages on the shared queue it never would).
func TestLockedCrawlRunsOnItsPipeline(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprint(w, `<!DOCTYPE html><html><head><title>start</title></head><body><a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a></body></html>`)
			return
		}
		fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body>page</body></html>`, r.URL.Path)
	}))
	defer site.Close()
	root := builtinPlugins(t, "pagefetch", "title", "outlinks")
	writeHook(t, root, "held", "on_Snapshot__00_held.sh", heldHook) // the start page's only: not a page plugin
	events := filepath.Join(t.TempDir(), "events")
	s := NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Hooks.Timeout = 3 * time.Minute
	})
	s.StartPools(t, append(builtinEnv(t), "E2E_EVENTS="+events))
	job := s.SubmitCrawl(t, site.URL+"/", 1, func(r *submit.Request) { r.Settings.UserAgent = crawlUA })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(events + ".started")
		return strings.Contains(string(b), job.Ident)
	}, time.Minute, 50*time.Millisecond, "the start page runs")

	ps, err := s.Store.ListPipelines(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.NoError(t, s.Store.LockPipeline(ctx, ps[0].ID, rkeys.PipelineLock{Ident: job.Ident, UntilFinished: true, By: "e2e"}))
	require.Eventually(t, func() bool { return s.Lock.Locked() == job.Ident }, 30*time.Second, 50*time.Millisecond,
		"the pipeline takes no work from the shared queue")
	touch(t, events+".release-"+job.Ident)

	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	pages := crawlPages(t, s, job.Ident)
	require.Len(t, pages, 4)
	for _, p := range pages {
		assert.Equal(t, frontier.StatusSucceeded, p.Status, p.URL)
	}
	// Every page activity or batch was scheduled on the host queue.
	it := s.Client.GetWorkflowHistory(ctx, job.Ident, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	runs := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil {
			continue
		}
		switch a.GetActivityType().GetName() {
		case "RunPage", "RunPageBatch":
			runs++
			assert.Contains(t, a.GetTaskQueue().GetName(), "@", "a page activity on the locked pipeline's host queue")
		}
	}
	assert.Positive(t, runs)
}
