// Package crawltest owns a stand-in for a crawl's activities: a frontier
// of a generated tree of pages kept in memory, pages that take no time and
// fetch nothing. Workflow tests, the dev-server history test and
// bench/crawl register it in place of the real activities (same activity
// names) to measure CrawlWorkflow alone: history events per page, runs per
// crawl, Temporal server CPU per page.
package crawltest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/slotgate"
	"github.com/archiveflow/archiveflow/workflows"
)

// Fake is an in-memory crawl of Pages pages: page 1 is the start page,
// page i links pages Fanout*(i-1)+2 … Fanout*(i-1)+Fanout+1 (a complete
// tree, discovered in id order). Register its Activities in place of the
// real ones.
type Fake struct {
	Pages  int64
	Fanout int64
	// TransientOnce lists pages whose first attempt fails transiently.
	TransientOnce map[int64]bool
	// Failing lists pages whose attempts fail for good (DONE failed)
	// until Fix is called; a retry run requeues them (RequeueFailed).
	Failing map[int64]bool
	// Dead lists host queues whose host HostAlive reports gone.
	Dead map[string]bool
	// Stale lists host queues whose host died moments ago: HostLiveness
	// reports it alive with the given lease on the first check, gone on
	// every later one (its record expired meanwhile).
	Stale map[string]time.Duration
	// PageBytes is what each completed page adds to bytes_downloaded
	// (a crawl's byte limit, ClaimInput.MaxBytes).
	PageBytes int64
	// LaterTransient lists pages whose first N rounds of attempts end
	// transiently: with later retries (SeedCrawlInput.RetryLater) each
	// round makes the page wait for the next delay, by Clock, and a round
	// past the last delay fails it; without, the first round fails it.
	LaterTransient map[int64]int
	// SeedTransient is how many of the start page's snapshots
	// (Fake.SeedWorkflow) end with a foreground hook whose attempts all
	// ended transiently (HookStatus.Transient).
	SeedTransient int
	// Locked are the host queues ClaimPages says are locked to the crawl
	// (ClaimResult.Locked) when asked (ClaimInput.LockQueue).
	Locked []string
	// RefuseLocked is how many attempts of page activities and batches on
	// a Locked queue the worker's gates hand back before they start
	// (slotgate.ErrTypeClosed: a host-wide maintenance, a low disk).
	RefuseLocked int
	// LateLocked is how many page activities and batches on a Locked
	// queue end not started within their ScheduleToStart timeout (the
	// locked pipeline's disk guard held them, or it is gone).
	LateLocked int
	// HoldAtLimit is a page whose run ends only once a claim came back
	// empty at a limit (at most 10 s): the crawl then sees its limit with
	// that page still in flight, whatever the goroutines' timing.
	HoldAtLimit int64
	// BehindCounts: the counts every claim and page result carries are
	// one page behind (one page fewer done), as a snapshot taken before
	// the last page ended; PageCounts reads the true ones.
	BehindCounts bool
	// CutList is how many of the URL list's pages the first SeedURLList
	// seeds before it fails for good, leaving the list partial (its
	// attempts ran out between two frontier writes: PageCounts.ListPartial);
	// a later SeedURLList seeds the rest.
	CutList int64

	limitSeen     chan struct{} // closed by the first empty claim at a limit
	limitSeenOnce sync.Once

	mu        sync.Mutex
	known     int64          // pages discovered
	seen      map[int64]bool // discovered pages
	ready     []int64        // FIFO of READY pages
	claimed   map[int64]int  // page → attempt
	attempts  map[int64]int  // page → attempts made
	tokens    map[string][]activities.PageSpec
	done      map[int64]int // page → completions (must end at 1)
	failed    int64
	runs      int64 // RunPage calls
	batches   int64 // RunPageBatch calls
	states    []model.JobState
	final     model.JobState
	rules     []int64          // rules versions stored
	failedIDs map[int64]bool   // pages DONE failed
	requeues  map[string]int64 // requeue token → pages requeued
	reopens   []string         // ReopenJob keys
	pageRuns  map[int64]int    // page → RunPage calls
	teardowns []string         // TeardownCrawl's task queues
	seals     []Seal           // SealCrawl's calls
	archives  []activities.ArchiveInput
	checked   map[string]int // host queue → HostLiveness calls
	charged   map[int64]bool // pages charged to a page limit
	limit     string         // FinishInput.Limit
	refused   int            // attempts refused (RefuseLocked)
	late      int            // activities not started (LateLocked)

	clock   func() time.Time
	later   []time.Duration     // SeedCrawlInput.RetryLater
	rounds  map[int64]int       // page → rounds ended transiently
	waiting map[int64]time.Time // page → due (READY, out of the queue)
	retryAt []time.Time         // SetRetryAt's calls
	// retryAtDone are the pages done at each SetRetryAt call.
	retryAtDone []int64
	queues      map[string]int // task queue → page runs on it
	// seedRuns counts the start page's snapshots, seedTrans its
	// CompleteSeedPage calls' SeedPageInput.Transient.
	seedRuns  int
	seedTrans []bool
	// listCalls counts SeedURLList's calls; listPartial: the list was cut
	// short (CutList) and not seeded since.
	listCalls   int
	listPartial bool
}

