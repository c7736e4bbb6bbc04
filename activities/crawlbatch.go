package activities

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/hostname"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
)

// RunPageBatchInput asks for one attempt of each of a batch of claimed
// pages (issue 26: pages in batches, durability per page).
type RunPageBatchInput struct {
	Crawl Crawl      `json:"crawl"`
	Pages []PageSpec `json:"pages"`
	// Settings are the job's settings at launch; the batch follows the
	// live concurrency and delays in Redis (LiveSettings) from then on.
	Settings model.Settings `json:"settings"`
	// RulesVersion is the rules version the pages were claimed with: a
	// newer one in Redis is applied to each page before it starts (skip
	// and ua rules), as a claim would.
	RulesVersion int64 `json:"rules_version"`
	// PageTimeout bounds each page attempt (crawl.page_timeout).
	PageTimeout time.Duration `json:"page_timeout"`
	// Budget: no page starts once the batch has run this long; the pages
	// not started are released (READY again, no attempt spent).
	Budget time.Duration `json:"budget"`
	// StopAt, when set, is the crawl's duration limit: no page starts
	// after it.
	StopAt time.Time `json:"stop_at,omitzero"`
	// Share, when set, is the part of the job's concurrency this batch
	// holds (crawl.batch_concurrency: several batches at once), of
	// ShareOf, the concurrency at launch. A lowered live concurrency
	// lowers the share in proportion (never above Share), so the batches
	// together keep to it; 0: the batch runs at the live concurrency.
	Share   int `json:"share,omitempty"`
	ShareOf int `json:"share_of,omitempty"`
}

// concurrency is how many pages the batch runs at once at the live
// concurrency live.
func (in RunPageBatchInput) concurrency(live int) int {
	if in.Share <= 0 || in.ShareOf <= 0 {
		return live
	}
	return min(in.Share, live*in.Share/in.ShareOf)
}

// BatchResult is how a page batch ended. It is small: counts only.
type BatchResult struct {
	// Ran is how many page attempts ran and were recorded, Statuses how
	// they ended (PageSucceeded, ...).
	Ran      int            `json:"ran"`
	Statuses map[string]int `json:"statuses,omitempty"`
	// Skipped pages met a skip rule newer than their claim.
	Skipped int `json:"skipped,omitempty"`
	// Released pages were not started (Stopped says why): READY again.
	Released int    `json:"released,omitempty"`
	Stopped  string `json:"stopped,omitempty"`
	// HostQueue is the queue of the worker that ran the batch (its crawl
	// setup is torn down there at the end).
	HostQueue string     `json:"host_queue,omitempty"`
	Counts    PageCounts `json:"counts"`
}

// Why a batch stops starting pages before its last one.
const (
	batchPaused    = "paused (concurrency 0)"
	batchLowered   = "its share of the lowered concurrency is 0"
	batchBudget    = "batch budget spent (crawl.batch_time)"
	batchByteLimit = "byte limit reached"
	batchDuration  = "duration limit reached"
)

