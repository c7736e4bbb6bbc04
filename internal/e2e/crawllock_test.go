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
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/workflows"
)

// lockedCrawl is a crawl of a four-page site (/ links /a, /b and /c) on
// a stack whose only pipeline is locked to it while the start page's one
// hook holds it (until release).
type lockedCrawl struct {
	s        *Stack
	job      Job
	pipeline rkeys.PipelineView
	events   string
	fetched  sync.Map // URL path → *atomic.Int32
}

// startLockedCrawl starts the stack (configure adjusts its config, prepare
// the stack before its pools start) and the crawl, and locks the pipeline
// once the start page's hook runs.
func startLockedCrawl(t *testing.T, ctx context.Context, configure func(*config.Config), prepare func(*Stack)) *lockedCrawl {
	lc := &lockedCrawl{events: filepath.Join(t.TempDir(), "events")}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := lc.fetched.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprint(w, `<!DOCTYPE html><html><head><title>start</title></head><body><a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a></body></html>`)
			return
		}
		fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body>page</body></html>`, r.URL.Path)
	}))
	t.Cleanup(site.Close)
	root := builtinPlugins(t, "pagefetch", "title", "outlinks")
	writeHook(t, root, "held", "on_Snapshot__00_held.sh", heldHook) // the start page's only: not a page plugin
	lc.s = NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Hooks.Timeout = 3 * time.Minute
		if configure != nil {
			configure(c)
		}
	})
	if prepare != nil {
		prepare(lc.s)
	}
	lc.s.StartPools(t, append(builtinEnv(t), "E2E_EVENTS="+lc.events))
	lc.job = lc.s.SubmitCrawl(t, site.URL+"/", 1, func(r *submit.Request) { r.Settings.UserAgent = crawlUA })
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(lc.events + ".started")
		return strings.Contains(string(b), lc.job.Ident)
	}, time.Minute, 50*time.Millisecond, "the start page runs")

	ps, err := lc.s.Store.ListPipelines(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	lc.pipeline = ps[0]
	require.NoError(t, lc.s.Store.LockPipeline(ctx, ps[0].ID, rkeys.PipelineLock{Ident: lc.job.Ident, UntilFinished: true, By: "e2e"}))
	require.Eventually(t, func() bool { return lc.s.Lock.Locked() == lc.job.Ident }, 30*time.Second, 50*time.Millisecond,
		"the pipeline takes no work from the shared queue")
	return lc
}

// release ends the start page's hook.
func (lc *lockedCrawl) release(t *testing.T) { touch(t, lc.events+".release-"+lc.job.Ident) }

// fetches counts the requests for /a, /b and /c, each or (all) together.
func (lc *lockedCrawl) fetches(paths ...string) int32 {
	if len(paths) == 0 {
		paths = []string{"/a", "/b", "/c"}
	}
	var sum int32
	for _, p := range paths {
		if n, ok := lc.fetched.Load(p); ok {
			sum += n.(*atomic.Int32).Load()
		}
	}
	return sum
}

// finishes waits for the crawl's end: finished, its four pages succeeded.
func (lc *lockedCrawl) finishes(t *testing.T, ctx context.Context) {
	var st workflows.CrawlStatus
	require.NoError(t, lc.job.Run.Get(ctx, &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	pages := crawlPages(t, lc.s, lc.job.Ident)
	require.Len(t, pages, 4)
	for _, p := range pages {
		assert.Equal(t, frontier.StatusSucceeded, p.Status, p.URL)
	}
}

// history calls each with every event of the crawl's history so far.
func (lc *lockedCrawl) history(t *testing.T, ctx context.Context, each func(*historypb.HistoryEvent)) {
	it := lc.s.Client.GetWorkflowHistory(ctx, lc.job.Ident, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		each(ev)
	}
}

// TestLockedCrawlRunsOnItsPipeline: a pipeline locked to a crawl (`starter
// lock PIPELINE IDENT`) takes no work from the shared queue, yet runs the
// crawl's pages: they are sent to its routed-page queue. Here the only
// pipeline is locked while the start page runs (a hook of the start page
// holds it); the crawl's pages then all run on the pipeline's routed-page
// queue and the crawl finishes (with the pages on the shared queue it
// never would).
func TestLockedCrawlRunsOnItsPipeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lc := startLockedCrawl(t, ctx, nil, nil)
	lc.release(t)
	lc.finishes(t, ctx)
	// Every page activity or batch was scheduled on the routed-page queue.
	runs := 0
	lc.history(t, ctx, func(ev *historypb.HistoryEvent) {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil {
			return
		}
		switch a.GetActivityType().GetName() {
		case "RunPage", "RunPageBatch":
			runs++
			assert.Contains(t, a.GetTaskQueue().GetName(), "@", "a page activity on the locked pipeline's queue")
			assert.True(t, strings.HasSuffix(a.GetTaskQueue().GetName(), rkeys.PageQueueSuffix), "its routed-page queue")
		}
	})
	assert.Positive(t, runs)
}