// New returns a Fake crawl of pages pages with fanout links per page.
func New(pages, fanout int64) *Fake {
	return &Fake{Pages: pages, Fanout: fanout, claimed: map[int64]int{}, attempts: map[int64]int{}, seen: map[int64]bool{},
		tokens: map[string][]activities.PageSpec{}, done: map[int64]int{}, failedIDs: map[int64]bool{},
		requeues: map[string]int64{}, pageRuns: map[int64]int{}, charged: map[int64]bool{}, limitSeen: make(chan struct{})}
}

// NewRun forgets the claim and requeue tokens of the runs so far. Tokens
// carry the run id; the Temporal test environment gives every run the
// same one, so a test starting a new run of a crawl (a retry) calls it.
func (f *Fake) NewRun() {
	f.mu.Lock()
	f.tokens = map[string][]activities.PageSpec{}
	f.requeues = map[string]int64{}
	f.mu.Unlock()
}

// Fix makes the Failing pages succeed from now on.
func (f *Fake) Fix() {
	f.mu.Lock()
	f.Failing = nil
	f.mu.Unlock()
}

// Activities are the fake crawl's activities. Their methods have the
// names of the crawl's activities (activities.CrawlActivities,
// CrawlHostActivities and the two PoolActivities a crawl calls), so
// registering them replaces those.
type Activities struct{ f *Fake }

// Activities returns the fake's activities.
func (f *Fake) Activities() *Activities { return &Activities{f: f} }

func (f *Fake) url(id int64) string { return fmt.Sprintf("http://fake.test/p/%d", id) }

func (f *Fake) countsLocked() activities.PageCounts {
	c := f.trueCountsLocked()
	if f.BehindCounts && c.Done > 0 {
		c.Done--
		c.Succeeded--
	}
	return c
}

// trueCountsLocked are the fake frontier's page counts.
func (f *Fake) trueCountsLocked() activities.PageCounts {
	var c activities.PageCounts
	c.Total = f.known
	c.Ready = int64(len(f.ready))
	c.Claimed = int64(len(f.claimed))
	c.Done = int64(len(f.done))
	c.Failed = f.failed
	c.Succeeded = c.Done - c.Failed
	c.Charged = int64(len(f.charged))
	c.Ready += int64(len(f.waiting))
	c.Waiting = int64(len(f.waiting))
	c.ListPartial = f.listPartial
	for _, due := range f.waiting {
		if c.RetryAt.IsZero() || due.Before(c.RetryAt) {
			c.RetryAt = due
		}
	}
	return c
}

// PageCounts is activities.CrawlActivities.PageCounts: the true counts.
func (a *Activities) PageCounts(_ context.Context, _ string) (activities.PageCounts, error) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	return a.f.trueCountsLocked(), nil
}

// SetClock sets the clock waiting pages are due by (default time.Now):
// a workflow test passes its environment's.
func (f *Fake) SetClock(now func() time.Time) {
	f.mu.Lock()
	f.clock = now
	f.mu.Unlock()
}

func (f *Fake) nowLocked() time.Time {
	if f.clock == nil {
		return time.Now()
	}
	return f.clock()
}

