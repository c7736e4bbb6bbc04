//go:build dev

package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/pageindex"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/internal/testredis"
	"github.com/archiveflow/archiveflow/internal/testsite"
)

// The crawl drills (issue 12) crawl the generated site to drillDepth,
// once without a fault and once with one, and require the same result.
// Pages are slowed down by a polite delay so that the fault lands while
// the crawl is under way: it strikes once drillFaultAt pages are done.
const (
	drillDepth   = 3
	drillSite    = 400
	drillFaultAt = 30
)

// drillSettings is a concurrency and delay that keep several pages in
// flight for a few seconds.
func drillSettings(r *submit.Request) {
	r.Settings.Concurrency = 4
	r.Settings.DelayMinMS, r.Settings.DelayMaxMS = 100, 150
}

// waitPagesDone waits until the crawl job has done at least n pages.
func waitPagesDone(t *testing.T, s *Stack, j Job, n int64) {
	t.Helper()
	f, err := frontier.New(s.Redis, s.Store.Keys(), frontier.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := f.Counts(context.Background(), j.Ident)
		return err == nil && c.Done >= n
	}, drillDeadline, 10*time.Millisecond, "crawl %s never had %d pages done", j.Ident, n)
}

// pageFinal is what a page's final result is made of.
type pageFinal struct {
	State  frontier.State
	Status frontier.Status
	Depth  int
}

func finals(pages []frontier.Page) map[string]pageFinal {
	out := make(map[string]pageFinal, len(pages))
	for _, p := range pages {
		out[p.URL] = pageFinal{State: p.State, Status: p.Status, Depth: p.Depth}
	}
	return out
}

// requireSameCrawl checks a crawl that suffered a fault against one that
// did not: it finished, fetched every page within the limit, left no page
// READY or CLAIMED, every page has the same one final result, and the
// job's counters are equal. pagefetch remembers the requisites it fetched
// per crawl and host, in memory, so a shared stylesheet may be fetched
// again after a fault (or by two hosts); the counters count each
// requisite URL once per crawl (frontier Outcome.Once), so they do not
// move.
func requireSameCrawl(t *testing.T, srv *testsite.Server, want, got crawlOutcome) {
	t.Helper()
	skip, err := srv.CalendarSkipPattern(6)
	require.NoError(t, err)
	expected, err := srv.Expected(testsite.Scope{MaxDepth: drillDepth, OffsiteOnce: true, Skip: []string{skip}})
	require.NoError(t, err)
	for name, o := range map[string]crawlOutcome{"without the fault": want, "with the fault": got} {
		require.Equal(t, model.StateFinished, o.status.State, "crawl %s: %s", name, o.status.Error)
		diff := testsite.Compare(expected.Pages, o.fetched.Pages)
		assert.Empty(t, diff.Missing, "crawl %s: pages within the limit not fetched", name)
		assert.Empty(t, diff.Extra, "crawl %s: pages fetched beyond the limit", name)
		for _, p := range o.pages {
			assert.NotContains(t, []frontier.State{frontier.StateReady, frontier.StateClaimed}, p.State, "crawl %s: page %s", name, p.URL)
		}
	}
	assert.Equal(t, finals(want.pages), finals(got.pages), "every page has the same final result")
	assert.Equal(t, want.status.Counts, got.status.Counts, "page counts")
	requireSameCounters(t, want.job, got.job, cutShort(got.requests, got.killedAt))
	t.Logf("%d pages (%d done), items_queued %d, items_downloaded %d, bytes_downloaded %d, responses %+v",
		len(got.pages), got.status.Counts.Done, got.job.ItemsQueued, got.job.ItemsDownloaded, got.job.BytesDownloaded, got.job.Responses)
}

// requireSameCounters checks the job counters of a crawl that suffered a
// fault against one that did not: every counter equal, but for the 500
// answers of cut (cutShort) that the fault's crawl never counted: each
// lost one takes one r5xx, one error, one response and its bytes, nothing
// else.
func requireSameCounters(t *testing.T, want, got rkeys.JobView, cut []testsite.Request) {
	t.Helper()
	if lost := want.Responses.R5xx - got.Responses.R5xx; lost != 0 {
		require.True(t, lost > 0 && lost <= int64(len(cut)),
			"r5xx %d with the fault against %d without: only a 500 answer to an attempt the fault cut short (%d) may be missing", got.Responses.R5xx, want.Responses.R5xx, len(cut))
		t.Logf("%d of %d 500 answers sent to attempts the fault may have cut short not counted: %+v", lost, len(cut), cut)
		want.Responses.R5xx -= lost
		want.Responses.Errors -= lost
		want.Responses.Count -= lost
		for _, r := range cut[:lost] {
			require.Equal(t, cut[0].Bytes, r.Bytes, "every 500-once page answers the same error body")
			want.BytesDownloaded -= int64(r.Bytes)
		}
	}
	assert.Equal(t, want.ItemsQueued, got.ItemsQueued, "items_queued")
	// A requisite counts once per crawl (activities.PageTally): fetched
	// again by a restarted worker or another host, it moves no counter.
	assert.Equal(t, want.ItemsDownloaded, got.ItemsDownloaded, "items_downloaded")
	assert.Equal(t, want.BytesDownloaded, got.BytesDownloaded, "bytes_downloaded")
	assert.Equal(t, want.Responses, got.Responses, "r1xx..r5xx, runk, error_count and their total")
}

