package workflows_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/crawltest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestCrawlPagesWaitForTheirLaterRetries: a page whose attempts end
// transiently waits for its later retry instead of failing and then
// succeeds; one that keeps failing is failed after its last delay. The
// crawl waits hours for them on durable timers in one run (polling every
// second would have filled many histories), every page ends once, and
// the job is in the retry_at set while pages wait, out of it at the end.
func TestCrawlPagesWaitForTheirLaterRetries(t *testing.T) {
	fake := crawltest.New(30, 3)
	fake.LaterTransient = map[int64]int{5: 1, 7: 3}
	in := crawlInput(4)
	in.PageRetryLater = []time.Duration{time.Hour, 6 * time.Hour}
	var started, ended time.Time
	st, perRun := runCrawlWith(t, fake, in, func(env *crawlEnv) {
		fake.SetClock(env.Now)
		started = env.Now()
		env.RegisterDelayedCallback(func() { ended = env.Now() }, 7*time.Hour-time.Minute)
	})
	require.Equal(t, model.StateFinished, st.State)
	require.Len(t, perRun, 1, "the waits took no polling")
	require.False(t, ended.IsZero(), "the crawl ran past both delays: %s", ended.Sub(started))
	r := fake.Report()
	assert.EqualValues(t, 27, r.Done, "every page discovered (page 7's three children never are) ended")
	assert.Equal(t, r.Known, r.Done)
	assert.EqualValues(t, 1, r.Failed, "page 7 failed after its last later retry, and only then")
	assert.Empty(t, r.Twice)
	assert.Equal(t, 2, r.PageRuns[5], "page 5: its round, then its later retry")
	assert.Equal(t, 3, r.PageRuns[7], "page 7: its round and both later retries")
	assert.EqualValues(t, 0, st.Counts.Waiting)
	assert.EqualValues(t, 26, st.Counts.Succeeded)
	require.NotEmpty(t, r.RetryAt)
	assert.False(t, r.RetryAt[0].IsZero(), "indexed in retry_at while pages wait")
	assert.True(t, r.RetryAt[len(r.RetryAt)-1].IsZero(), "out of retry_at at the end")
}

// TestCrawlAbortEndsTheLaterWait: an abort while a page, or the start
// page, waits ends the wait at once; the page is failed (its later retry
// not run), the crawl aborted.
func TestCrawlAbortEndsTheLaterWait(t *testing.T) {
	for _, start := range []bool{false, true} {
		t.Run(map[bool]string{false: "page", true: "start page"}[start], func(t *testing.T) {
			fake := crawltest.New(10, 3)
			if start {
				fake.SeedTransient = 1
			} else {
				fake.LaterTransient = map[int64]int{4: 1}
			}
			in := crawlInput(4)
			in.PageRetryLater = []time.Duration{24 * time.Hour}
			st, perRun := runCrawlWith(t, fake, in, func(env *crawlEnv) {
				fake.SetClock(env.Now)
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(workflows.SignalAbort, workflows.AbortRequest{Reason: "test", By: "me"})
				}, time.Hour)
			})
			require.Equal(t, model.StateAborted, st.State)
			require.Len(t, perRun, 1)
			r := fake.Report()
			assert.EqualValues(t, 1, r.Failed)
			assert.Equal(t, 1, r.SeedRuns)
			if !start {
				assert.Equal(t, 1, r.PageRuns[4], "never retried")
			}
			assert.EqualValues(t, 0, st.Counts.Waiting)
			require.NotEmpty(t, r.RetryAt)
			assert.True(t, r.RetryAt[len(r.RetryAt)-1].IsZero(), "out of retry_at")
		})
	}
}

// TestCrawlWithoutLaterRetriesFailsAtOnce: without PageRetryLater (every
// input before it) a page whose attempts ran out fails, and retry_at is
// never written.
func TestCrawlWithoutLaterRetriesFailsAtOnce(t *testing.T) {
	fake := crawltest.New(10, 3)
	fake.LaterTransient = map[int64]int{4: 1}
	st, _ := runCrawlWith(t, fake, crawlInput(4), func(env *crawlEnv) { fake.SetClock(env.Now) })
	require.Equal(t, model.StateFinished, st.State)
	r := fake.Report()
	assert.EqualValues(t, 1, r.Failed)
	assert.Equal(t, 1, r.PageRuns[4])
	assert.Empty(t, r.RetryAt)
}