// promoteLocked makes the waiting pages that are due READY (first in line).
func (f *Fake) promoteLocked() {
	now := f.nowLocked()
	for _, id := range slices.Sorted(maps.Keys(f.waiting)) {
		if !f.waiting[id].After(now) {
			delete(f.waiting, id)
			f.ready = append([]int64{id}, f.ready...)
		}
	}
}

// discover makes page id's children known and READY.
func (f *Fake) discoverLocked(id int64) {
	first, last := f.Fanout*(id-1)+2, f.Fanout*(id-1)+f.Fanout+1
	for c := first; c <= min(last, f.Pages); c++ {
		if !f.seen[c] {
			f.seen[c] = true
			f.known++
			f.ready = append(f.ready, c)
		}
	}
}

// SeedCrawl is activities.CrawlActivities.SeedCrawl.
func (a *Activities) SeedCrawl(_ context.Context, in activities.SeedCrawlInput) (activities.SeedCrawlResult, error) {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.later = slices.Clone(in.RetryLater)
	if f.known == 0 {
		f.known = 1
		f.seen[1] = true
		f.claimed[1] = 1
		f.attempts[1] = 1
		f.charged[1] = true
	}
	if f.waiting != nil {
		f.promoteLocked()
	}
	if i := slices.Index(f.ready, 1); i >= 0 { // requeued by a retry, or due
		f.ready = slices.Delete(f.ready, i, i+1)
		f.attempts[1]++
		f.claimed[1] = f.attempts[1]
	}
	res := activities.SeedCrawlResult{Counts: f.countsLocked()}
	if a, ok := f.claimed[1]; ok {
		res.Page = &activities.PageSpec{ID: 1, URL: f.url(1), Attempt: a}
	}
	return res, nil
}

// ListSize is how many start pages SeedURLList seeds (pages 1..ListSize).
const ListSize = 3

// SeedURLList is activities.CrawlActivities.SeedURLList: a URL list
// naming pages 1..ListSize, all READY (a repeat adds nothing; CutList
// cuts the first one short).
func (a *Activities) SeedURLList(_ context.Context, in activities.SeedURLListInput) (activities.SeedURLListResult, error) {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listCalls++
	n := min(ListSize, f.Pages)
	cut := f.CutList > 0 && f.listCalls == 1
	if cut {
		n = min(n, f.CutList)
	}
	var starts []string
	for id := int64(1); id <= n; id++ {
		if !f.seen[id] {
			f.seen[id] = true
			f.known++
			f.ready = append(f.ready, id)
		}
		starts = append(starts, f.url(id))
	}
	f.listPartial = cut
	if cut {
		return activities.SeedURLListResult{}, temporal.NewNonRetryableApplicationError("seed url list: redis went away (fake)", "Test", nil)
	}
	return activities.SeedURLListResult{Counts: f.countsLocked(), Starts: starts, URLs: len(starts)}, nil
}

// CompleteSeedPage is activities.CrawlHostActivities.CompleteSeedPage.
func (a *Activities) CompleteSeedPage(ctx context.Context, in activities.SeedPageInput) (activities.PageResult, error) {
	f := a.f
	if in.Transient {
		f.mu.Lock()
		f.seedTrans = append(f.seedTrans, true)
		f.mu.Unlock()
		return f.completeTransient(in.Page, "host-seed")
	}
	f.mu.Lock()
	f.seedTrans = append(f.seedTrans, false)
	f.mu.Unlock()
	return f.complete(in.Page, "host-seed")
}

// completeTransient ends page p's attempt transient with every attempt
// spent (SeedPageInput.Transient): it waits for its next later retry, or
// fails when no delay is left.
func (f *Fake) completeTransient(p activities.PageSpec, host string) (activities.PageResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := activities.PageResult{PageID: p.ID, Attempt: p.Attempt, HostQueue: host, Status: activities.PageTransient}
	if f.claimed[p.ID] == p.Attempt {
		delete(f.claimed, p.ID)
		f.waitLocked(p.ID)
	}
	res.Counts = f.countsLocked()
	return res, nil
}

