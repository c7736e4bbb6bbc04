package activities

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
)

// batchStore is a CrawlStore for page batches: live settings the test
// changes, the completions and releases it records.
type batchStore struct {
	CrawlStore
	mu        sync.Mutex
	live      LiveSettings
	completed map[int64]string // page → status
	flushes   []int            // pages per RecordPages call
	released  []int64
	skipped   []int64
}

func (s *batchStore) LiveSettings(context.Context, string) (LiveSettings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live, nil
}

func (s *batchStore) setConcurrency(n int) {
	s.mu.Lock()
	s.live.Concurrency = n
	s.mu.Unlock()
}

func (s *batchStore) RefusedLinks([]Link) []RefusedLink { return nil }

func (s *batchStore) RecordPages(_ context.Context, _ string, ws []PageWrite) ([]PageWritten, PageCounts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushes = append(s.flushes, len(ws))
	for _, w := range ws {
		if _, ok := s.completed[w.PageID]; ok {
			return nil, PageCounts{}, fmt.Errorf("page %d completed twice", w.PageID)
		}
		s.completed[w.PageID] = w.Status
	}
	return make([]PageWritten, len(ws)), PageCounts{Done: int64(len(s.completed))}, nil
}

func (s *batchStore) Counts(context.Context, string) (PageCounts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return PageCounts{Done: int64(len(s.completed))}, nil
}

func (s *batchStore) Release(_ context.Context, _ string, ids []int64) (PageCounts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, ids...)
	return PageCounts{Done: int64(len(s.completed)), Ready: int64(len(ids))}, nil
}

func (s *batchStore) Skip(_ context.Context, _ string, id int64, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skipped = append(s.skipped, id)
	return nil
}

// batchRunner is a PageRunner whose pages take a little time; it keeps
// the most pages it ran at once and calls onPage after each.
type batchRunner struct {
	PageRunner
	mu        sync.Mutex
	now, most int
	ran       []int64
	uas       map[int64]string
	onPage    func(ran int)
	hang      int64         // a page that runs until its context ends
	gate      chan struct{} // when set, every page runs until it is closed
	hostNow   map[string]int
	hostMost  map[string]int
}

func (r *batchRunner) RunPage(ctx context.Context, run PageRun) (PageOutcome, error) {
	host, _, _ := strings.Cut(strings.TrimPrefix(run.Page.URL, "http://"), "/")
	r.mu.Lock()
	r.now++
	r.most = max(r.most, r.now)
	if r.hostNow != nil {
		r.hostNow[host]++
		r.hostMost[host] = max(r.hostMost[host], r.hostNow[host])
	}
	r.mu.Unlock()
	switch {
	case run.Page.ID == r.hang:
		<-ctx.Done()
	case r.gate != nil:
		select {
		case <-r.gate:
		case <-ctx.Done():
		}
	default:
		time.Sleep(5 * time.Millisecond)
	}
	r.mu.Lock()
	r.now--
	if r.hostNow != nil {
		r.hostNow[host]--
	}
	r.ran = append(r.ran, run.Page.ID)
	if r.uas != nil {
		r.uas[run.Page.ID] = run.Page.UA
	}
	n := len(r.ran)
	r.mu.Unlock()
	if r.onPage != nil {
		r.onPage(n)
	}
	return PageOutcome{Status: PageSucceeded}, nil
}

func batchPages(n int) []PageSpec {
	ps := make([]PageSpec, n)
	for i := range ps {
		ps[i] = PageSpec{ID: int64(i + 2), URL: fmt.Sprintf("http://site.test/p%d", i+2), Depth: 1, Attempt: 1}
	}
	return ps
}

func runBatch(t *testing.T, store *batchStore, runner *batchRunner, in RunPageBatchInput) (BatchResult, error) {
	t.Helper()
	return runBatchWith(t, store, runner, in, CrawlOptions{})
}

