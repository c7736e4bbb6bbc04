package workflows_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/crawltest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/workflows"
)

const crawlIdent = "c1"

func crawlInput(concurrency int) workflows.CrawlInput {
	job := activities.Job{Ident: crawlIdent, URL: "http://fake.test/", SnapshotID: crawlIdent}
	seedJob := job
	seedJob.CrawlPage = true
	retry := workflows.Retry{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 3}
	return workflows.CrawlInput{
		Version:   workflows.InputComplete,
		Crawl:     activities.Crawl{Job: job, MaxDepth: -1, PagePlugins: []string{"pagefetch"}, PageAttempts: 3, MaxLinks: 1000},
		Pool:      "default",
		TaskQueue: "q",
		Settings:  model.Settings{Concurrency: concurrency},
		Seed: workflows.SnapshotInput{Version: workflows.InputComplete, Job: seedJob, Pool: "default", TaskQueue: "q",
			Settings: model.Settings{Concurrency: 1}, Retry: workflows.RetryPolicies{Default: retry},
			Timing: workflows.Timing{HeartbeatTimeout: time.Minute, StartMargin: time.Minute, HostScheduleToStart: time.Minute,
				BackgroundMaxRun: time.Hour, MaxClaims: 1}},
		Timing: workflows.CrawlTiming{HeartbeatTimeout: time.Minute, PageTimeout: time.Minute, PageActivityAttempts: 3,
			HostScheduleToStart: time.Minute, TeardownTimeout: time.Minute, HistoryEvents: 8000, AttrInterval: 5 * time.Second},
	}
}

// crawlEnv is one run's test environment with the fake crawl's
// activities. It models the run's history length from what ran: a page
// activity costs eventsPerPage events (scheduled, started, completed and
// a workflow task of its own: the worst case, no completions batched in
// one task), a local activity one marker, so CrawlWorkflow's
// continue-as-new is exercised as on a real server (the dev-server test
// in workflows/devtest measures the real figure).
type crawlEnv struct {
	*testsuite.TestWorkflowEnvironment
	events int
}

const eventsPerPage = 6

// crawlLogger is the crawl tests' SDK logger: warnings and errors only.
// The test environment's default logs every activity result at debug
// level, 26 MB of output for the 100,000-page crawl.
var crawlLogger = log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

func newCrawlEnv(t *testing.T, fake *crawltest.Fake) *crawlEnv {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(crawlLogger)
	e := &crawlEnv{TestWorkflowEnvironment: s.NewTestWorkflowEnvironment(), events: 10}
	e.RegisterWorkflow(workflows.CrawlWorkflow)
	e.RegisterWorkflowWithOptions(fake.SeedWorkflow, workflow.RegisterOptions{Name: "SnapshotWorkflow"})
	e.RegisterActivity(fake.Activities())
	e.SetCurrentHistoryLength(e.events)
	e.SetOnActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) {
		e.events += eventsPerPage
		e.SetCurrentHistoryLength(e.events)
	})
	e.SetOnLocalActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) {
		e.events++
		e.SetCurrentHistoryLength(e.events)
	})
	return e
}

// runCrawl runs the crawl to its end, one test environment per run, and
// returns the final status and the history events each run modelled.
func runCrawl(t *testing.T, fake *crawltest.Fake, in workflows.CrawlInput) (workflows.CrawlStatus, []int) {
	t.Helper()
	return runCrawlWith(t, fake, in, nil)
}

// runCrawlWith is runCrawl with setup applied to every run's environment.
func runCrawlWith(t *testing.T, fake *crawltest.Fake, in workflows.CrawlInput, setup func(*crawlEnv)) (workflows.CrawlStatus, []int) {
	t.Helper()
	var perRun []int
	for run := 1; ; run++ {
		require.Less(t, run, 1000, "the crawl does not end")
		env := newCrawlEnv(t, fake)
		if setup != nil {
			setup(env)
		}
		env.ExecuteWorkflow(workflows.CrawlWorkflow, in)
		require.True(t, env.IsWorkflowCompleted())
		perRun = append(perRun, env.events)
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			require.Equal(t, "CrawlWorkflow", can.WorkflowType.Name)
			var next workflows.CrawlInput
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
			require.NotNil(t, next.Carry)
			require.Equal(t, run+1, next.Carry.Run)
			in = next
			continue
		}
		require.NoError(t, err)
		var st workflows.CrawlStatus
		require.NoError(t, env.GetWorkflowResult(&st))
		return st, perRun
	}
}