// waitLocked makes page id, whose round of attempts ended transiently,
// wait for its next later retry, or fails it when no delay is left.
func (f *Fake) waitLocked(id int64) {
	if f.rounds == nil {
		f.rounds, f.waiting = map[int64]int{}, map[int64]time.Time{}
	}
	f.rounds[id]++
	if n := f.rounds[id]; n <= len(f.later) {
		f.waiting[id] = f.nowLocked().Add(f.later[n-1])
		return
	}
	f.done[id]++
	f.failed++
	f.failedIDs[id] = true
}

// SeedWorkflow is SeedWorkflow with the start page's first SeedTransient
// snapshots ending with a transient hook (register it under the name
// "SnapshotWorkflow"; the test environment does not replay, so it may
// read the fake).
func (f *Fake) SeedWorkflow(ctx workflow.Context, in workflows.SnapshotInput) (workflows.Status, error) {
	st, err := SeedWorkflow(ctx, in)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seedRuns++
	if f.seedRuns <= f.SeedTransient {
		st.Hooks = []workflows.HookStatus{
			{Plugin: "pagefetch", Hook: "on_Snapshot__10_pagefetch.py", Step: 1, Phase: workflows.PhaseDone, Transient: true,
				Result: &model.ArchiveResult{Plugin: "pagefetch", Status: model.StatusFailed, Error: "503 Service Unavailable"}},
			{Plugin: "title", Hook: "on_Snapshot__20_title.py", Step: 2, Phase: workflows.PhaseDone,
				Result: &model.ArchiveResult{Plugin: "title", Status: model.StatusNoResults}},
		}
	}
	return st, err
}

// ClaimPages is activities.CrawlActivities.ClaimPages.
func (a *Activities) ClaimPages(_ context.Context, in activities.ClaimInput) (activities.ClaimResult, error) {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if pages, ok := f.tokens[in.Token]; ok {
		return activities.ClaimResult{Pages: pages, Counts: f.countsLocked()}, nil
	}
	if in.MaxBytes > 0 && f.PageBytes*int64(len(f.done)) >= in.MaxBytes {
		got := f.PageBytes * int64(len(f.done))
		return activities.ClaimResult{Counts: f.countsLocked(), Limit: model.ByteLimitReached(in.MaxBytes, got)}, nil
	}
	f.promoteLocked()
	var pages []activities.PageSpec
	var over []int64 // READY pages past the page limit: they stay READY
	for len(pages) < in.N && len(f.ready) > 0 {
		id := f.ready[0]
		f.ready = f.ready[1:]
		if !f.charged[id] && in.MaxPages > 0 && int64(len(f.charged)) >= in.MaxPages {
			over = append(over, id)
			continue
		}
		f.charged[id] = true
		f.attempts[id]++
		f.claimed[id] = f.attempts[id]
		pages = append(pages, activities.PageSpec{ID: id, URL: f.url(id), Depth: 1, Attempt: f.attempts[id]})
	}
	f.ready = append(over, f.ready...)
	f.tokens[in.Token] = pages
	res := activities.ClaimResult{Pages: pages, Counts: f.countsLocked()}
	if in.LockQueue != "" {
		res.Locked = slices.Clone(f.Locked)
	}
	if in.MaxPages > 0 && int64(len(f.charged)) >= in.MaxPages {
		res.Limit = model.PageLimitReached(in.MaxPages)
		if len(pages) == 0 {
			f.limitSeenOnce.Do(func() { close(f.limitSeen) })
		}
	}
	return res, nil
}

// refuse ends the first LateLocked activities on a Locked queue not
// started in time, then hands back the first RefuseLocked attempts.
func (a *Activities) refuse(ctx context.Context) error {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.Locked, activity.GetInfo(ctx).TaskQueue) {
		return nil
	}
	switch {
	case f.late < f.LateLocked:
		f.late++
		return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
	case f.refused < f.RefuseLocked:
		f.refused++
		return temporal.NewApplicationError("worker not claiming work (maintenance): claim left to another worker", slotgate.ErrTypeClosed)
	}
	return nil
}