// runBatchWith is runBatch with the per-host options and heartbeat
// interval of opts; setup, when given, prepares the test environment.
func runBatchWith(t *testing.T, store *batchStore, runner *batchRunner, in RunPageBatchInput, opts CrawlOptions,
	setup ...func(*testsuite.TestActivityEnvironment)) (BatchResult, error) {
	t.Helper()
	a, err := NewCrawl(store, runner, "host-q", nil, nil, CrawlOptions{HeartbeatInterval: cmp.Or(opts.HeartbeatInterval, time.Second),
		LiveInterval: time.Millisecond, WriteTimeout: time.Second, LogLineBytes: 300,
		HostConcurrency: opts.HostConcurrency, HostLimits: opts.HostLimits})
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	for _, f := range setup {
		f(env)
	}
	env.RegisterActivity(a)
	if in.Crawl.Job.Ident == "" {
		in.Crawl = Crawl{Job: Job{Ident: "c1", URL: "http://site.test/"}, MaxDepth: -1, PageAttempts: 3}
	}
	if in.PageTimeout == 0 {
		in.PageTimeout = time.Minute
	}
	if in.Budget == 0 {
		in.Budget = time.Minute
	}
	v, err := env.ExecuteActivity(a.RunPageBatch, in)
	if err != nil {
		return BatchResult{}, err
	}
	var res BatchResult
	require.NoError(t, v.Get(&res))
	return res, nil
}

func newBatchStore(concurrency int) *batchStore {
	return &batchStore{live: LiveSettings{Concurrency: concurrency, DelayMinMS: -1, DelayMaxMS: -1}, completed: map[int64]string{}}
}

// TestPageBatchKeepsToTheLiveConcurrency: a batch runs every page once,
// never more at once than the job's live concurrency (not the one it was
// launched with), and records each.
func TestPageBatchKeepsToTheLiveConcurrency(t *testing.T) {
	store, runner := newBatchStore(3), &batchRunner{}
	res, err := runBatch(t, store, runner, RunPageBatchInput{Pages: batchPages(12), Settings: model.Settings{Concurrency: 8}})
	require.NoError(t, err)
	assert.Equal(t, 12, res.Ran)
	assert.Equal(t, map[string]int{PageSucceeded: 12}, res.Statuses)
	assert.Len(t, store.completed, 12, "every page recorded once")
	assert.Equal(t, 3, runner.most, "the live concurrency, reached and never passed")
	assert.Empty(t, store.released)
	assert.Equal(t, "host-q", res.HostQueue)
	assert.Equal(t, int64(12), res.Counts.Done)
}

// TestPageBatchHeartbeatSaysWhichPagesRun: a batch's heartbeat says how
// many of its claimed pages are running and how many have not started
// (starter status splits a crawl's claimed pages so), at once when its
// first page starts, not a heartbeat interval later. (The SDK's activity
// test environment holds every later heartbeat back for 30 s, so this
// test sees the first.)
func TestPageBatchHeartbeatSaysWhichPagesRun(t *testing.T) {
	store, runner := newBatchStore(3), &batchRunner{gate: make(chan struct{})}
	beats := make(chan BatchProgress, 100)
	listen := func(env *testsuite.TestActivityEnvironment) {
		env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
			var p BatchProgress
			if details.Get(&p) == nil {
				beats <- p
			}
		})
	}
	done := make(chan error, 1)
	go func() {
		_, err := runBatchWith(t, store, runner, RunPageBatchInput{Pages: batchPages(12), Settings: model.Settings{Concurrency: 8}},
			CrawlOptions{HeartbeatInterval: time.Hour}, listen)
		done <- err
	}()
	select {
	case p := <-beats:
		assert.Equal(t, BatchProgress{Attempt: 1, PagesRunning: 1, PagesWaiting: 11}, p, "the first page runs, 11 wait")
	case <-time.After(30 * time.Second):
		t.Fatal("no heartbeat when the batch's first page started")
	}
	close(runner.gate)
	require.NoError(t, <-done)
}