// cutShort are the 500-once pages' 500 answers that the site sent before a
// fault at `at` to a page it answered again after it. The page attempt
// that got one may have been cut short by the fault before its outcome
// was recorded: nothing of it is kept (no outcome, no count), and its retry
// got the page's 200. That answer can be counted by no one; any other
// counter a fault moves is a bug.
func cutShort(reqs []testsite.Request, at time.Time) []testsite.Request {
	if at.IsZero() {
		return nil
	}
	again := map[string]bool{}
	for _, r := range reqs {
		if r.Time.After(at) {
			again[r.URL] = true
		}
	}
	var cut []testsite.Request
	for _, r := range reqs {
		if r.Kind == testsite.KindFlaky && r.Status == http.StatusInternalServerError && !r.Time.After(at) && again[r.URL] {
			cut = append(cut, r)
		}
	}
	return cut
}

// drillCrawls crawls srv twice, each on a stack newStack builds: without
// the fault, then with it (fault runs once drillFaultAt pages are done),
// requires the same outcome (requireSameCrawl) and returns the one with
// the fault. kills says the fault kills a process that runs page attempts,
// whose answers may die with it (cutShort); any other fault leaves every
// attempt's records to be counted.
func drillCrawls(t *testing.T, srv *testsite.Server, newStack func() *Stack, fault func(*Stack, Job), kills bool) crawlOutcome {
	t.Helper()
	var killedAt time.Time
	crawl := func(withFault bool) crawlOutcome {
		s := newStack()
		var f func(Job)
		if withFault {
			f = func(j Job) {
				waitPagesDone(t, s, j, drillFaultAt)
				if kills {
					killedAt = time.Now()
				}
				fault(s, j)
			}
		}
		o := runSiteCrawl(t, s, srv, drillDepth, drillSettings, f)
		o.killedAt = killedAt
		return o
	}
	want := crawl(false)
	got := crawl(true)
	requireSameCrawl(t, srv, want, got)
	return got
}

// TestDrillCrawlWorkerKilled SIGKILLs a worker process that runs pages of
// a crawl: its pages' activities time out on their heartbeat and run on
// the other worker, and the crawl ends as one without the kill did.
func TestDrillCrawlWorkerKilled(t *testing.T) {
	waitingDrill(t)
	if testing.Short() {
		t.Skip("builds the workers binary and crawls twice")
	}
	bin := BuildWorkers(t)
	srv := crawlSite(t, drillSite)
	root := builtinPlugins(t, "pagefetch", "title", "outlinks")
	var pids []int
	var archives []string
	got := drillCrawls(t, srv, func() *Stack {
		s := NewStack(t, server, root, crawlConfig)
		w1 := StartWorker(t, bin, s.Config, "w1", "PAGEFETCH_ENABLED=true")
		w2 := StartWorker(t, bin, s.Config, "w2", "PAGEFETCH_ENABLED=true")
		pids = []int{w1.Process.Pid, w2.Process.Pid}
		archives = []string{archiveDirOf(t, w1), archiveDirOf(t, w2)}
		return s
	}, func(s *Stack, j Job) {
		pid := pageWorkerPid(t, s, j)
		require.Contains(t, pids, pid, "a page runs on a worker process of the test")
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		t.Logf("killed worker pid %d while it ran a page", pid)
	}, true)
	// What the frontier marks done is on disk: every page done (but the
	// start page, a snapshot) has its last attempt's line in the page
	// index of a worker, the killed one's included, saying how it ended.
	for _, p := range got.pages {
		if p.State != frontier.StateDone || (p.ID == 1 && p.Parent == 0) {
			continue
		}
		var last pageindex.Attempt
		for _, dir := range archives {
			attempts, err := pageindex.Page(archivedir.PageIndex(dir, got.status.Ident), p.ID)
			require.NoError(t, err)
			for _, a := range attempts {
				if a.Number() >= last.Number() {
					last = a
				}
			}
		}
		require.NotZero(t, last.Number(), "page %d %s: no line in a page index", p.ID, p.URL)
		want := model.StateFailed
		if p.Status == frontier.StatusSucceeded {
			want = model.StateFinished
		}
		assert.Equal(t, want, last.Snapshot.State, "page %d %s (%s): its last attempt's line", p.ID, p.URL, p.Status)
	}
}