func TestCrawlRunsEveryPageOnce(t *testing.T) {
	fake := crawltest.New(300, 3)
	fake.TransientOnce = map[int64]bool{5: true, 40: true}
	in := crawlInput(8)
	in.Rules = scope.Rules{{Pattern: "/calendar/", Skip: scope.Bool(true)}}
	st, runs := runCrawl(t, fake, in)
	assert.Len(t, runs, 1)
	r := fake.Report()
	assert.Equal(t, int64(300), r.Known)
	assert.Equal(t, int64(300), r.Done, "every page ends")
	assert.Empty(t, r.Twice, "no page ends twice")
	assert.Equal(t, int64(301), r.Runs, "299 pages, two retried once")
	assert.Equal(t, model.StateFinished, r.Final)
	assert.Equal(t, []int64{0}, r.Rules, "the initial rules are stored for the hosts")
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, int64(300), st.Counts.Done)
	assert.Equal(t, int64(0), st.Counts.Queued())
	assert.True(t, st.SeedDone)
	assert.Equal(t, []string{"host-1", "host-seed"}, st.Hosts, "every host that ran a page is torn down")
	assert.Contains(t, r.States, model.StateActive)
}

// TestCrawlHistoryStaysBoundedAt100000Pages crawls 100,000 no-op pages:
// every run stays under the history budget (modelled, see crawlEnv), the
// run hands everything on, every page ends exactly once. It takes about a
// minute; under the race detector (CI) it crawls 20,000 pages (15 runs),
// with -short 10,000.
func TestCrawlHistoryStaysBoundedAt100000Pages(t *testing.T) {
	pages := int64(100_000)
	switch {
	case testing.Short():
		pages = 10_000
	case raceEnabled:
		pages = 20_000
	}
	fake := crawltest.New(pages, 10)
	in := crawlInput(50)
	costs := &costInterceptor{}
	st, runs := runCrawlWith(t, fake, in, costs.install)
	r := fake.Report()
	assert.Equal(t, pages, r.Done)
	assert.Empty(t, r.Twice)
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, len(runs), st.Run)
	assert.Equal(t, pages-1, st.PagesLaunched)
	for i, n := range runs {
		// A run stops launching at the budget and drains what is in
		// flight: at most one claim's pages more.
		assert.LessOrEqual(t, n, in.Timing.HistoryEvents+eventsPerPage*in.Settings.Concurrency+100, "run %d", i+1)
	}
	assert.Less(t, max(runs[0], runs[len(runs)-1]), 10_000)
	// A workflow task's work does not grow with the crawl: every task
	// runs every live coroutine, the run's own few (signals, cancel,
	// writes, pages, the attribute timer, a teardown per host) whatever
	// the pages in flight (a coroutine per page made them 50 more here),
	// and each run is handed on as much as the second was (give or take
	// the counts' digits).
	require.Len(t, costs.runs, len(runs))
	for i, rc := range costs.runs {
		assert.LessOrEqual(t, rc.maxLive, 10, "run %d: coroutines alive at once", i+1)
		if i > 0 {
			assert.LessOrEqual(t, rc.inputBytes, costs.runs[1].inputBytes+32, "run %d: carried input", i+1)
		}
	}
	last := costs.runs[len(costs.runs)-1]
	t.Logf("%d pages in %d runs; modelled events per run: first %d, last %d; coroutines alive at once: first run %d, last %d; input bytes: second run %d, last %d",
		pages, len(runs), runs[0], runs[len(runs)-1], costs.runs[0].maxLive, last.maxLive, costs.runs[1].inputBytes, last.inputBytes)
}

