//go:build dev

package devtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/crawltest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// crawlInput is a crawl of the fake site on queue q.
func crawlInput(ident, q string, concurrency, historyEvents int) workflows.CrawlInput {
	job := activities.Job{Ident: ident, URL: "http://fake.test/", SnapshotID: ident}
	seed := job
	seed.CrawlPage = true
	retry := workflows.Retry{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1, MaximumInterval: 100 * time.Millisecond, MaximumAttempts: 3}
	return workflows.CrawlInput{
		Version:   workflows.InputComplete,
		Crawl:     activities.Crawl{Job: job, MaxDepth: -1, PagePlugins: []string{"pagefetch"}, PageAttempts: 3, MaxLinks: 1000},
		Pool:      "devtest",
		TaskQueue: q,
		Settings:  model.Settings{Concurrency: concurrency},
		Seed: workflows.SnapshotInput{Version: workflows.InputComplete, Job: seed, Pool: "devtest", TaskQueue: q,
			Settings: model.Settings{Concurrency: 1}, Retry: workflows.RetryPolicies{Default: retry},
			Timing: workflows.Timing{HeartbeatTimeout: 5 * time.Second, StartMargin: 30 * time.Second, HostScheduleToStart: 30 * time.Second,
				BackgroundMaxRun: time.Hour, MaxClaims: 1}},
		Timing: workflows.CrawlTiming{HeartbeatTimeout: 10 * time.Second, PageTimeout: time.Minute, PageActivityAttempts: 3,
			HostScheduleToStart: 10 * time.Second, TeardownTimeout: 10 * time.Second, HistoryEvents: historyEvents,
			AttrInterval: time.Second},
	}
}

// fakeCrawlWorker serves CrawlWorkflow with the fake crawl's activities
// (and its stand-in start page) on queue q.
// finishedCrawl starts the crawl in on queue q, waits for its end and
// checks that it finished with each of fake's pages done exactly once.
func finishedCrawl(ctx context.Context, t *testing.T, c client.Client, q string, in workflows.CrawlInput, fake *crawltest.Fake, pages int) (client.WorkflowRun, workflows.CrawlStatus) {
	t.Helper()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.Crawl.Job.Ident, TaskQueue: q}, workflows.CrawlWorkflow, in)
	require.NoError(t, err)
	var st workflows.CrawlStatus
	require.NoError(t, run.Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	r := fake.Report()
	assert.Equal(t, int64(pages), r.Done)
	assert.Empty(t, r.Twice)
	return run, st
}

