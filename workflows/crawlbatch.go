package workflows

import (
	"fmt"
	"math"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Page batches (issue 26): with CrawlTiming.BatchPages set, the crawl runs
// RunPageBatch activities instead of one RunPage per page: one at a time
// holding the whole concurrency, or with BatchConcurrency several at once,
// each holding a share of it (at most BatchConcurrency), so a crawl's
// pages spread over the pool's workers. The
// workflow claims the batch's pages (ClaimPages, as for single pages: the
// rules, the page and byte limits applied there) and the activity runs
// them at the job's live concurrency, recording each page in the frontier
// as it ends; history events per page fall from ~4 to a few per batch. An
// input without BatchPages (every history recorded before) launches pages
// one by one as before.

// batched reports that this run launches page batches.
func (c *crawl) batched() bool { return c.in.Timing.BatchPages > 0 }

// busy reports that no claim may be made now: the job is paused, or its
// concurrency is taken: by pages in flight (single pages), by the batch
// in flight (one at a time), or by the shares of the batches in flight.
func (c *crawl) busy(limit int) bool {
	switch {
	case !c.batched():
		return len(c.inflight) >= limit
	case c.in.Timing.BatchConcurrency == 0:
		return limit == 0 || len(c.inflight) > 0
	}
	return limit == 0 || c.shares >= limit
}

// share is the concurrency the next batch holds (0: the whole live
// concurrency, one batch at a time).
func (c *crawl) share(limit int) int {
	if c.in.Timing.BatchConcurrency == 0 {
		return 0
	}
	return min(c.in.Timing.BatchConcurrency, limit-c.shares)
}

// claimSize is how many pages the next claim asks for.
func (c *crawl) claimSize(limit int) int {
	if c.batched() {
		if s := c.share(limit); s > 0 {
			// Batches at once split the pages as they split the
			// concurrency, so one does not take every ready page.
			return min(model.MaxConcurrency, max(s, c.in.Timing.BatchPages*s/limit))
		}
		return min(model.MaxConcurrency, max(c.in.Timing.BatchPages, limit))
	}
	return limit - len(c.inflight)
}

// launchBatch runs claimed pages as one RunPageBatch activity on the
// pool's queue. Its pages stay in flight until it ends: an abort cancels
// it and releases them (a page already recorded stays as it is); a batch
// that failed for good ends its pages still claimed transient
// (batchFailed).
func (c *crawl) launchBatch(ps []activities.PageSpec, rulesVersion int64) {
	ids := make([]int64, len(ps))
	for i, p := range ps {
		c.inflight[p.ID] = p
		ids[i] = p.ID
	}
	c.launched += int64(len(ps))
	limit := c.settings.current.Concurrency
	share, of := c.share(limit), limit
	if c.in.Timing.BatchConcurrency > 0 && share <= 0 {
		// The concurrency was lowered while the pages were claimed: the
		// batch holds no share (a share of 1 in an unreachable whole runs
		// no page), stops at once and releases its pages.
		share, of = 1, math.MaxInt32
	}
	c.shares += share
	t := c.in.Timing
	queue := c.pageQueue()
	// The batch starts pages for BatchTime; each then runs for
	// PageTimeout at most, and its writes retry for less than that.
	opts := c.pageOptions(queue, fmt.Sprintf("%s/r%d/batch-%d", c.ident(), c.carry.Run, c.claims),
		fmt.Sprintf("%d pages from %s", len(ps), summary(ps[0].URL)), c.pageStartTimeout(queue), t.BatchTime+2*t.PageTimeout)
	in := activities.RunPageBatchInput{Crawl: c.in.Crawl, Pages: ps, Settings: c.settings.current, RulesVersion: rulesVersion,
		PageTimeout: t.PageTimeout, Budget: t.BatchTime, Share: share, ShareOf: of}
	if d := c.settings.current.MaxDuration; d > 0 {
		in.StopAt = c.durationStart().Add(d)
	}
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(c.runCtx, opts), crawlActs.RunPageBatch, in)
	workflow.Go(c.dctx, func(gc workflow.Context) {
		var res activities.BatchResult
		err := fut.Get(gc, &res)
		switch {
		case err == nil:
		case c.stopping() && temporal.IsCanceledError(err):
			c.released = append(c.released, ids...)
		case c.unstarted(queue, err):
			c.releaseUnstarted(gc, ids, queue, err)
		default:
			res.Counts = c.batchFailed(gc, ps, fmt.Sprintf("page batch activity failed: %v", err))
		}
		for _, p := range ps {
			delete(c.inflight, p.ID)
		}
		c.shares -= share
		c.completed += int64(len(ps))
		c.addHost(res.HostQueue)
		c.setCounts(res.Counts)
	})
}

// batchFailed ends every page of a failed batch that is still claimed by
// its attempt transient (CompletePage leaves the others as they are): the
// batch may not have started most of them, so each is READY again while
// it has attempts (crawl.page_attempts bounds a page that kills its
// worker every time), all at once; it returns the last counts.
func (c *crawl) batchFailed(ctx workflow.Context, ps []activities.PageSpec, note string) activities.PageCounts {
	futs := make([]workflow.Future, len(ps))
	for i, p := range ps {
		in := activities.CompletePageInput{Ident: c.ident(), PageID: p.ID, Attempt: p.Attempt, Note: note, Transient: true}
		futs[i] = workflow.ExecuteLocalActivity(c.redisCtx(c.dctx), crawlActs.CompletePage, in)
	}
	var last activities.PageCounts
	for i, f := range futs {
		var counts activities.PageCounts
		if err := f.Get(ctx, &counts); err != nil {
			c.log().Error("record a page of a failed batch failed", "page", ps[i].ID, "error", err)
			continue
		}
		if counts.Done >= last.Done {
			last = counts
		}
	}
	return last
}
