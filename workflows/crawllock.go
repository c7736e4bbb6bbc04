package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
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

// crawlLockChange versions the routing of a locked crawl's pages.
const crawlLockChange = "crawl-lock-routes-pages"

// lockRoutes reports that this run routes pages to locked pipelines (the
// version is asked once, at the first claim).
func (c *crawl) lockRoutes() bool {
	if c.lockRoute == nil {
		on := workflow.GetVersion(c.dctx, crawlLockChange, workflow.DefaultVersion, 1) == 1
		c.lockRoute = &on
	}
	return *c.lockRoute
}

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