// RunPageBatch runs a batch of claimed page attempts on this worker, each
// as RunPage runs one (runAttempt), at most the job's live concurrency at
// once, their writes gathered by a pageSink. Before each page starts it
// reads the live settings (at most LiveInterval old): concurrency 0
// (paused), the batch's budget or StopAt spent, or the byte limit reached
// stop starting pages, and the rest are released. A worker lost mid-batch
// loses its pages in flight and those the sink had not recorded yet:
// Temporal runs the batch again (after the heartbeat timeout), and that
// attempt runs only the pages still CLAIMED by their attempt
// (StillClaimed). The activity fails only when a page could not be
// recorded or the worker is stopping; the workflow cancels it on abort and
// releases its pages. The pages that ended are recorded before it
// returns, canceled or not.
func (a *CrawlActivities) RunPageBatch(ctx context.Context, in RunPageBatchInput) (BatchResult, error) {
	ident := in.Crawl.Job.Ident
	if ident == "" || len(in.Pages) == 0 || in.PageTimeout <= 0 || in.Budget <= 0 {
		return BatchResult{}, invalidInput("run page batch of %q: ident, pages, page timeout and budget must be set (%d pages)", ident, len(in.Pages))
	}
	for _, p := range in.Pages {
		if p.ID < 1 || p.URL == "" || p.Attempt < 1 {
			return BatchResult{}, invalidInput("run page batch of %s: page %d: id, url and attempt must be set", ident, p.ID)
		}
	}
	info := activity.GetInfo(ctx)
	log := a.log.With(logging.Ident(ident), zap.Int("batch_pages", len(in.Pages)), zap.Int32("activity_attempt", info.Attempt))
	b := &pageBatch{a: a, in: in, log: log, start: time.Now(), ended: make(chan struct{}, len(in.Pages)), hosts: map[string]int{},
		waiting: len(in.Pages), res: BatchResult{HostQueue: a.hostQueue, Statuses: map[string]int{}}}
	progress := func() any { return b.progress(int(info.Attempt)) }
	b.beat = func() { activity.RecordHeartbeat(ctx, progress()) }
	stop := heartbeatEvery(ctx, a.opts.HeartbeatInterval, progress)
	defer stop()
	pages := in.Pages
	if info.Attempt > 1 {
		err := retryWrite(ctx, func() (err error) { pages, err = a.store.StillClaimed(ctx, ident, in.Pages); return err })
		if err != nil {
			return BatchResult{}, crawlStoreError(err, "read the claims of a page batch of %s", ident)
		}
		log.Info("page batch run again: its pages still claimed", zap.Int("pages", len(pages)))
	}
	b.sink = newPageSink(ctx, b)
	logKey := fmt.Sprintf("%s/%s/attempt-%d", info.WorkflowExecution.RunID, info.ActivityID, info.Attempt)
	rest := b.run(ctx, pages, logKey)
	b.wg.Wait()
	b.sink.close()
	if ctx.Err() != nil {
		return BatchResult{}, interrupted(ctx, log, "page batch", fmt.Errorf("page batch of %s: worker shut down during the batch", ident))
	}
	if b.err != nil {
		return BatchResult{}, b.err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.WriteTimeout)
	defer cancel()
	var err error
	if len(rest) > 0 {
		ids := make([]int64, len(rest))
		for i, p := range rest {
			ids[i] = p.ID
		}
		err = retryWrite(wctx, func() (err error) { b.res.Counts, err = a.store.Release(wctx, ident, ids); return err })
		b.res.Released = len(rest)
	} else {
		err = retryWrite(wctx, func() (err error) { b.res.Counts, err = a.store.Counts(wctx, ident); return err })
	}
	if err != nil {
		return BatchResult{}, crawlStoreError(err, "end a page batch of %s", ident)
	}
	log.Debug("page batch done", zap.Int("ran", b.res.Ran), zap.Int("released", b.res.Released), zap.String("stopped", b.res.Stopped))
	return b.res, nil
}

// pageBatch is one RunPageBatch attempt in progress.
type pageBatch struct {
	a     *CrawlActivities
	in    RunPageBatchInput
	log   *zap.Logger
	start time.Time
	wg    sync.WaitGroup
	ended chan struct{} // one send per page that ends

	mu       sync.Mutex
	inflight int
	waiting  int            // the batch's pages not started yet
	beat     func()         // records the batch's heartbeat now
	hosts    map[string]int // the batch's pages running per host
	err      error          // the first page that could not be recorded
	res      BatchResult
	sink     *pageSink
}

// run starts the pages in order as slots free up, passing over a page
// whose host has its share of the batch's pages running
// (CrawlOptions.HostConcurrency, HostLimits), and returns the pages it
// did not start because the batch stopped (paused, budget, limit); none
// when ctx ended or a page failed to record (the batch is then run again,
// or its pages released by the workflow).
func (b *pageBatch) run(ctx context.Context, pages []PageSpec, logKey string) []PageSpec {
	waiting := slices.Clone(pages)
	b.setWaiting(len(waiting))
	first := true
	defer b.setWaiting(0)
	for len(waiting) > 0 {
		settings, why, ok := b.slot(ctx)
		if !ok {
			return nil
		}
		if why != "" {
			b.res.Stopped = why
			return waiting
		}
		i := b.next(waiting)
		if i < 0 {
			// Every page waiting is of a host at its share: wait for a
			// page to end.
			if !b.await(ctx) {
				return nil
			}
			continue
		}
		p := waiting[i]
		waiting = slices.Delete(waiting, i, i+1)
		b.setWaiting(len(waiting))
		p, skip, err := b.rules(ctx, p)
		if err != nil {
			b.fail(err)
			return nil
		}
		if skip {
			continue
		}
		host := b.host(p)
		b.mu.Lock()
		b.inflight++
		b.hosts[host]++
		b.mu.Unlock()
		b.wg.Go(func() {
			defer func() {
				b.mu.Lock()
				b.inflight--
				b.hosts[host]--
				b.mu.Unlock()
				b.ended <- struct{}{}
			}()
			b.page(ctx, p, settings, fmt.Sprintf("%s/page-%d", logKey, p.ID))
		})
		if first {
			// Say at once that pages run, not after a heartbeat interval.
			b.beat()
			first = false
		}
	}
	return nil
}

// setWaiting notes how many of the batch's pages have not started.
func (b *pageBatch) setWaiting(n int) {
	b.mu.Lock()
	b.waiting = n
	b.mu.Unlock()
}