// TestPageBatchKeepsToItsShare: a batch holding 4 of a concurrency of 8
// (crawl.batch_concurrency) runs 4 pages at once at most; the live
// concurrency lowered to 4 halves its share, to 1 leaves it none: it
// stops and releases its pages for a batch the lower concurrency allows.
func TestPageBatchKeepsToItsShare(t *testing.T) {
	store, runner := newBatchStore(8), &batchRunner{}
	in := RunPageBatchInput{Pages: batchPages(12), Settings: model.Settings{Concurrency: 8}, Share: 4, ShareOf: 8}
	res, err := runBatch(t, store, runner, in)
	require.NoError(t, err)
	assert.Equal(t, 12, res.Ran)
	assert.Equal(t, 4, runner.most, "its share, reached and never passed")

	store, runner = newBatchStore(4), &batchRunner{}
	_, err = runBatch(t, store, runner, in)
	require.NoError(t, err)
	assert.Equal(t, 2, runner.most, "half the concurrency, half the share")

	store, runner = newBatchStore(1), &batchRunner{}
	res, err = runBatch(t, store, runner, in)
	require.NoError(t, err)
	assert.Equal(t, batchLowered, res.Stopped)
	assert.Equal(t, 12, res.Released)

	// A batch launched after the concurrency fell below the shares in
	// flight holds 1 of an unreachable whole: it runs nothing.
	store, runner = newBatchStore(8), &batchRunner{}
	res, err = runBatch(t, store, runner, RunPageBatchInput{Pages: batchPages(3), Settings: model.Settings{Concurrency: 8}, Share: 1, ShareOf: math.MaxInt32})
	require.NoError(t, err)
	assert.Equal(t, batchLowered, res.Stopped)
	assert.Equal(t, 3, res.Released)
	assert.Zero(t, runner.most)
}

// TestPageBatchStopsWhenPaused: concurrency 0 in Redis stops a running
// batch: the pages in flight end and are recorded, the others are
// released, none is both.
func TestPageBatchStopsWhenPaused(t *testing.T) {
	store := newBatchStore(2)
	runner := &batchRunner{onPage: func(ran int) {
		if ran == 3 {
			store.setConcurrency(0)
		}
	}}
	res, err := runBatch(t, store, runner, RunPageBatchInput{Pages: batchPages(12), Settings: model.Settings{Concurrency: 2}})
	require.NoError(t, err)
	assert.Equal(t, batchPaused, res.Stopped)
	assert.GreaterOrEqual(t, res.Ran, 3)
	assert.Less(t, res.Ran, 12)
	assert.Equal(t, 12, res.Ran+res.Released, "every page ran or was released")
	for _, id := range store.released {
		_, ran := store.completed[id]
		assert.False(t, ran, "page %d released after it ran", id)
	}
}

// TestPageBatchStopsAtItsBudget: past its budget a batch starts no page.
func TestPageBatchStopsAtItsBudget(t *testing.T) {
	store, runner := newBatchStore(1), &batchRunner{}
	res, err := runBatch(t, store, runner, RunPageBatchInput{Pages: batchPages(500), Settings: model.Settings{Concurrency: 1},
		Budget: 50 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, batchBudget, res.Stopped)
	assert.Positive(t, res.Ran)
	assert.Positive(t, res.Released)
	assert.Equal(t, 500, res.Ran+res.Released)
}

// TestPageBatchAppliesNewerRules: rules newer than the batch's claim
// apply to its pages not started yet: a skip rule skips, a ua rule sets
// the user agent.
func TestPageBatchAppliesNewerRules(t *testing.T) {
	store, runner := newBatchStore(1), &batchRunner{uas: map[int64]string{}}
	store.live.Rules = scope.Versioned{Version: 2, Rules: scope.Rules{{Pattern: "/p5$", Skip: scope.Bool(true)}, {Pattern: "/p6$", UA: scope.String("other")}}}
	res, err := runBatch(t, store, runner, RunPageBatchInput{Pages: batchPages(6), Settings: model.Settings{Concurrency: 1}, RulesVersion: 1})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Skipped)
	assert.Equal(t, []int64{5}, store.skipped)
	assert.False(t, slices.Contains(runner.ran, 5), "the skipped page is not fetched")
	assert.Equal(t, "other", runner.uas[6])
	assert.Equal(t, 5, res.Ran)

	// The rules the pages were claimed with are not applied again.
	store, runner = newBatchStore(1), &batchRunner{uas: map[int64]string{}}
	store.live.Rules = scope.Versioned{Version: 2, Rules: scope.Rules{{Pattern: "/p5$", Skip: scope.Bool(true)}}}
	res, err = runBatch(t, store, runner, RunPageBatchInput{Pages: batchPages(6), Settings: model.Settings{Concurrency: 1}, RulesVersion: 2})
	require.NoError(t, err)
	assert.Zero(t, res.Skipped)
	assert.Equal(t, 6, res.Ran)
}