func fakeCrawlWorker(t *testing.T, c client.Client, q string, fake *crawltest.Fake) {
	w := worker.New(c, q, worker.Options{})
	w.RegisterWorkflow(workflows.CrawlWorkflow)
	seed := crawltest.SeedWorkflow
	if fake.SeedTransient > 0 {
		seed = fake.SeedWorkflow // reads the fake: fine for short runs a sticky worker keeps
	}
	w.RegisterWorkflowWithOptions(seed, workflow.RegisterOptions{Name: "SnapshotWorkflow"})
	w.RegisterActivity(fake.Activities())
	// The teardown runs on the hosts' own queues.
	for _, hq := range []string{"host-1", "host-seed"} {
		hw := worker.New(c, hq, worker.Options{})
		hw.RegisterActivity(fake.Activities())
		require.NoError(t, hw.Start())
		t.Cleanup(hw.Stop)
	}
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

// TestCrawlOnDevServer crawls 800 no-op pages on a real server with a
// history budget of 500 events: the crawl continues as new run after
// run, every run's real history stays within the budget plus what drains,
// every page ends once, and each run's history replays.
func TestCrawlOnDevServer(t *testing.T) {
	crawlOnDevServer(t, "devtestcrawl", 0, 500)
}

// TestCrawlInBatchesOnDevServer is TestCrawlOnDevServer with page batches
// of 20 (CrawlTiming.BatchPages) and a budget of 150 events: fewer events
// per page, every run within its budget plus one batch's drain, every run
// replays.
func TestCrawlInBatchesOnDevServer(t *testing.T) {
	crawlOnDevServer(t, "devtestcrawlbatch", 20, 150)
}

// crawlOnDevServer crawls 800 no-op pages with a history budget of
// budget events, in page batches of batch pages (0: a page per activity).
func crawlOnDevServer(t *testing.T, ident string, batch, budget int) {
	e := start(t)
	q := e.queue + "-" + ident // start's host polls e.queue without the fake activities
	const pages = 800
	fake := crawltest.New(pages, 5)
	fakeCrawlWorker(t, e.c, q, fake)
	in := crawlInput(ident, q, 10, budget)
	if batch > 0 {
		in.Timing.BatchPages, in.Timing.BatchTime = batch, 20*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	_, st := finishedCrawl(ctx, t, e.c, q, in, fake, pages)
	assert.Greater(t, st.Run, 2, "the crawl continued as new")

	// Walk the runs back from the last: each run's history length.
	desc, err := e.c.DescribeWorkflowExecution(ctx, in.Crawl.Job.Ident, "")
	require.NoError(t, err)
	runID := desc.WorkflowExecutionInfo.Execution.RunId
	var lengths []int
	var runPages int
	for runID != "" {
		h := history(ctx, t, e.c, in.Crawl.Job.Ident, runID)
		lengths = append([]int{len(h.Events)}, lengths...)
		for _, ev := range h.Events {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.ActivityType.GetName() == "RunPage" {
				runPages++
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.ActivityType.GetName() == "RunPageBatch" {
				var bin activities.RunPageBatchInput
				require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &bin))
				runPages += len(bin.Pages)
			}
		}
		replayCrawl(t, h)
		first := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() == ""
		if first || len(lengths) == 1 {
			which := "last"
			if first {
				which = "first"
			}
			recordCrawl(t, h, which)
		}
		runID = h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	}
	require.Len(t, lengths, st.Run)
	total := 0
	for i, n := range lengths {
		total += n
		// It stops launching at the budget and drains at most one claim
		// of pages (concurrency 10): ~7 events each.
		assert.LessOrEqual(t, n, budget+10*8+50, "run %d: %d events", i+1, n)
	}
	t.Logf("%d pages in %d runs, %d events per run %v, %.2f events per page", pages, len(lengths), total/len(lengths), lengths, float64(total)/float64(runPages))
}

func history(ctx context.Context, t *testing.T, c client.Client, id, runID string) *historypb.History {
	it := c.GetWorkflowHistory(ctx, id, runID, false, 0)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	return h
}

func replayCrawl(t *testing.T, h *historypb.History) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflows.CrawlWorkflow)
	r.RegisterWorkflow(workflows.SnapshotWorkflow)
	require.NoError(t, r.ReplayWorkflowHistory(nil, h), "replay of the crawl run just recorded")
}

// crawlHistories names the crawl workflow's code generation a recording
// is made with (the latest workflow.GetVersion change it went through),
// so a new recording joins the older ones the replay test keeps replaying
// instead of replacing them.
const crawlHistories = "collectpages"

// recordCrawl stores a run's history as testdata (which: first, last,
// retry).
func recordCrawl(t *testing.T, h *historypb.History, which string) {
	recordCrawlAs(t, h, which, crawlHistories)
}

