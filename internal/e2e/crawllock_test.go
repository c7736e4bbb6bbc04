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

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
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

// TestLockedCrawlPagesWaitForTheirPipeline: the pages a crawl lock routes
// to its pipeline wait, as the shared queues' work does, while that
// pipeline takes no work: first through a host-wide maintenance longer
// than job.host_timeout (the page activities not started in time are
// released, no attempt spent, and routed again), then through a low
// disk; then they run, each page once, none failed. The start page's
// hooks, claimed before the maintenance began, run on through it.
func TestLockedCrawlPagesWaitForTheirPipeline(t *testing.T) {
	var fetched sync.Map // path → *atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := fetched.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprint(w, `<!DOCTYPE html><html><head><title>start</title></head><body><a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a></body></html>`)
			return
		}
		fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body>page</body></html>`, r.URL.Path)
	}))
	defer site.Close()
	pagesFetched := func() int32 {
		var sum int32
		for _, p := range []string{"/a", "/b", "/c"} {
			if n, ok := fetched.Load(p); ok {
				sum += n.(*atomic.Int32).Load()
			}
		}
		return sum
	}
	root := builtinPlugins(t, "pagefetch", "title", "outlinks")
	writeHook(t, root, "held", "on_Snapshot__00_held.sh", heldHook) // the start page's only
	events := filepath.Join(t.TempDir(), "events")
	s := NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Hooks.Timeout = 3 * time.Minute
		c.Worker.MinFreeDisk = "1GiB"
		c.Flapjack.MaintenancePoll = 100 * time.Millisecond
		c.Crawl.PerHost.Reuse = 0 // no kept turn outlives the test
	})
	var free atomic.Int64
	free.Store(5 << 30)
	s.DiskFree = func(string) (int64, error) { return free.Load(), nil }
	s.WatchMaintenance = true
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
	notClaiming := func() string {
		ps, err := s.Store.ListPipelines(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		return ps[0].Fields[rkeys.FieldNotClaiming]
	}
	require.NoError(t, s.Store.LockPipeline(ctx, ps[0].ID, rkeys.PipelineLock{Ident: job.Ident, UntilFinished: true, By: "e2e"}))
	require.Eventually(t, func() bool { return s.Lock.Locked() == job.Ident }, 30*time.Second, 50*time.Millisecond)
	health, err := fleethealth.FromConfig(s.Store, s.Config)
	require.NoError(t, err)
	nick := ps[0].Fields["nickname"]
	require.NotEmpty(t, nick)
	hold := s.Config.Job.HostTimeout + 5*time.Second // a page activity is not started in time at least once
	_, err = health.Start(ctx, fleethealth.Maintenance{Host: nick, Check: fleethealth.HostWide, End: time.Now().Add(hold), Summary: "kernel upgrade"},
		fleethealth.Known{Hosts: []string{nick}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(notClaiming(), "kernel upgrade") }, 30*time.Second, 50*time.Millisecond,
		"the maintenance drains the pipeline")
	touch(t, events+".release-"+job.Ident) // the start page's hook, claimed before, ends

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
	require.Eventually(t, routed, time.Minute, 50*time.Millisecond, "pages are sent to the locked pipeline")
	// The disk runs low meanwhile (read every worker.stats_interval): it
	// holds them once the maintenance ends.
	free.Store(100 << 20)
	// They wait out the maintenance: only time can show that something
	// does not happen.
	for strings.Contains(notClaiming(), "kernel upgrade") {
		require.Zero(t, pagesFetched(), "no page runs during the host-wide maintenance")
		time.Sleep(100 * time.Millisecond)
	}
	require.Contains(t, notClaiming(), "archive disk low")
	// A page activity or batch is not started within host_timeout (its
	// first attempts were handed back by pollers that had their slots
	// before the guard closed): its pages are released and routed again.
	require.Eventually(t, func() bool {
		require.Zero(t, pagesFetched(), "no page runs while the disk is low")
		return notStarted(ctx, t, s, job.Ident) > 0
	}, time.Minute, 100*time.Millisecond, "a routed page activity outwaits host_timeout")
	time.Sleep(2 * time.Second)
	assert.Zero(t, pagesFetched(), "no page runs while the disk is low")
	require.True(t, routed(), "the pages still wait for the pipeline")
	free.Store(5 << 30)

	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	pages := crawlPages(t, s, job.Ident)
	require.Len(t, pages, 4)
	for _, p := range pages {
		assert.Equal(t, frontier.StatusSucceeded, p.Status, p.URL)
	}
	for _, path := range []string{"/a", "/b", "/c"} {
		n, ok := fetched.Load(path)
		require.True(t, ok, path)
		assert.EqualValues(t, 1, n.(*atomic.Int32).Load(), "%s fetched once", path)
	}
}

// notStarted counts the activities of workflow id that were not started
// within their ScheduleToStart timeout.
func notStarted(ctx context.Context, t *testing.T, s *Stack, id string) int {
	it := s.Client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil &&
			a.GetFailure().GetTimeoutFailureInfo().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			n++
		}
	}
	return n
}