// progress is the batch's heartbeat: its attempt, and how many of its
// claimed pages run and wait (starter status shows them).
func (b *pageBatch) progress(attempt int) BatchProgress {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BatchProgress{Attempt: attempt, PagesRunning: b.inflight, PagesWaiting: b.waiting}
}

// next is the index of the first waiting page whose host may start one
// more of the batch's pages (-1: none).
func (b *pageBatch) next(waiting []PageSpec) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.IndexFunc(waiting, func(p PageSpec) bool {
		h := b.host(p)
		limit := b.a.opts.HostConcurrency
		if l, ok := b.a.opts.HostLimits[h]; ok {
			limit = l
		}
		return limit <= 0 || b.hosts[h] < limit
	})
}

// host is the page's target host as the host budget names it ("" when
// it has none: never held back).
func (b *pageBatch) host(p PageSpec) string {
	h, _ := hostname.Of(p.URL) // "" with every error
	return h
}

// await waits for a page of the batch to end or LiveInterval to pass
// (false: ctx ended).
func (b *pageBatch) await(ctx context.Context) bool {
	t := time.NewTimer(b.a.opts.LiveInterval)
	defer t.Stop()
	select {
	case <-b.ended:
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	return true
}

// slot waits until a page may start and returns the settings it runs
// with, or why none starts any more; ok false when ctx ended or a page
// failed to record.
func (b *pageBatch) slot(ctx context.Context) (settings model.Settings, why string, ok bool) {
	for {
		if ctx.Err() != nil {
			return settings, "", false
		}
		live, _, err := b.a.liveSettings(ctx, b.in.Crawl)
		if err != nil {
			b.fail(err)
			return settings, "", false
		}
		settings = b.in.Settings
		if live.Concurrency >= 0 {
			settings.Concurrency = live.Concurrency
		}
		share := b.in.concurrency(settings.Concurrency)
		if live.DelayMinMS >= 0 && live.DelayMaxMS >= live.DelayMinMS {
			settings.DelayMinMS, settings.DelayMaxMS = live.DelayMinMS, live.DelayMaxMS
		}
		now := time.Now()
		switch {
		case settings.Concurrency == 0:
			return settings, batchPaused, true
		case share == 0:
			return settings, batchLowered, true
		case now.Sub(b.start) >= b.in.Budget:
			return settings, batchBudget, true
		case !b.in.StopAt.IsZero() && !now.Before(b.in.StopAt):
			return settings, batchDuration, true
		case settings.MaxBytes > 0 && live.BytesDownloaded >= settings.MaxBytes:
			return settings, batchByteLimit, true
		}
		b.mu.Lock()
		free, failed := b.inflight < share, b.err != nil
		b.mu.Unlock()
		if failed {
			return settings, "", false
		}
		if free {
			return settings, "", true
		}
		b.await(ctx)
	}
}

// rules applies rules newer than the batch's claim to a page about to
// start: a skip rule moves it to SKIPPED, a ua rule sets its user agent.
func (b *pageBatch) rules(ctx context.Context, p PageSpec) (PageSpec, bool, error) {
	live, judge, err := b.a.liveSettings(ctx, b.in.Crawl)
	if err != nil || live.Rules.Version <= b.in.RulesVersion {
		return p, false, err
	}
	pr := judge.Rules.Eval(p.URL)
	if !pr.Skip {
		p.UA = pr.UA
		return p, false, nil
	}
	ident := b.in.Crawl.Job.Ident
	reason := fmt.Sprintf("skipped by rule %d (%s) of rules version %d", pr.SkipRule, judge.Rules.Pattern(pr.SkipRule), live.Rules.Version)
	if err := retryWrite(ctx, func() error { return b.a.store.Skip(ctx, ident, p.ID, reason) }); err != nil {
		return p, false, crawlStoreError(err, "skip page %d of %s", p.ID, ident)
	}
	b.mu.Lock()
	b.res.Skipped++
	b.mu.Unlock()
	return p, true, nil
}

// page runs one page of the batch under its own timeout.
func (b *pageBatch) page(ctx context.Context, p PageSpec, settings model.Settings, logKey string) {
	log := b.log.With(zap.Int64("page", p.ID), logging.Attempt(p.Attempt))
	pctx, cancel := context.WithTimeout(ctx, b.in.PageTimeout)
	defer cancel()
	d, err := b.a.runAttempt(ctx, pctx, b.in.PageTimeout, log, RunPageInput{Crawl: b.in.Crawl, Page: p, Settings: settings}, logKey)
	if err != nil {
		if ctx.Err() == nil {
			b.fail(err)
		}
		return
	}
	b.sink.add(d)
}

// recorded counts pages the sink recorded.
func (b *pageBatch) recorded(res []PageResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range res {
		b.res.Ran++
		b.res.Statuses[r.Status]++
	}
}

// fail keeps the first error that ends the batch.
func (b *pageBatch) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}