// TestLockedCrawlPagesWaitForTheirPipeline: the pages a crawl lock routes
// to its pipeline wait, as the shared queues' work does, while that
// pipeline takes no work: first through a host-wide maintenance, then
// through a low disk until a page activity was not started within
// job.host_timeout (its pages are released, no attempt spent, and routed
// again); then they run, each page once, none failed. The start page's
// hook, claimed before the maintenance began, runs on through it.
func TestLockedCrawlPagesWaitForTheirPipeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var free atomic.Int64
	free.Store(5 << 30)
	lc := startLockedCrawl(t, ctx, func(c *config.Config) {
		c.Worker.MinFreeDisk = "1GiB"
		c.Flapjack.MaintenancePoll = 100 * time.Millisecond
	}, func(s *Stack) {
		s.DiskFree = func(string) (int64, error) { return free.Load(), nil }
		s.WatchMaintenance = true
	})
	s, job := lc.s, lc.job
	notClaiming := func() string {
		ps, err := s.Store.ListPipelines(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		return ps[0].Fields[rkeys.FieldNotClaiming]
	}
	health, err := fleethealth.FromConfig(s.Store, s.Config)
	require.NoError(t, err)
	nick := lc.pipeline.Fields["nickname"]
	require.NotEmpty(t, nick)
	// The maintenance lasts a window past its last extension: the test
	// extends it (as an operator would, `starter maintenance` again) until
	// the pages are routed, however long a loaded machine takes for that.
	const window = 8 * time.Second
	maintain := func() {
		m, on, err := health.Active(ctx, nick, fleethealth.HostWide)
		require.NoError(t, err)
		if on && time.Until(m.End) > window/2 {
			return
		}
		_, err = health.Start(ctx, fleethealth.Maintenance{Host: nick, Check: fleethealth.HostWide, End: time.Now().Add(window), Summary: "kernel upgrade"},
			fleethealth.Known{Hosts: []string{nick}})
		require.NoError(t, err)
	}
	maintain()
	require.Eventually(t, func() bool { return strings.Contains(notClaiming(), "kernel upgrade") }, 30*time.Second, 50*time.Millisecond,
		"the maintenance drains the pipeline")
	lc.release(t) // the start page's hook, claimed before, ends

	// The start page ends and its links are routed to the pipeline ...
	routed := func() bool {
		desc, err := s.Client.DescribeWorkflowExecution(ctx, job.Ident, "")
		require.NoError(t, err)
		for _, a := range desc.GetPendingActivities() {
			switch a.GetActivityType().GetName() {
			case "RunPage", "RunPageBatch":
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(time.Minute); !routed(); time.Sleep(50 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "pages are sent to the locked pipeline within a minute")
		maintain()
	}
	require.Contains(t, notClaiming(), "kernel upgrade", "routed during the maintenance")
	// The disk runs low meanwhile (read every worker.stats_interval): it
	// holds them once the maintenance ends.
	free.Store(100 << 20)
	// They wait out the maintenance: only time can show that something
	// does not happen.
	for strings.Contains(notClaiming(), "kernel upgrade") {
		require.Zero(t, lc.fetches(), "no page runs during the host-wide maintenance")
		time.Sleep(100 * time.Millisecond)
	}
	require.Contains(t, notClaiming(), "archive disk low")
	// A page activity or batch is not started within host_timeout (its
	// first attempts were handed back by pollers that had their slots
	// before the guard closed): its pages are released and routed again.
	require.Eventually(t, func() bool {
		require.Zero(t, lc.fetches(), "no page runs while the disk is low")
		late := 0
		lc.history(t, ctx, func(ev *historypb.HistoryEvent) {
			if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil &&
				a.GetFailure().GetTimeoutFailureInfo().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
				late++
			}
		})
		return late > 0
	}, time.Minute, 100*time.Millisecond, "a routed page activity outwaits host_timeout")
	time.Sleep(2 * time.Second)
	assert.Zero(t, lc.fetches(), "no page runs while the disk is low")
	require.True(t, routed(), "the pages still wait for the pipeline")
	free.Store(5 << 30)

	lc.finishes(t, ctx)
	for _, path := range []string{"/a", "/b", "/c"} {
		assert.EqualValues(t, 1, lc.fetches(path), "%s fetched once", path)
	}
}