// TestCrawlStartPageWaitsForItsLaterRetries: a start page whose snapshot
// ends with a hook whose attempts all ended transiently waits for a later
// retry (the job in retry_at meanwhile) and runs again as the start page
// when due, twice here; the third snapshot succeeds and the crawl goes on
// with its links, in one run.
func TestCrawlStartPageWaitsForItsLaterRetries(t *testing.T) {
	fake := crawltest.New(30, 3)
	fake.SeedTransient = 2
	in := crawlInput(4)
	in.PageRetryLater = []time.Duration{time.Hour, 6 * time.Hour}
	var ended time.Time
	st, perRun := runCrawlWith(t, fake, in, func(env *crawlEnv) {
		fake.SetClock(env.Now)
		env.RegisterDelayedCallback(func() { ended = env.Now() }, 7*time.Hour-time.Minute)
	})
	require.Equal(t, model.StateFinished, st.State, st.Error)
	require.Len(t, perRun, 1)
	require.False(t, ended.IsZero(), "the start page waited both delays")
	r := fake.Report()
	assert.Equal(t, 3, r.SeedRuns, "the start page ran three times, as the start page")
	assert.Equal(t, []bool{true, true, false}, r.SeedTransient)
	assert.EqualValues(t, 30, r.Done, "its links were crawled once it succeeded")
	assert.Zero(t, r.Failed)
	assert.Empty(t, r.Twice)
	assert.Zero(t, r.PageRuns[1], "never run as an ordinary page")
	require.NotEmpty(t, r.RetryAt)
	assert.False(t, r.RetryAt[0].IsZero(), "indexed in retry_at while it waits")
	assert.True(t, r.RetryAt[len(r.RetryAt)-1].IsZero(), "out of retry_at at the end")
}

// TestCrawlStartPageFailsAfterItsLastLaterRetry: a start page that still
// ends transiently after its last delay is failed, and the crawl ends
// failed as with any failed start page.
func TestCrawlStartPageFailsAfterItsLastLaterRetry(t *testing.T) {
	fake := crawltest.New(30, 3)
	fake.SeedTransient = 5
	in := crawlInput(4)
	in.PageRetryLater = []time.Duration{time.Hour}
	st, _ := runCrawlWith(t, fake, in, func(env *crawlEnv) { fake.SetClock(env.Now) })
	require.Equal(t, model.StateFailed, st.State)
	assert.Contains(t, st.Error, "start page failed: ended transiently: pagefetch/on_Snapshot__10_pagefetch.py: 503 Service Unavailable")
	r := fake.Report()
	assert.Equal(t, 2, r.SeedRuns)
	assert.EqualValues(t, 1, r.Failed)
	assert.EqualValues(t, 1, r.Done)
	require.NotEmpty(t, r.RetryAt)
	assert.True(t, r.RetryAt[len(r.RetryAt)-1].IsZero(), "out of retry_at")
}

// TestCrawlStartPageWithoutLaterRetries: without PageRetryLater a start
// page whose hook ended transiently is completed as before, once.
func TestCrawlStartPageWithoutLaterRetries(t *testing.T) {
	fake := crawltest.New(10, 3)
	fake.SeedTransient = 1
	st, _ := runCrawl(t, fake, crawlInput(4))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	r := fake.Report()
	assert.Equal(t, 1, r.SeedRuns)
	assert.Equal(t, []bool{false}, r.SeedTransient)
	assert.Empty(t, r.RetryAt)
}

// TestCrawlIsWaitingOnlyWhenOnlyWaitingPagesAreLeft: a page that waits
// early does not put the crawl in retry_at while other pages still run;
// it is indexed once nothing else is left (the crawl then shows as
// waiting), and taken out when the page runs again.
func TestCrawlIsWaitingOnlyWhenOnlyWaitingPagesAreLeft(t *testing.T) {
	fake := crawltest.New(30, 3)
	fake.LaterTransient = map[int64]int{2: 1}
	in := crawlInput(2)
	in.PageRetryLater = []time.Duration{time.Hour}
	st, _ := runCrawlWith(t, fake, in, func(env *crawlEnv) { fake.SetClock(env.Now) })
	require.Equal(t, model.StateFinished, st.State, st.Error)
	r := fake.Report()
	require.Len(t, r.RetryAt, 2, "indexed once, taken out once")
	assert.False(t, r.RetryAt[0].IsZero())
	assert.EqualValues(t, 17, r.RetryAtDone[0], "indexed when every other known page was done (page 2's 12 descendants come after it)")
	assert.True(t, r.RetryAt[1].IsZero())
	assert.Equal(t, 2, r.PageRuns[2])
}

// TestCrawlContinuedAsNewLeavesNoStaleWait: a run that hands on right
// after its wait (its history full meanwhile) leaves the crawl in
// retry_at; the next run, which claims the page then due, takes it out.
func TestCrawlContinuedAsNewLeavesNoStaleWait(t *testing.T) {
	fake := crawltest.New(30, 3)
	fake.LaterTransient = map[int64]int{2: 1}
	in := crawlInput(2)
	in.PageRetryLater = []time.Duration{time.Hour}
	var prev *crawlEnv
	st, perRun := runCrawlWith(t, fake, in, func(env *crawlEnv) {
		if prev != nil {
			env.SetStartTime(prev.Now()) // the clock goes on across runs
		} else {
			env.RegisterDelayedCallback(func() {
				env.events = 100000 // full during the wait: the run hands on after it
				env.SetCurrentHistoryLength(env.events)
			}, 30*time.Minute)
		}
		prev = env
		fake.SetClock(env.Now)
	})
	require.Equal(t, model.StateFinished, st.State, st.Error)
	require.Len(t, perRun, 2, "the crawl continued as new after its wait")
	r := fake.Report()
	require.Len(t, r.RetryAt, 2, "indexed by the first run, out by the second: %v", r.RetryAt)
	assert.False(t, r.RetryAt[0].IsZero())
	assert.True(t, r.RetryAt[1].IsZero())
	assert.Equal(t, 2, r.PageRuns[2])
}