// RunPage is activities.CrawlActivities.RunPage: the page takes no time.
func (a *Activities) RunPage(ctx context.Context, in activities.RunPageInput) (activities.PageResult, error) {
	if err := a.refuse(ctx); err != nil {
		return activities.PageResult{}, err
	}
	return a.runPage(ctx, in)
}

func (a *Activities) runPage(ctx context.Context, in activities.RunPageInput) (activities.PageResult, error) {
	f := a.f
	f.mu.Lock()
	if f.queues == nil {
		f.queues = map[string]int{}
	}
	f.queues[activity.GetInfo(ctx).TaskQueue]++
	f.runs++
	f.pageRuns[in.Page.ID]++
	hold := in.Page.ID == f.HoldAtLimit
	f.mu.Unlock()
	if hold {
		select {
		case <-f.limitSeen:
		case <-time.After(10 * time.Second):
		}
	}
	return f.complete(in.Page, "host-1")
}

// RunPageBatch is activities.CrawlActivities.RunPageBatch: each page is
// RunPage's, one after another.
func (a *Activities) RunPageBatch(ctx context.Context, in activities.RunPageBatchInput) (activities.BatchResult, error) {
	if err := a.refuse(ctx); err != nil {
		return activities.BatchResult{}, err
	}
	res := activities.BatchResult{HostQueue: "host-1", Statuses: map[string]int{}}
	for _, p := range in.Pages {
		r, err := a.runPage(ctx, activities.RunPageInput{Crawl: in.Crawl, Page: p, Settings: in.Settings})
		if err != nil {
			return activities.BatchResult{}, err
		}
		res.Ran++
		res.Statuses[r.Status]++
		res.Counts = r.Counts
	}
	a.f.mu.Lock()
	a.f.batches++
	a.f.mu.Unlock()
	return res, nil
}

func (f *Fake) complete(p activities.PageSpec, host string) (activities.PageResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := activities.PageResult{PageID: p.ID, Attempt: p.Attempt, HostQueue: host, Status: activities.PageSucceeded}
	if f.claimed[p.ID] != p.Attempt {
		res.Error = "superseded"
		res.Counts = f.countsLocked()
		return res, nil
	}
	delete(f.claimed, p.ID)
	switch {
	case f.TransientOnce[p.ID] && p.Attempt == 1:
		f.ready = append(f.ready, p.ID)
		res.Status = activities.PageTransient
	case f.rounds[p.ID] < f.LaterTransient[p.ID]:
		res.Status = activities.PageTransient
		f.waitLocked(p.ID)
	case f.Failing[p.ID]:
		f.done[p.ID]++
		f.failed++
		f.failedIDs[p.ID] = true
		res.Status = activities.PageFailed
	default:
		f.done[p.ID]++
		f.discoverLocked(p.ID)
	}
	res.Counts = f.countsLocked()
	return res, nil
}

// fakeAttempts is the fake crawl's crawl.page_attempts: a transient
// CompletePage makes a page READY again before its third attempt.
const fakeAttempts = 3

// CompletePage is activities.CrawlActivities.CompletePage.
func (a *Activities) CompletePage(_ context.Context, in activities.CompletePageInput) (activities.PageCounts, error) {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claimed[in.PageID] == in.Attempt && in.Transient && in.Attempt < fakeAttempts {
		delete(f.claimed, in.PageID)
		f.ready = append(f.ready, in.PageID)
	} else if f.claimed[in.PageID] == in.Attempt {
		delete(f.claimed, in.PageID)
		f.done[in.PageID]++
		f.failed++
		f.failedIDs[in.PageID] = true
	}
	return f.countsLocked(), nil
}

// RequeueFailed is activities.CrawlActivities.RequeueFailed: the failed
// pages are READY again (their completion count starts over), once per
// token; a continue asked for it says whether the start page is READY.
func (a *Activities) RequeueFailed(_ context.Context, in activities.RequeueInput) (activities.RequeueResult, error) {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.requeues[in.Token]; ok {
		return activities.RequeueResult{Pages: n, Counts: f.countsLocked()}, nil
	}
	res := activities.RequeueResult{}
	for id := int64(1); id <= f.known && !in.Continue; id++ {
		if f.failedIDs[id] {
			delete(f.failedIDs, id)
			delete(f.done, id)
			f.failed--
			f.ready = append(f.ready, id)
			res.Pages++
			res.Seed = res.Seed || id == 1
		}
	}
	if in.Continue && in.StartPage && f.seen[1] && f.done[1] == 0 {
		_, claimed := f.claimed[1]
		res.Seed = !claimed // READY: waiting, or in the queue
	}
	f.requeues[in.Token] = res.Pages
	res.Counts = f.countsLocked()
	return res, nil
}

