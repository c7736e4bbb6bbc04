package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/internal/model"
)

// crawlLimits is a crawl run's view of its limits (model.Settings
// MaxPages, MaxBytes, MaxDuration). Pages and bytes are enforced where
// pages are claimed (activities ClaimPages: the frontier's exact page
// budget, bytes_downloaded), which names the limit it met; the duration
// is the workflow's own, from CrawlCarry.Started. A limit stops new
// claims; the pages in flight end, and the crawl finishes (state
// finished, FinishInput.Limit) with the rest of its pages READY for
// `starter retry --continue`. Every path is taken only when a limit is
// set: a crawl without limits (every recorded history) runs as before.
type crawlLimits struct {
	claim   string // the last claim's ClaimResult.Limit
	reached string // the limit the loop ended at
	// wake changes when the duration limit's timer fires (the loop's
	// waits end on it).
	wake   int
	cancel workflow.CancelFunc
}

// durationReached names the duration limit once it is reached.
func (c *crawl) durationReached() string {
	if d := c.settings.current.MaxDuration; d > 0 && !workflow.Now(c.dctx).Before(c.durationStart().Add(d)) {
		return model.DurationLimitReached(d)
	}
	return ""
}

// durationStart is when the duration limit counts from.
func (c *crawl) durationStart() time.Time {
	if c.carry.Started.IsZero() {
		return workflow.GetInfo(c.dctx).WorkflowStartTime
	}
	return c.carry.Started
}

// limitReached names the limit the crawl is at ("" when none): the
// duration, else what the last claim said.
func (c *crawl) limitReached() string {
	if c.limits.reached != "" {
		return c.limits.reached
	}
	if r := c.durationReached(); r != "" {
		return r
	}
	return c.limits.claim
}

// armDurationLimit (re)starts the duration limit's timer for the current
// settings; none without a duration limit.
func (c *crawl) armDurationLimit() {
	c.disarmDurationLimit()
	d := c.settings.current.MaxDuration
	if d <= 0 {
		return
	}
	left := c.durationStart().Add(d).Sub(workflow.Now(c.dctx))
	c.limits.cancel = c.after(left, "crawl duration limit", func() { c.limits.wake++ })
}

func (c *crawl) disarmDurationLimit() {
	if c.limits.cancel != nil {
		c.limits.cancel()
		c.limits.cancel = nil
	}
}

// drainAtLimit shows a crawl at a limit with pages in flight as draining.
func (c *crawl) drainAtLimit() {
	if c.limitReached() != "" && c.job.state == model.StateActive && !c.stopping() {
		c.setState(model.StateDraining, false)
	}
}
