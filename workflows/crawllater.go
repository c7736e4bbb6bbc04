package workflows

import (
	"cmp"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
)

// Later retries of crawl pages (CrawlInput.PageRetryLater, the crawl's
// side of retrylater.go): the frontier keeps a page whose attempts all
// ended transiently READY, waiting for its next delay (internal/frontier
// Config.RetryLater), and claims skip it until it is due, so the crawl is
// not finished while pages wait. This file is what the workflow adds:
//
//   - when nothing is in flight and every READY page waits, the run waits
//     on one durable timer until the first is due (a stop, a settings
//     change or a limit ends the wait early) instead of looking again
//     every second, so a wait of hours costs a few history events; a run
//     whose history grows long continues as new as ever;
//   - while the run waits with nothing else left, the job is in the
//     retry_at set due when the first page is (SetRetryAt; claiming pages
//     again, or finishing, takes it out): starter status and list show it
//     waiting, as a snapshot job whose hooks wait (crawlWaitingChange;
//     before it, indexed while any page waited), and so do the workflow's
//     status, search attribute and details line (showWaiting);
//   - a crawl that stops (aborted, failed) fails its waiting pages: their
//     later retry is not run, their note says why (FailWaitingPages);
//     a crawl that ends at a limit leaves them READY for a continue.
//
// A page's earlier attempts keep their results (the page's attempts
// directories), and the job's counters move once: a waiting page is
// still queued, and failed only when its last later retry fails.

// maxPageRetryLater bounds CrawlInput.PageRetryLater (the frontier counts
// a page's later retries in one byte).
const maxPageRetryLater = 255

// laterOn reports that the crawl's pages get later retries.
func (c *crawl) laterOn() bool { return len(c.in.PageRetryLater) > 0 }

// onlyWaiting reports that every READY page waits for a later retry and
// no page is claimed or propagation pending: nothing can run before the
// first is due.
func (c *crawl) onlyWaiting() bool {
	n := c.counts
	return c.laterOn() && n.Waiting > 0 && n.Waiting >= n.Ready && n.Claimed == 0 && n.Propagating == 0
}

// waitForLater waits until the first waiting page is due (at least a
// second: Redis' clock may run behind the workflow's), a stop, a settings
// change or a limit's wake-up.
func (c *crawl) waitForLater() {
	wait := max(c.counts.RetryAt.Sub(workflow.Now(c.dctx)), time.Second)
	c.log().Info("pages wait for a later retry", "waiting", c.counts.Waiting, "retry_at", c.counts.RetryAt)
	c.idle = true
	c.indexRetryAt()
	version, wake := c.settings.version, c.limits.wake
	_, _ = workflow.AwaitWithOptions(c.dctx, workflow.AwaitOptions{Timeout: wait, TimerOptions: workflow.TimerOptions{Summary: "later retry"}},
		func() bool { return c.stopping() || c.settings.version != version || c.limits.wake != wake })
	c.idle = false
}

// crawlWaitingChange versions the retry_at entry of a crawl: runs from
// before it index the job while any page waits; from it on, only while
// the run waits with nothing else left (waitForLater), as a snapshot job is
// indexed only once its other hooks are done, so the entry (and the job
// hash's retry_at) says the crawl is waiting: starter status and list
// show it so.
const crawlWaitingChange = "crawl-waiting-shown"

// indexRetryAt keeps the job in the retry_at set, due when the first
// waiting page is (to the second, as the set scores): while the run waits
// for it with nothing else left (waitForLater), until pages are claimed or
// in flight again or none waits (counts a page's coroutine brings between
// are older: they leave it as it is).
func (c *crawl) indexRetryAt() {
	if !c.laterOn() || c.job.state.Final() || c.counts.Waiting == 0 && c.retryAt.IsZero() && c.retryAtKnown() {
		return
	}
	var due time.Time
	switch n := c.counts; {
	case n.Waiting > 0 && (!c.waitingShown() || c.idle):
		due = n.RetryAt.Truncate(time.Second)
	case n.Waiting > 0 && len(c.inflight) == 0 && n.Claimed == 0:
		return // nothing runs yet: still waiting
	}
	if due.Equal(c.retryAt) && c.retryAtKnown() {
		return
	}
	c.retryAt, c.retryUnknown = due, false
	in := activities.RetryAtInput{Ident: c.ident(), At: due}
	c.write("set retry_at", poolActs.SetRetryAt, in)
	if c.waitingShown() && c.showWaiting(due) {
		// The entry says the crawl only waits: so do its search
		// attribute, details line and status (StateWaiting).
		c.upsertSearchAttributes()
		workflow.SetCurrentDetails(c.dctx, c.details())
	}
}

// failWaiting fails the waiting pages of a crawl that stopped (asked
// whatever the last counts say: a batch's counts may be older).
func (c *crawl) failWaiting() {
	if !c.laterOn() || (!c.stopping() && c.job.failure == "") {
		return
	}
	why := cmp.Or(c.job.stopReason, c.job.failure)
	in := activities.FailWaitingInput{Ident: c.ident(), Note: "later retry not run (" + why + ")"}
	var counts activities.PageCounts
	if err := workflow.ExecuteLocalActivity(c.redisCtx(c.dctx), crawlActs.FailWaitingPages, in).Get(c.dctx, &counts); err != nil {
		c.log().Error("fail the pages waiting for a later retry", "waiting", c.counts.Waiting, "error", err)
		return
	}
	c.log().Info("pages waiting for a later retry failed: the crawl stopped", "reason", why)
	c.setCounts(counts)
}

// waitingShown reports (asked once) that the retry_at entry means the
// crawl only waits (crawlWaitingChange).
func (c *crawl) waitingShown() bool { return versionOnce(c.dctx, &c.waitShown, crawlWaitingChange) }

// retryAtKnown reports that retryAt is what the retry_at set has: not so
// in a run continued as new (crawlWaitingChange on) until it wrote it, as
// the run before may have left the job in it.
func (c *crawl) retryAtKnown() bool { return !c.retryUnknown || !c.waitingShown() }