// FailWaitingPages is activities.CrawlActivities.FailWaitingPages.
func (a *Activities) FailWaitingPages(_ context.Context, in activities.FailWaitingInput) (activities.PageCounts, error) {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.waiting {
		delete(f.waiting, id)
		f.done[id]++
		f.failed++
		f.failedIDs[id] = true
	}
	return f.countsLocked(), nil
}

// SetRetryAt is activities.PoolActivities.SetRetryAt; it records the due
// times it was given (zero: out of the set).
func (a *Activities) SetRetryAt(_ context.Context, in activities.RetryAtInput) error {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	a.f.retryAt = append(a.f.retryAt, in.At)
	a.f.retryAtDone = append(a.f.retryAtDone, int64(len(a.f.done)))
	return nil
}

// ReopenJob is activities.PoolActivities.ReopenJob.
func (a *Activities) ReopenJob(_ context.Context, in activities.ReopenInput) error {
	f := a.f
	f.mu.Lock()
	f.reopens = append(f.reopens, in.Key)
	f.mu.Unlock()
	return nil
}

// ReleasePages is activities.CrawlActivities.ReleasePages.
func (a *Activities) ReleasePages(_ context.Context, in activities.ReleasePagesInput) (activities.PageCounts, error) {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range in.PageIDs {
		if _, ok := f.claimed[id]; ok {
			delete(f.claimed, id)
			if f.attempts[id] == 1 {
				delete(f.charged, id) // released unfetched
			}
			f.ready = append([]int64{id}, f.ready...)
		}
	}
	return f.countsLocked(), nil
}

// SetRules is activities.CrawlActivities.SetRules.
func (a *Activities) SetRules(_ context.Context, in activities.SetRulesInput) error {
	f := a.f
	f.mu.Lock()
	f.rules = append(f.rules, in.Rules.Version)
	f.mu.Unlock()
	return nil
}

// FinishCrawl is activities.CrawlActivities.FinishCrawl.
func (a *Activities) FinishCrawl(_ context.Context, in activities.FinishInput) error {
	f := a.f
	f.mu.Lock()
	f.final = in.State
	f.limit = in.Limit
	f.mu.Unlock()
	return nil
}

// TeardownCrawl is activities.CrawlHostActivities.TeardownCrawl; it
// records the host queue it ran for.
func (a *Activities) TeardownCrawl(ctx context.Context, _ activities.TeardownInput) (activities.TeardownReport, error) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	q := activity.GetInfo(ctx).TaskQueue
	a.f.teardowns = append(a.f.teardowns, q)
	return activities.TeardownReport{WARCs: []activities.WARCFile{{Name: "job-" + q + "-00001.warc.gz", Bytes: 1}}}, nil
}

// SetArchive is activities.PoolActivities.SetArchive; it records where
// the seal said the WACZ is.
func (a *Activities) SetArchive(_ context.Context, in activities.ArchiveInput) error {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	a.f.archives = append(a.f.archives, in)
	return nil
}

// SealCrawl is activities.CrawlHostActivities.SealCrawl; it records the
// host queue it ran on and what it was given.
func (a *Activities) SealCrawl(ctx context.Context, in activities.SealCrawlInput) (activities.SealCrawlReport, error) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	a.f.seals = append(a.f.seals, Seal{Queue: activity.GetInfo(ctx).TaskQueue, Input: in})
	return activities.SealCrawlReport{WACZ: "/archive/crawls/" + in.Ident + "/" + in.Ident + ".wacz", Host: "h", Missing: []string{"x.warc.gz"}}, nil
}

// HostAlive is activities.PoolActivities.HostAlive: every host queue is
// alive but those in Dead.
func (a *Activities) HostAlive(_ context.Context, queue string) (bool, error) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	return !a.f.Dead[queue], nil
}

