package workflows

import (
	"strings"

	"go.temporal.io/sdk/workflow"
)

// Later retries of a crawl's start page (CrawlInput.PageRetryLater, as
// crawllater.go's for its other pages). The start page runs as a
// snapshot whose hooks run their in-run attempts (their retry policies);
// when a foreground hook's attempts all ended transiently
// (HookStatus.Transient) the start page is completed transient with every
// attempt spent (SeedPageInput.Transient, frontier Outcome.Last): it
// waits READY with status waiting for the delay of its later-retry number
// (failed when none is left, and the crawl fails as with any failed start
// page). Meanwhile the crawl is in retry_at and waits on a durable timer
// (waitForLater); when due it claims the start page again and runs it as
// the start page once more (the same snapshot, a new attempt; what the
// earlier attempt left on its host is kept under attempts/N), until it
// succeeds and its links are crawled. Counters move once: each attempt's
// responses are counted with its outcome, the page is queued while it
// waits. A stop ends the wait (the loop fails the waiting page: later
// retry not run), a limit leaves it READY.

// crawlStartLaterChange versions the start page's later retries: runs
// from before it complete a start page whose hooks ended transiently as
// the snapshot's state says.
const crawlStartLaterChange = "crawl-start-later"

// seedTransient reports that the start page, whose snapshot ended with
// st, waits for a later retry: later retries are on, the crawl is not
// stopping and a foreground hook's attempts all ended transiently; why
// names those hooks and their errors.
func (c *crawl) seedTransient(st Status) (bool, string) {
	if !c.laterOn() || c.stopping() {
		return false, ""
	}
	var why []string
	for _, h := range st.Hooks {
		if h.Transient && h.Result != nil {
			why = append(why, h.Plugin+"/"+h.Hook+": "+h.Result.Error)
		}
	}
	if len(why) == 0 || workflow.GetVersion(c.dctx, crawlStartLaterChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false, ""
	}
	return true, "ended transiently: " + strings.Join(why, "; ")
}

// waitForSeed waits until the start page is due for its later retry; it
// reports false when the crawl stopped or reached a limit meanwhile (the
// start page stays waiting: the loop fails it, or leaves it for a
// continue).
func (c *crawl) waitForSeed() bool {
	c.waitForLater()
	return !c.stopping() && c.limitReached() == ""
}

// crawlContinueSeedChange versions a continued crawl's start page: runs
// from before it run a start page the previous run left READY (waiting
// for its later retry, or released by an abort) as an ordinary page.
const crawlContinueSeedChange = "crawl-continue-start-page"

// continuesStartPage reports that this run is a continue (starter retry
// --continue, unabort) of a crawl with a start page, which asks the
// requeue whether the start page is READY (RequeueInput.StartPage): such
// a start page then runs as the start page (runSeed: it waits for its
// later retry first, as in the run before), its links crawled once it
// succeeds.
func (c *crawl) continuesStartPage() bool {
	return c.in.Rerun.Continue && c.in.URLList == nil &&
		workflow.GetVersion(c.dctx, crawlContinueSeedChange, workflow.DefaultVersion, 1) == 1
}
