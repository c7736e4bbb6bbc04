package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/slotgate"
)

// Claim locks (`starter lock PIPELINE IDENT`, internal/pipelinelock): a
// pipeline locked to a crawl takes no work from the shared queues, so the
// crawl's pages go to it directly: every claim asks which pipelines are
// locked to the crawl (ClaimInput.LockQueue; the answer is read at most
// every crawl.live_interval), and while some are, its page activities and
// batches run on their host queues in turn instead of the pool's shared
// queue. A page sent to a locked pipeline that does not pick it up within
// HostScheduleToStart (the process is gone) ends its attempt transient:
// the page is claimed again, by then routed as the locks are. Histories
// from before it (crawlLockChange's default branch) route nothing.
//
// A page activity or batch that never started waits (unstartedChange):
// sent to a locked pipeline whose disk guard holds it (a host-wide
// maintenance, a low disk: the routed-page queue waits on the guard as
// the shared queues do) or that is gone, it is not started within
// HostScheduleToStart; handed back by a worker's gates at every attempt
// (slotgate.Refused), it ran none of its work. Its pages are released:
// READY again with no attempt counted, claimed again and routed as the
// locks are then, so a maintenance of any length neither fails nor loses
// them. Histories from before it end such pages transient or failed.

// crawlLockChange versions the routing of a locked crawl's pages.
const crawlLockChange = "crawl-lock-routes-pages"

// unstartedChange versions releasing the pages of a page activity or
// batch that never started.
const unstartedChange = "crawl-unstarted-pages-wait"

// lockRoutes reports that this run routes pages to locked pipelines (the
// version is asked once, at the first claim).
func (c *crawl) lockRoutes() bool { return versionOnce(c.dctx, &c.lockRoute, crawlLockChange) }

// pageQueue is the task queue of the next page activity or batch: a
// locked pipeline's host queue, in turn, else the pool's shared queue.
func (c *crawl) pageQueue() string {
	if len(c.locked) == 0 {
		return c.in.TaskQueue
	}
	return c.locked[int(c.launched)%len(c.locked)]
}

// pageStartTimeout bounds the wait of a page activity sent to queue for a
// worker: a locked pipeline's host queue is waited on HostScheduleToStart
// at most; the shared queue as long as it takes (0).
func (c *crawl) pageStartTimeout(queue string) time.Duration {
	if queue == c.in.TaskQueue {
		return 0
	}
	return c.in.Timing.HostScheduleToStart
}

// unstarted reports that the page activity or batch on queue ended with
// err before any of its pages started (a locked pipeline's queue not
// picked up in time, every attempt refused) in a run whose such pages
// wait (unstartedChange, asked when first needed).
func (c *crawl) unstarted(queue string, err error) bool {
	if !(queue != c.in.TaskQueue && isScheduleToStart(err)) && !slotgate.Refused(err) {
		return false
	}
	return versionOnce(c.dctx, &c.unstartedWait, unstartedChange)
}

// releaseUnstarted returns the claimed pages ids of an activity that never
// started (unstarted) to READY, their attempt not counted.
func (c *crawl) releaseUnstarted(ctx workflow.Context, ids []int64, queue string, cause error) {
	c.log().Info("pages not started; they wait to be claimed again", "task_queue", queue, "pages", len(ids), "error", cause)
	c.release(ctx, ids, "pages not started")
}

// release returns the claimed pages ids to READY, their attempt not
// counted (ReleasePages); what names them in the log line of a failure.
func (c *crawl) release(ctx workflow.Context, ids []int64, what string) {
	var counts activities.PageCounts
	in := activities.ReleasePagesInput{Ident: c.ident(), PageIDs: ids}
	if err := workflow.ExecuteLocalActivity(c.redisCtx(c.dctx), crawlActs.ReleasePages, in).Get(ctx, &counts); err != nil {
		c.log().Error("release "+what, "pages", len(ids), "error", err)
		return
	}
	c.setCounts(counts)
}