// recordCrawlAs is recordCrawl naming the code generation.
func recordCrawlAs(t *testing.T, h *historypb.History, which, generation string) {
	if os.Getenv("ARCHIVEFLOW_RECORD_HISTORIES") != "1" {
		return
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	name := fmt.Sprintf("%s.%s.v%d.%s.json", strings.ReplaceAll(t.Name(), "/", "_"), which, workflows.InputComplete, generation)
	require.NoError(t, os.WriteFile(filepath.Join("..", "testdata", name), data, 0o644))
}

// retriedCrawl runs the crawl in to its end, finished with failed pages
// failed, calls before, fixes fake and runs the crawl's retry (a new run
// with CrawlInput.Rerun, as internal/submit.Rerun starts it) to its end;
// it returns the retry's run and final status.
func retriedCrawl(ctx context.Context, t *testing.T, c client.Client, in workflows.CrawlInput, fake *crawltest.Fake, failed int64, before func()) (client.WorkflowRun, workflows.CrawlStatus) {
	t.Helper()
	opts := client.StartWorkflowOptions{ID: in.Crawl.Job.Ident, TaskQueue: in.TaskQueue}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.CrawlWorkflow, in)
	require.NoError(t, err)
	var st workflows.CrawlStatus
	require.NoError(t, run.Get(ctx, &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	require.Equal(t, failed, st.Counts.Failed)
	if before != nil {
		before()
	}

	fake.Fix()
	in.Settings = st.Settings
	if in.URLList != nil {
		in.Crawl.Scope.StartURLs = st.StartURLs
	}
	in.Rerun = &workflows.CrawlRerun{PreviousRunID: run.GetRunID(), Pages: failed, SettingsVersion: st.SettingsVersion, Rules: st.Rules}
	retry, err := c.ExecuteWorkflow(ctx, opts, workflows.CrawlWorkflow, in)
	require.NoError(t, err)
	require.NoError(t, retry.Get(ctx, &st))
	return retry, st
}

// TestCrawlRetryOnDevServer retries a crawl whose page 4 failed (a new run
// with CrawlInput.Rerun, as internal/submit.Rerun starts it): only page 4
// and the pages it now links run; the retry's history replays and is
// recorded for the replay test.
func TestCrawlRetryOnDevServer(t *testing.T) {
	e := start(t)
	q := e.queue + "-crawlretry"
	fake := crawltest.New(40, 3)
	fake.Failing = map[int64]bool{4: true}
	fakeCrawlWorker(t, e.c, q, fake)
	in := crawlInput("devtestcrawlretry", q, 4, 8000)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var known int64
	retry, st := retriedCrawl(ctx, t, e.c, in, fake, 1, func() { known = fake.Report().Known })
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Zero(t, st.Counts.Failed)
	r := fake.Report()
	assert.Equal(t, int64(40), r.Known)
	assert.Greater(t, r.Known, known, "page 4's links are crawled")
	assert.Equal(t, 2, r.PageRuns[4])
	assert.Equal(t, []string{retry.GetRunID() + "/reopen"}, r.Reopens)
	for id, n := range r.PageRuns {
		if id != 4 {
			assert.Equal(t, 1, n, "page %d runs once over both runs", id)
		}
	}
	h := history(ctx, t, e.c, in.Crawl.Job.Ident, retry.GetRunID())
	replayCrawl(t, h)
	recordCrawl(t, h, "retry")
}

// TestCrawlTeardownOfAStaleHostOnDevServer: the pages ran on host-1, whose
// worker is gone (nothing polls its queue) while its record still looks
// alive for 2 s more when the crawl ends. The teardown there waits no
// longer than that lease (plus a second), asks again, finds the host gone
// and skips it: the crawl does not wait out HostScheduleToStart (a
// minute here) on a dead host's queue. The run's history is recorded for
// the replay test.
func TestCrawlTeardownOfAStaleHostOnDevServer(t *testing.T) {
	e := start(t)
	q := e.queue + "-crawlstale"
	fake := crawltest.New(20, 3)
	fake.Stale = map[string]time.Duration{"host-1": 2 * time.Second}
	w := worker.New(e.c, q, worker.Options{})
	w.RegisterWorkflow(workflows.CrawlWorkflow)
	w.RegisterWorkflowWithOptions(crawltest.SeedWorkflow, workflow.RegisterOptions{Name: "SnapshotWorkflow"})
	w.RegisterActivity(fake.Activities())
	hw := worker.New(e.c, "host-seed", worker.Options{}) // host-1 has no worker
	hw.RegisterActivity(fake.Activities())
	require.NoError(t, hw.Start())
	t.Cleanup(hw.Stop)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	in := crawlInput("devtestcrawlstale", q, 4, 8000)
	in.Timing.HostScheduleToStart = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	run, _ := finishedCrawl(ctx, t, e.c, q, in, fake, 20)
	assert.Equal(t, []string{"host-seed"}, fake.Report().Teardowns)

	h := history(ctx, t, e.c, in.Crawl.Job.Ident, run.GetRunID())
	var waits []time.Duration
	var started, ended time.Time
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.ActivityType.GetName() == "TeardownCrawl" && a.TaskQueue.GetName() == "host-1" {
			waits = append(waits, a.ScheduleToStartTimeout.AsDuration())
			if started.IsZero() {
				started = ev.EventTime.AsTime()
			}
		}
		ended = ev.EventTime.AsTime()
	}
	assert.Equal(t, []time.Duration{3 * time.Second}, waits, "one teardown on host-1, waiting no longer than its lease and a second")
	assert.Less(t, ended.Sub(started), 20*time.Second, "the crawl ended soon after the dead host's lease, not after HostScheduleToStart")
	t.Logf("teardown on the stale host to the crawl's end: %s", ended.Sub(started).Round(time.Millisecond))
	replayCrawl(t, h)
	recordCrawl(t, h, "teardown")
}