func TestCrawlAbortReleasesPagesInFlight(t *testing.T) {
	fake := crawltest.New(50, 5)
	env := newCrawlEnv(t, fake)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalAbort, workflows.AbortRequest{Reason: "test", By: "me"})
	}, time.Minute)
	// Pages take an hour: the abort finds them in flight.
	env.OnActivity("RunPage", mock.Anything, mock.Anything).After(time.Hour).Return(
		func(ctx context.Context, in activities.RunPageInput) (activities.PageResult, error) {
			return activities.PageResult{}, ctx.Err()
		})
	env.ExecuteWorkflow(workflows.CrawlWorkflow, crawlInput(4))
	require.NoError(t, env.GetWorkflowError())
	var st workflows.CrawlStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, model.StateAborted, st.State)
	assert.Equal(t, "aborted: test (by me)", st.Error)
	assert.Zero(t, st.Counts.Claimed, "the stopped pages' claims are released")
	assert.Equal(t, int64(5), st.Counts.Ready, "the start page's five links, four of them released")
	assert.Equal(t, int64(1), st.Counts.Done)
	assert.Equal(t, model.StateAborted, fake.Report().Final)
}

// retryInput is the input internal/submit.Rerun gives the retry of a
// crawl that ended with st.
func retryInput(st workflows.CrawlStatus, failed int64) workflows.CrawlInput {
	in := crawlInput(8)
	in.Settings = st.Settings
	in.Rerun = &workflows.CrawlRerun{PreviousRunID: "run-1", Pages: failed, SettingsVersion: st.SettingsVersion, Rules: st.Rules}
	return in
}

// A crawl whose pages 4 and 7 failed is retried: the new run reopens the
// job, requeues the failed pages, fetches only them and the pages they now
// discover, and ends finished; no other page runs again.
func TestCrawlRetryRunsOnlyTheFailedPages(t *testing.T) {
	fake := crawltest.New(30, 3)
	fake.Failing = map[int64]bool{4: true, 7: true}
	st, _ := runCrawl(t, fake, crawlInput(8))
	require.Equal(t, model.StateFinished, st.State, "failed pages other than the start page do not fail the crawl")
	r := fake.Report()
	require.Equal(t, int64(2), r.Failed)
	require.Equal(t, int64(24), r.Known, "4's and 7's links were never found")
	require.Empty(t, r.Reopens)

	fake.Fix()
	fake.NewRun()
	st, _ = runCrawl(t, fake, retryInput(st, 2))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	r = fake.Report()
	assert.Equal(t, int64(30), r.Known)
	assert.Equal(t, int64(30), r.Done)
	assert.Zero(t, r.Failed)
	assert.Empty(t, r.Twice)
	assert.Equal(t, []string{"default-test-run-id/reopen"}, r.Reopens, "the job is reopened once")
	assert.Equal(t, 2, r.PageRuns[4])
	assert.Equal(t, 2, r.PageRuns[7])
	for id := int64(2); id <= 30; id++ {
		if id != 4 && id != 7 {
			assert.Equal(t, 1, r.PageRuns[id], "page %d runs once over both runs", id)
		}
	}
	assert.Empty(t, r.Rules, "the retry does not store its rules again")
	assert.Equal(t, model.StateFinished, r.Final)
	assert.Equal(t, int64(30), st.Counts.Done)
}

// A crawl whose start page failed ends failed; its retry runs the start
// page again as the start page (the seed snapshot) and crawls on.
func TestCrawlRetryRunsAFailedStartPageAgain(t *testing.T) {
	fake := crawltest.New(10, 3)
	fake.Failing = map[int64]bool{1: true}
	st, _ := runCrawl(t, fake, crawlInput(4))
	require.Equal(t, model.StateFailed, st.State)
	require.Contains(t, st.Error, "start page failed")

	fake.Fix()
	fake.NewRun()
	st, _ = runCrawl(t, fake, retryInput(st, 1))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Empty(t, st.Error)
	r := fake.Report()
	assert.Equal(t, int64(10), r.Done)
	assert.Zero(t, r.Failed)
	assert.True(t, st.SeedDone)
}