// TestCrawlShowsWaitingWhileOnlyWaitingPagesAreLeft: while nothing but a
// page waiting for its later retry is left, the crawl's status query says
// StateWaiting with the due time, its ArchiveflowState search attribute
// waiting and its details line "waiting (retry at …)"; when the page runs
// again it shows active, and finished at the end.
func TestCrawlShowsWaitingWhileOnlyWaitingPagesAreLeft(t *testing.T) {
	fake := crawltest.New(30, 3)
	fake.LaterTransient = map[int64]int{2: 1}
	in := crawlInput(2)
	in.PageRetryLater = []time.Duration{time.Hour}
	var states *[]string
	var during workflows.CrawlStatus
	var details string
	var started time.Time
	st, _ := runCrawlWith(t, fake, in, func(env *crawlEnv) {
		fake.SetClock(env.Now)
		started = env.Now()
		states = workflows.WatchShownStates(env.TestWorkflowEnvironment)
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(workflows.QueryStatus)
			require.NoError(t, err)
			require.NoError(t, v.Get(&during))
			details = workflows.CurrentDetails(t, env.TestWorkflowEnvironment)
		}, 30*time.Minute)
	})
	require.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Nil(t, st.RetryAt, "not waiting at the end")
	assert.Equal(t, workflows.StateWaiting, during.State)
	require.NotNil(t, during.RetryAt)
	assert.WithinDuration(t, started.Add(time.Hour), *during.RetryAt, time.Minute)
	assert.Contains(t, details, "waiting (retry at "+during.RetryAt.UTC().Format(time.DateTime)+" UTC)")
	w := slices.Index(*states, "waiting")
	require.GreaterOrEqual(t, w, 0, "the search attribute said waiting: %v", *states)
	assert.Contains(t, (*states)[w+1:], "active", "active again once the page runs: %v", *states)
	assert.Equal(t, "finished", (*states)[len(*states)-1])
	assert.Equal(t, 1, workflows.CountOf(*states, "waiting"), "waiting once: only while nothing else was left")
}

// TestCrawlContinueRunsAWaitingStartPageAsTheStartPage: a crawl that
// reached its duration limit while its start page waited for a later
// retry leaves it READY; continued (retry --continue, the limit lifted),
// the new run waits for it and runs it as the start page (the seed
// snapshot, never an ordinary page), then crawls its links.
func TestCrawlContinueRunsAWaitingStartPageAsTheStartPage(t *testing.T) {
	fake := crawltest.New(30, 3)
	fake.SeedTransient = 1
	in := crawlInput(4)
	in.PageRetryLater = []time.Duration{time.Hour}
	in.Settings.MaxDuration = 30 * time.Minute
	var last *crawlEnv
	st, _ := runCrawlWith(t, fake, in, func(env *crawlEnv) {
		fake.SetClock(env.Now)
		last = env
	})
	require.Equal(t, model.StateFinished, st.State, st.Error)
	require.Equal(t, "duration limit 30m0s reached", st.Limit)
	assert.EqualValues(t, 1, st.Counts.Waiting, "the start page still waits")
	assert.Equal(t, 1, fake.Report().SeedRuns)

	fake.NewRun()
	next := retryInput(st, 0)
	next.Rerun.Continue = true
	next.Settings.MaxDuration = 0
	next.PageRetryLater = in.PageRetryLater
	var waited workflows.CrawlStatus
	st, _ = runCrawlWith(t, fake, next, func(env *crawlEnv) {
		env.SetStartTime(last.Now()) // the clock goes on
		fake.SetClock(env.Now)
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(workflows.QueryStatus)
			require.NoError(t, err)
			require.NoError(t, v.Get(&waited))
		}, 10*time.Minute)
	})
	require.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Equal(t, workflows.StateWaiting, waited.State, "the continued crawl waits for its start page")
	assert.False(t, waited.SeedDone)
	r := fake.Report()
	assert.Equal(t, 2, r.SeedRuns, "run again as the start page")
	assert.Equal(t, []bool{true, false}, r.SeedTransient)
	assert.Zero(t, r.PageRuns[1], "never run as an ordinary page")
	assert.EqualValues(t, 30, r.Done, "its links were crawled")
	assert.Zero(t, r.Failed)
	assert.Empty(t, r.Twice)
	assert.True(t, st.SeedDone)
}
