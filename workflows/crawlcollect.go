package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
)

// One coroutine for the pages in flight. The SDK's dispatcher runs every
// live coroutine of a workflow at every workflow task, finished or not:
// a run with one coroutine per page activity spent, per task, a
// coroutine switch (with the deadlock detector's ticker and the SDK's
// panic check, a stack walk) for every page in flight, whatever ended. A
// run from pageCollectChange on has one coroutine, collectPages, waiting
// for all its page activities: a task costs the same whatever the
// concurrency. Histories from before it (the default branch) keep a
// coroutine per page. Batches (crawlbatch.go) keep theirs: a run has few.

// pageCollectChange versions waiting for the page activities in one
// coroutine. Only the order in which the pages that ended in one workflow
// task are taken in changes: launch order, after the coroutines created
// before the collector's instead of interleaved with them.
const pageCollectChange = "crawl-collect-pages"

// pendingPage is a page activity in flight (collectPages).
type pendingPage struct {
	page  activities.PageSpec
	queue string
	fut   workflow.Future
}

// collects reports that this run waits for its page activities in one
// coroutine; the version is asked once, at the first page launched, which
// starts the coroutine.
func (c *crawl) collects() bool {
	if c.collect == nil && versionOnce(c.dctx, &c.collect, pageCollectChange) {
		workflow.GoNamed(c.dctx, "crawl pages", c.collectPages)
	}
	return *c.collect
}

// collectPages takes in the page activities that ended, in launch order,
// as each page's own coroutine did: a result at once, an error (whose
// handling may run a local activity) in a coroutine of its own so it holds
// up no other page.
func (c *crawl) collectPages(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, c.pageEndedAny); err != nil {
			return
		}
		var ended []pendingPage
		c.pending = slices.DeleteFunc(c.pending, func(pp pendingPage) bool {
			if pp.fut.IsReady() {
				ended = append(ended, pp)
				return true
			}
			return false
		})
		for _, pp := range ended {
			var res activities.PageResult
			if err := pp.fut.Get(ctx, &res); err != nil {
				workflow.Go(c.dctx, func(gc workflow.Context) { c.pageEnded(gc, pp.page, pp.queue, res, err) })
				continue
			}
			c.pageEnded(ctx, pp.page, pp.queue, res, nil)
		}
	}
}

// pageEndedAny reports that a page activity in flight ended.
func (c *crawl) pageEndedAny() bool {
	return slices.ContainsFunc(c.pending, func(pp pendingPage) bool { return pp.fut.IsReady() })
}