// archiveDirOf is the archive dir of a worker StartWorker started.
func archiveDirOf(t *testing.T, w *exec.Cmd) string {
	t.Helper()
	for _, kv := range slices.Backward(w.Env) {
		if dir, ok := strings.CutPrefix(kv, "ARCHIVEFLOW_ARCHIVE_DIR="); ok {
			return dir
		}
	}
	t.Fatalf("worker %v has no ARCHIVEFLOW_ARCHIVE_DIR", w.Args)
	return ""
}

// pageWorkerPid is the pid of a worker process running a page of j (a
// started RunPage activity; worker identities are "PID@HOST@").
func pageWorkerPid(t *testing.T, s *Stack, j Job) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := s.Client.DescribeWorkflowExecution(ctx, j.Ident, "")
		if err != nil {
			return false
		}
		for _, a := range d.GetPendingActivities() {
			if !strings.HasPrefix(a.GetActivityType().GetName(), "RunPage") || a.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
				continue
			}
			head, _, _ := strings.Cut(a.GetLastWorkerIdentity(), "@")
			if n, err := strconv.Atoi(head); err == nil {
				pid = n
				return true
			}
		}
		return false
	}, drillDeadline, 10*time.Millisecond, "no page of %s ever ran", j.Ident)
	return pid
}

// TestDrillCrawlTemporalRestart stops and starts the Temporal server (same
// data dir and port) while a crawl runs: the workers and the crawl
// reconnect, and the crawl ends as one without the restart did.
func TestDrillCrawlTemporalRestart(t *testing.T) {
	waitingDrill(t)
	if testing.Short() {
		t.Skip("starts and restarts a Temporal server")
	}
	rsrv := startRestartable(t)
	srv := crawlSite(t, drillSite)
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	drillCrawls(t, srv, func() *Stack {
		s := NewStack(t, rsrv.cur, root, crawlConfig)
		s.StartPools(t, env)
		return s
	}, func(*Stack, Job) {
		t.Logf("Temporal frontend was down for %s", rsrv.restart(t).Round(time.Millisecond))
	}, false)
}

// TestDrillCrawlRedisOutage keeps Redis down for 30 s (EnvRedisOutage)
// while a crawl runs: pages wait for their writes, the workflow's frontier
// calls are retried, and the crawl ends as one without the outage did.
func TestDrillCrawlRedisOutage(t *testing.T) {
	waitingDrill(t)
	if testing.Short() {
		t.Skip("keeps Redis down for 30 s")
	}
	outage := redisOutage(t)
	srv := crawlSite(t, drillSite)
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	var rs *testredis.Server
	drillCrawls(t, srv, func() *Stack {
		rs = testredis.Start(t)
		s := newStackOnRedis(t, server, rs, root, crawlConfig)
		s.StartPools(t, env)
		return s
	}, func(s *Stack, j Job) {
		require.NoError(t, rs.Stop())
		stopped := time.Now()
		// The outage itself is the drill's parameter, not a synchronisation.
		<-time.After(outage)
		assert.True(t, running(t, s.Client, j), "the crawl neither failed nor finished while Redis was down")
		require.NoError(t, rs.Restart())
		t.Logf("Redis was down for %s", time.Since(stopped).Round(time.Millisecond))
	}, false)
}

// TestCutShortIsAFlakyPageAnsweredAgain: the only answers a drill's
// counters may miss are a 500-once page's 500 sent before the fault to a
// page the site answered again after it.
func TestCutShortIsAFlakyPageAnsweredAgain(t *testing.T) {
	at := time.Now()
	before, after := at.Add(-time.Second), at.Add(time.Second)
	reqs := []testsite.Request{
		{Time: before, URL: "/flaky/1", Kind: testsite.KindFlaky, Status: 500, Bytes: 126}, // asked again: maybe cut short
		{Time: after, URL: "/flaky/1", Kind: testsite.KindFlaky, Status: 200},
		{Time: before, URL: "/flaky/2", Kind: testsite.KindFlaky, Status: 500}, // never asked again: recorded
		{Time: before, URL: "/error/1", Kind: testsite.KindError, Status: 500}, // answers 500 again: counted by the retry
		{Time: after, URL: "/error/1", Kind: testsite.KindError, Status: 500},  //
		{Time: after, URL: "/flaky/3", Kind: testsite.KindFlaky, Status: 500},  // after the fault
		{Time: after.Add(time.Second), URL: "/flaky/3", Kind: testsite.KindFlaky, Status: 200},
	}
	assert.Equal(t, reqs[:1], cutShort(reqs, at))
	assert.Nil(t, cutShort(reqs, time.Time{}), "no fault, nothing cut short")
}