// TestPageBatchTimesOutAPage: a page past crawl.page_timeout ends
// transient (its attempt spent, retried later by the frontier); the
// batch goes on.
func TestPageBatchTimesOutAPage(t *testing.T) {
	store, runner := newBatchStore(2), &batchRunner{hang: 3}
	res, err := runBatch(t, store, runner, RunPageBatchInput{Pages: batchPages(4), Settings: model.Settings{Concurrency: 2},
		PageTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{PageSucceeded: 3, PageTransient: 1}, res.Statuses)
	assert.Equal(t, PageTransient, store.completed[3])
}

// TestPageBatchRefusesAnEmptyInput names what is missing.
func TestPageBatchRefusesAnEmptyInput(t *testing.T) {
	_, err := runBatch(t, newBatchStore(1), &batchRunner{}, RunPageBatchInput{})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "pages"), err.Error())
}

// TestPageBatchSharesItsSlotsAmongHosts: a batch runs no more of one
// host's pages at once than the host budget's concurrency (a host's own
// number first), so a slow host's pages in front of the line do not take
// every slot: the other host's pages run meanwhile.
func TestPageBatchSharesItsSlotsAmongHosts(t *testing.T) {
	store := newBatchStore(4)
	runner := &batchRunner{hostNow: map[string]int{}, hostMost: map[string]int{}}
	var ps []PageSpec
	for i := range 8 {
		ps = append(ps, PageSpec{ID: int64(i + 2), URL: fmt.Sprintf("http://slow.test/%d", i), Attempt: 1})
	}
	for i := range 8 {
		ps = append(ps, PageSpec{ID: int64(i + 10), URL: fmt.Sprintf("http://fast.test/%d", i), Attempt: 1})
	}
	res, err := runBatchWith(t, store, runner, RunPageBatchInput{Pages: ps, Settings: model.Settings{Concurrency: 4}},
		CrawlOptions{HostConcurrency: 3, HostLimits: map[string]int{"slow.test": 1}})
	require.NoError(t, err)
	assert.Equal(t, 16, res.Ran)
	assert.Equal(t, 1, runner.hostMost["slow.test"], "slow.test's own concurrency")
	assert.Equal(t, 3, runner.hostMost["fast.test"], "the default concurrency")
	first := slices.Index(runner.ran, 10)
	assert.Less(t, first, 4, "fast.test's first page ran among the first, behind slow.test's line (order %v)", runner.ran)
}

// TestPageBatchRecordsManyPagesPerWrite: a batch's ended pages are
// recorded together (pageSink), each exactly once, never more than
// sinkPages in one write, all of them before the batch returns.
func TestPageBatchRecordsManyPagesPerWrite(t *testing.T) {
	store, runner := newBatchStore(8), &batchRunner{}
	res, err := runBatch(t, store, runner, RunPageBatchInput{Pages: batchPages(300), Settings: model.Settings{Concurrency: 8}})
	require.NoError(t, err)
	assert.Equal(t, 300, res.Ran)
	assert.Len(t, store.completed, 300, "every page recorded once")
	total := 0
	for _, n := range store.flushes {
		assert.LessOrEqual(t, n, sinkPages)
		total += n
	}
	assert.Equal(t, 300, total)
	assert.LessOrEqual(t, len(store.flushes), 300/4, "several pages per write (writes: %v)", store.flushes)
}