func TestCrawlRetryInputIsValidated(t *testing.T) {
	in := crawlInput(4)
	in.Rerun = &workflows.CrawlRerun{PreviousRunID: "r"}
	assert.ErrorContains(t, in.Validate(), "pages 0: must be >= 1 (no page failed)")
	in.Rerun = &workflows.CrawlRerun{Pages: 1}
	assert.ErrorContains(t, in.Validate(), "previous_run_id must not be empty")
	in.Rerun = &workflows.CrawlRerun{PreviousRunID: "r", Pages: 1}
	assert.NoError(t, in.Validate())
}

// TestCrawlRefusesAnOutOfRangeConcurrency: `starter set IDENT
// concurrency=999999` (the update) and ArchiveBot's bot (the signal) ask a
// running crawl for more than model.MaxConcurrency: both are refused, the
// crawl keeps its settings and finishes every page (before, the frontier's
// claim refused the count and the crawl failed).
func TestCrawlRefusesAnOutOfRangeConcurrency(t *testing.T) {
	fake := crawltest.New(40, 4)
	var rejected error
	st, _ := runCrawlWith(t, fake, crawlInput(4), func(env *crawlEnv) {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(workflows.SignalSetSettings, model.Settings{Concurrency: 999999})
			env.UpdateWorkflow(workflows.UpdateSetSettings, "huge", &testsuite.TestUpdateCallback{
				OnAccept:   func() { t.Error("concurrency 999999 accepted") },
				OnReject:   func(err error) { rejected = err },
				OnComplete: func(any, error) {},
			}, model.Settings{Concurrency: model.MaxConcurrency + 1})
		}, time.Millisecond)
	})
	require.Error(t, rejected)
	assert.Contains(t, rejected.Error(), "concurrency 1001: must be 0..1000 (0 pauses the job)")
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Equal(t, int64(40), st.Counts.Done)
	assert.Equal(t, 4, st.Settings.Concurrency, "the crawl keeps its settings")
}

// TestCrawlTeardownSkipsADeadHost: a host the registry reports gone (its
// worker was killed mid-crawl) gets no teardown, so the finished crawl is
// not held until its queue's schedule-to-start timeout; the live host is
// torn down as before.
func TestCrawlTeardownSkipsADeadHost(t *testing.T) {
	fake := crawltest.New(30, 3)
	st, _ := runCrawl(t, fake, crawlInput(4))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	assert.ElementsMatch(t, []string{"host-1", "host-seed"}, fake.Report().Teardowns, "every live host is torn down")

	fake = crawltest.New(30, 3)
	fake.Dead = map[string]bool{"host-1": true}
	st, _ = runCrawl(t, fake, crawlInput(4))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Equal(t, []string{"host-seed"}, fake.Report().Teardowns, "the dead host is skipped")
	assert.Equal(t, []string{"host-1", "host-seed"}, st.Hosts, "status still lists every host that ran a page")
}

// TestCrawlSealWritesItsWACZOnAHostTheTeardownReached: after the
// teardown, the crawl's WACZ is written once, on the first setup host the
// teardown reached, given every host's reported WARC files (a dead host
// reports none and is never asked).
func TestCrawlSealWritesItsWACZOnAHostTheTeardownReached(t *testing.T) {
	fake := crawltest.New(30, 3)
	st, _ := runCrawl(t, fake, crawlInput(4))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	seals := fake.Report().Seals
	require.Len(t, seals, 1)
	assert.Contains(t, []string{"host-1", "host-seed"}, seals[0].Queue)
	names := []string{}
	for _, w := range seals[0].Input.Reported {
		names = append(names, w.Name)
	}
	assert.ElementsMatch(t, []string{"job-host-1-00001.warc.gz", "job-host-seed-00001.warc.gz"}, names)
	assert.Equal(t, crawlInput(4).Crawl.Job.URL, seals[0].Input.URL)
	ar := fake.Report().Archives
	require.Len(t, ar, 1, "the workflow records where the WACZ is")
	assert.Equal(t, activities.ArchiveInput{Ident: seals[0].Input.Ident, WACZ: "/archive/crawls/" + seals[0].Input.Ident + "/" + seals[0].Input.Ident + ".wacz",
		Host: "h", Missing: 1}, ar[0])

	fake = crawltest.New(30, 3)
	fake.Dead = map[string]bool{"host-1": true}
	st, _ = runCrawl(t, fake, crawlInput(4))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	seals = fake.Report().Seals
	require.Len(t, seals, 1)
	assert.Equal(t, "host-seed", seals[0].Queue, "the dead host is not asked")
	require.Len(t, seals[0].Input.Reported, 1)
}