// HostLiveness is activities.PoolActivities.HostLiveness: every host
// queue is alive with a 30 s lease but those in Dead, and those in Stale
// after their first check.
func (a *Activities) HostLiveness(_ context.Context, queue string) (activities.Liveness, error) {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.checked == nil {
		f.checked = map[string]int{}
	}
	f.checked[queue]++
	if lease, ok := f.Stale[queue]; ok {
		if f.checked[queue] == 1 {
			return activities.Liveness{Alive: true, Lease: lease}, nil
		}
		return activities.Liveness{}, nil
	}
	if f.Dead[queue] {
		return activities.Liveness{}, nil
	}
	return activities.Liveness{Alive: true, Lease: 30 * time.Second}, nil
}

// SetJobState is activities.PoolActivities.SetJobState.
func (a *Activities) SetJobState(_ context.Context, in activities.JobStateInput) error {
	f := a.f
	f.mu.Lock()
	f.states = append(f.states, in.State)
	f.mu.Unlock()
	return nil
}

// ApplySettings is activities.PoolActivities.ApplySettings.
func (a *Activities) ApplySettings(context.Context, activities.SettingsInput) error { return nil }

// Report is what happened to the fake crawl.
type Report struct {
	Known, Done, Failed, Runs int64
	// Batches counts RunPageBatch calls.
	Batches int64
	// Twice lists pages completed more than once (must be empty).
	Twice []int64
	Final model.JobState
	// Limit is the limit the crawl finished at (FinishInput.Limit).
	Limit  string
	States []model.JobState
	Rules  []int64
	// Reopens are the ReopenJob keys; PageRuns the RunPage calls per page.
	Reopens  []string
	PageRuns map[int64]int
	// Teardowns are the host queues TeardownCrawl ran on.
	Teardowns []string
	// Seals are SealCrawl's calls, Archives SetArchive's.
	Seals    []Seal
	Archives []activities.ArchiveInput
	// RetryAt are SetRetryAt's due times in call order, RetryAtDone the
	// pages done at each call.
	RetryAt     []time.Time
	RetryAtDone []int64
	// Queues counts the page runs per task queue.
	Queues map[string]int
	// SeedRuns counts the start page's snapshots (Fake.SeedWorkflow);
	// SeedTransient says of each CompleteSeedPage call whether it was
	// transient.
	SeedRuns      int
	SeedTransient []bool
	// ListCalls counts SeedURLList's calls.
	ListCalls int
}

// Seal is one SealCrawl call: the host queue it ran on, its input.
type Seal struct {
	Queue string
	Input activities.SealCrawlInput
}

// Report returns what happened so far.
func (f *Fake) Report() Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := Report{Known: f.known, Done: int64(len(f.done)), Failed: f.failed, Runs: f.runs, Batches: f.batches, Final: f.final, Limit: f.limit,
		States: append([]model.JobState(nil), f.states...), Rules: append([]int64(nil), f.rules...),
		Reopens: append([]string(nil), f.reopens...), PageRuns: maps.Clone(f.pageRuns), Teardowns: append([]string(nil), f.teardowns...),
		Seals: append([]Seal(nil), f.seals...), Archives: append([]activities.ArchiveInput(nil), f.archives...),
		RetryAt: append([]time.Time(nil), f.retryAt...), RetryAtDone: append([]int64(nil), f.retryAtDone...), Queues: maps.Clone(f.queues), SeedRuns: f.seedRuns,
		SeedTransient: append([]bool(nil), f.seedTrans...), ListCalls: f.listCalls}
	for id, n := range f.done {
		if n > 1 {
			r.Twice = append(r.Twice, id)
		}
	}
	return r
}

// SeedWorkflow stands in for the start page's SnapshotWorkflow (register
// it under the name "SnapshotWorkflow"): it finishes at once on host-seed.
func SeedWorkflow(ctx workflow.Context, in workflows.SnapshotInput) (workflows.Status, error) {
	return workflows.Status{Ident: in.Job.Ident, URL: in.Job.URL, State: model.StateFinished, HostQueue: "host-seed"}, nil
}