// TestPausedCrawlStartsItsStartPageWhenResumed: a crawl submitted with
// concurrency 0 (`submit --concurrency 0`: queued paused) runs nothing,
// its start page included, until it is resumed; the start page then runs
// with the crawl's settings of then, and later changes reach it too.
func TestPausedCrawlStartsItsStartPageWhenResumed(t *testing.T) {
	fake := crawltest.New(20, 3)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.CrawlWorkflow)
	var seedStarted time.Time
	var seedSettings model.Settings
	var seedSignals []model.Settings
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in workflows.SnapshotInput) (workflows.Status, error) {
		seedStarted, seedSettings = workflow.Now(ctx), in.Settings
		ch := workflow.GetSignalChannel(ctx, workflows.SignalSetSettings)
		for {
			var set model.Settings
			ok, _ := ch.ReceiveWithTimeout(ctx, time.Hour, &set)
			if !ok {
				break
			}
			seedSignals = append(seedSignals, set)
		}
		return workflows.Status{Ident: in.Job.Ident, URL: in.Job.URL, State: model.StateFinished, HostQueue: "host-seed"}, nil
	}, workflow.RegisterOptions{Name: "SnapshotWorkflow"})
	env.RegisterActivity(fake.Activities())
	start := env.Now()
	update := func(name string, set model.Settings) {
		env.UpdateWorkflow(workflows.UpdateSetSettings, name, &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("%s rejected: %v", name, err) }, OnComplete: func(any, error) {},
		}, set)
	}
	env.RegisterDelayedCallback(func() { update("resume", model.Settings{Concurrency: 4, UserAgent: "ua/resumed"}) }, 10*time.Minute)
	env.RegisterDelayedCallback(func() { update("slower", model.Settings{Concurrency: 2, DelayMinMS: 5, DelayMaxMS: 5}) }, 20*time.Minute)
	env.ExecuteWorkflow(workflows.CrawlWorkflow, crawlInput(0))
	require.NoError(t, env.GetWorkflowError())
	var st workflows.CrawlStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Equal(t, int64(20), st.Counts.Done)
	assert.GreaterOrEqual(t, seedStarted.Sub(start), 10*time.Minute, "the start page waited for the crawl to be resumed")
	assert.Equal(t, model.Settings{Concurrency: 4, UserAgent: "ua/resumed"}, seedSettings, "the start page runs with the crawl's settings")
	assert.Equal(t, []model.Settings{{Concurrency: 2, DelayMinMS: 5, DelayMaxMS: 5}}, seedSignals, "a later change reaches the running start page")
}

// TestCrawlPageActivityFailureIsRecorded: a page whose activity fails for
// good (its attempts used up: a worker killed on the last one) is
// recorded failed by the workflow, and the crawl finishes. It used to
// panic every workflow task (a blocking call on the wrong coroutine's
// context) and never finish.
func TestCrawlPageActivityFailureIsRecorded(t *testing.T) {
	fake := crawltest.New(20, 3)
	acts := fake.Activities()
	env := newCrawlEnv(t, fake)
	env.OnActivity("RunPage", mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunPageInput) (activities.PageResult, error) {
			if in.Page.ID == 3 {
				return activities.PageResult{}, temporal.NewNonRetryableApplicationError("worker lost", "test", nil)
			}
			return acts.RunPage(ctx, in)
		})
	env.ExecuteWorkflow(workflows.CrawlWorkflow, crawlInput(4))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var st workflows.CrawlStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, int64(1), fake.Report().Failed, "page 3 recorded failed")
}
