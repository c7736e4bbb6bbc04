package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// CrawlWorkflow runs a crawl job (DESIGN.md §8, docs/crawls.md): the start
// URL as a child SnapshotWorkflow with every plugin (ID IDENT/seed, in the
// crawl-page role), then every further page as one RunPage activity on the
// pool's shared queue, as many at once as the job's concurrency allows,
// claimed from the frontier in Redis (internal/frontier) lowest depth
// first; with CrawlTiming.BatchPages, as page batches instead: one
// RunPageBatch activity at a time (crawlbatch.go). Redis is the frontier; the history holds only the pages in
// flight. A run whose history grows past Timing.HistoryEvents stops
// launching, drains and continues as new, carrying its settings, rules,
// counts and the hosts to tear down. At the end every host that ran the
// crawl's setup hooks tears them down, then the job's final state is
// written.
//
// A crawl's limits (Settings MaxPages, MaxBytes, MaxDuration; limits.go)
// stop its claims; it then drains and finishes naming the limit, its
// other pages READY for a continue (CrawlRerun.Continue).
//
// States: active (shown as waiting while nothing but pages waiting for a
// later retry is left: crawllater.go, StateWaiting) → draining (no page ready, some in
// flight) → finished |
// aborted (abort signal or cancel: pages in flight are stopped and their
// claims released) | failed (the start page failed, or MaxDuration ran
// out). It answers the status query, the abort signal, the set_settings
// update and signal (concurrency 0 pauses) and the set_rules update.
func CrawlWorkflow(ctx workflow.Context, in CrawlInput) (CrawlStatus, error) {
	if err := in.Validate(); err != nil {
		return CrawlStatus{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("crawl input: %v", err), "InvalidCrawlInput", err)
	}
	c := newCrawl(ctx, in)
	if err := c.serve(ctx, func() (CrawlStatus, error) { return c.status(), nil }, c.serveRules(ctx)); err != nil {
		return CrawlStatus{}, fmt.Errorf("register handlers of %s: %w", c.ident(), err)
	}
	stopDeadline := c.startDeadline(c.carry.Deadline.Sub(workflow.Now(c.dctx)), !c.carry.Deadline.IsZero())
	workflow.Go(c.dctx, c.writes.run)
	c.armDurationLimit()

	retry := in.Rerun != nil && in.Carry == nil // the first run of a retry
	if retry {
		c.reopen()
	}
	c.setState(model.StateActive, true)
	if in.Carry == nil && in.Rerun == nil && len(c.rules.Rules) > 0 {
		// The hosts judge links with the latest rules in Redis.
		rin := activities.SetRulesInput{Ident: c.ident(), Rules: c.rules}
		c.write("set rules", crawlActs.SetRules, rin)
	}
	if retry {
		c.requeue()
		if in.Rerun.Continue && !c.stopping() {
			// The continued crawl's settings (its limits lifted or
			// changed) are the job's from now on.
			c.applySettings(in.Settings)
		}
	}
	if !c.carry.SeedDone && !c.stopping() {
		if in.URLList != nil {
			c.runURLList()
		} else {
			c.runSeed()
		}
	}
	c.loop()
	stopDeadline()
	c.disarmDurationLimit()
	if c.continueAsNew {
		return c.handOn()
	}
	c.teardown()
	c.sealWACZ()
	c.finish()
	err := c.awaitEnd()
	return c.status(), err
}

// crawl is the state of one CrawlWorkflow run.
type crawl struct {
	in    CrawlInput
	carry CrawlCarry
	// control: the job's state, settings, writer, handlers and stop (its
	// runCtx is cancelled on stop: pages in flight stop).
	control

	rules scope.Versioned

	inflight  map[int64]activities.PageSpec
	released  []int64 // pages stopped by an abort, to release
	completed int64   // page activities ended in this run
	claims    int     // claim requests of this run (token sequence)
	launched  int64   // page activities launched in this run
	// shares is the concurrency the batches in flight hold between them
	// (BatchConcurrency: each batch's share).
	shares int
	counts activities.PageCounts
	// continueAsNew: the history is long enough; the run drains and hands on.
	continueAsNew bool
	// limits: the crawl's page, byte and duration limits (limits.go).
	limits crawlLimits

	attr crawlAttr
	// seed is the start page's running snapshot (seedSettingsChange on),
	// which settings changes are passed on to.
	seed workflow.ChildWorkflowFuture
	// tornDown are the host queues the teardown ended the crawl on, with
	// what each reported (teardownByLease), in the order they answered.
	tornDown []tornDown
	// retryAt is the due time the retry_at set has for the job (zero:
	// not in it), waitShown whether it means only waiting pages are left
	// (asked once): crawllater.go.
	retryAt   time.Time
	waitShown *bool
	// idle: the run waits for a later retry with nothing else left;
	// retryUnknown: retryAt may not be what Redis has (a run continued as
	// new, crawllater.go retryAtKnown).
	idle, retryUnknown bool
	// lockRoute (asked once) and locked: the host queues of the pipelines
	// locked to the crawl, as the last claim said (crawllock.go).
	lockRoute *bool
	locked    []string
	// seedContinued: this continue (CrawlRerun.Continue) runs the start
	// page the previous run left READY as the start page
	// (continuesStartPage).
	seedContinued bool
	// unstartedWait (asked once): pages never started wait (crawllock.go).
	unstartedWait *bool
	// collect (asked once): one coroutine waits for every page activity
	// in flight, pending in launch order (crawlcollect.go).
	collect *bool
	pending []pendingPage
}

// tornDown is one host's answer to TeardownCrawl.
type tornDown struct {
	queue  string
	report activities.TeardownReport
}

// crawlAttr is what the pages search attributes last showed.
type crawlAttr struct {
	done, queued int64
	pending      bool
}

func newCrawl(ctx workflow.Context, in CrawlInput) *crawl {
	c := &crawl{
		in:       in,
		control:  newControl(ctx, in.Crawl.Job.Ident, "crawl", in.Settings),
		rules:    scope.Versioned{Rules: in.Rules},
		inflight: map[int64]activities.PageSpec{},
	}
	c.runCtx, c.cancelRun = workflow.WithCancel(c.dctx)
	c.apply = c.applySettings
	c.hash = crawlHash{ownHash{&c.control}}
	if in.Carry != nil {
		c.carry = *in.Carry
		c.settings.version = c.carry.SettingsVersion
		c.rules = c.carry.Rules
		c.counts = c.carry.Counts
		c.job.failure = c.carry.Failure
		c.retryUnknown = true
	} else {
		c.carry.Run = 1
		if in.Rerun != nil {
			// A retry goes on with the last settings and rules; the
			// start page ran unless the requeue says otherwise.
			c.settings.version = in.Rerun.SettingsVersion
			c.rules = in.Rerun.Rules
			c.carry.SeedDone = true
		}
		if in.Timing.MaxDuration > 0 {
			c.carry.Deadline = workflow.Now(ctx).Add(in.Timing.MaxDuration)
		}
		c.carry.Started = workflow.Now(ctx)
	}
	c.attr.done, c.attr.queued = -1, -1
	return c
}

func (c *crawl) ident() string { return c.in.Crawl.Job.Ident }

// CrawlSeedID is the workflow ID of the start page's snapshot of the crawl
// whose workflow ID is crawlID.
func CrawlSeedID(crawlID string) string { return crawlID + "/seed" }

func (c *crawl) stopping() bool { return c.job.stopReason != "" }

// reopen takes the finished crawl back in Redis (ReopenJob, the snapshot
// retry's write) and waits for it, so the requeue follows a job that is
// pending again.
func (c *crawl) reopen() {
	seq := c.write("reopen job", poolActs.ReopenJob, activities.ReopenInput{Ident: c.ident(), Key: c.runID + "/reopen"})
	_ = c.writes.await(c.dctx, seq)
}

// requeue makes the previous run's failed pages READY again (once per
// run: the run id is the token). A failed start page is run again as the
// start page, and so is a continued crawl's READY one (crawlstartlater.go
// continuesStartPage). A URL-list crawl has no start page: its page 1 is
// the list's first URL, run again as an ordinary page (retryListSeeded);
// its list, when cut short while it was seeded, is seeded to its end
// (resumesList).
func (c *crawl) requeue() {
	var res activities.RequeueResult
	in := activities.RequeueInput{Ident: c.ident(), Token: c.runID + "/requeue", Continue: c.in.Rerun.Continue}
	in.StartPage = c.continuesStartPage()
	if err := workflow.ExecuteLocalActivity(c.redisCtx(c.dctx), crawlActs.RequeueFailed, in).Get(c.dctx, &res); err != nil {
		c.job.failure = fmt.Sprintf("requeue failed pages: %v", err)
		c.stop(c.job.failure, false)
		return
	}
	c.log().Info("retrying failed pages", "pages", res.Pages, "start_page", res.Seed, "previous_run", c.in.Rerun.PreviousRunID,
		"continue", c.in.Rerun.Continue)
	c.carry.SeedDone = (!res.Seed || c.retryListSeeded()) && !c.resumesList(res.Counts)
	c.seedContinued = in.StartPage && res.Seed
	c.setCounts(res.Counts)
}

// retryListSeededChange versions a retried URL-list crawl whose page 1
// failed: runs from before it downloaded and seeded the list again
// (runURLList), failing the retry when the list had gone meanwhile and
// adding the URLs a changed list had gained.
const retryListSeededChange = "crawl-retry-urllist-seeded"

// retryListSeeded reports that this retry of a URL-list crawl leaves its
// list alone although page 1 was requeued: the frontier holds every listed
// page (page 1 READY again at depth 0, a page as the others), and the
// retry's input the list's start URLs (internal/submit crawlRerunInput).
func (c *crawl) retryListSeeded() bool {
	return c.in.URLList != nil && workflow.GetVersion(c.dctx, retryListSeededChange, workflow.DefaultVersion, 1) == 1
}

// resumeListChange versions a retry or continue of a URL-list crawl whose
// list was cut short while it was seeded (PageCounts.ListPartial: the
// SeedURLList's attempts ran out, or it was stopped, between two frontier
// writes): from it on such a run seeds the list again (runURLList), which
// adds only the URLs the frontier does not have; runs from before it left
// the rest of the list out.
const resumeListChange = "crawl-urllist-resume"

// resumesList reports that this retry or continue seeds the rest of a URL
// list its frontier marks cut short (counts: the requeue's).
func (c *crawl) resumesList(counts activities.PageCounts) bool {
	return c.in.URLList != nil && counts.ListPartial &&
		workflow.GetVersion(c.dctx, resumeListChange, workflow.DefaultVersion, 1) == 1
}

// seedSettingsChange versions the start page's settings: from it on, a
// paused crawl starts its start page only when resumed, and every
// settings change reaches the running start page (before, the start page
// kept the submitted settings: a crawl submitted paused never started).
const seedSettingsChange = "crawl-seed-follows-settings"

// runSeed claims the start page and runs it as a child SnapshotWorkflow
// with every plugin, then completes it from what the snapshot left on its
// host: its hooks' Snapshot records are the page's links.
func (c *crawl) runSeed() {
	for n := 1; c.runSeedAttempt(n); n++ {
		// The start page waits for a later retry (crawlstartlater.go).
		if !c.waitForSeed() {
			return
		}
	}
}

// runSeedAttempt is the n-th claim of the start page in this run (n > 1:
// its later retries); it reports that the start page now waits for a
// later retry.
func (c *crawl) runSeedAttempt(n int) bool {
	var seeded activities.SeedCrawlResult
	in := activities.SeedCrawlInput{Ident: c.ident(), URL: c.in.Crawl.Job.URL, MaxDepth: c.in.Crawl.MaxDepth,
		PageAttempts: c.in.Crawl.PageAttempts, Token: fmt.Sprintf("%s/r%d/seed", c.runID, c.carry.Run), RetryLater: c.in.PageRetryLater}
	if n > 1 {
		in.Token += fmt.Sprintf("-%d", n)
	}
	if err := workflow.ExecuteLocalActivity(c.redisCtx(c.dctx), crawlActs.SeedCrawl, in).Get(c.dctx, &seeded); err != nil {
		c.job.failure = fmt.Sprintf("seed the frontier: %v", err)
		c.stop(c.job.failure, false)
		return false
	}
	c.setCounts(seeded.Counts)
	if seeded.Page == nil {
		if (n > 1 || c.seedContinued) && seeded.Counts.Waiting > 0 {
			return true // not due yet by Redis' clock
		}
		c.carry.SeedDone = true // completed by an earlier run
		return false
	}
	page := *seeded.Page
	c.inflight[page.ID] = page
	defer delete(c.inflight, page.ID)
	seedIn := c.in.Seed
	follows := workflow.GetVersion(c.dctx, seedSettingsChange, workflow.DefaultVersion, 1) == 1
	if follows {
		// A crawl submitted paused starts its start page when resumed,
		// with the crawl's settings of then.
		_ = workflow.Await(c.dctx, func() bool { return c.settings.current.Concurrency > 0 || c.stopping() })
		if c.stopping() {
			c.released = append(c.released, page.ID)
			return false
		}
		seedIn.Settings = c.settings.current
	}
	cctx := workflow.WithChildOptions(c.runCtx, childOptions(CrawlSeedID(c.ident()), c.in.TaskQueue, "start page "+summary(page.URL)))
	var st Status
	child := workflow.ExecuteChildWorkflow(cctx, SnapshotWorkflow, seedIn)
	if follows {
		c.seed = child // applySettings passes every change on
		defer func() { c.seed = nil }()
	}
	err := child.Get(c.dctx, &st)
	if end, ok := EndStatus(err); ok {
		// A failed or aborted snapshot (InputV2) ends its workflow with
		// its Status as the error's details.
		st, err = end, nil
	}
	if c.stopping() {
		c.released = append(c.released, page.ID)
		return false
	}
	note := ""
	switch {
	case err != nil:
		note = fmt.Sprintf("start page snapshot: %v", err)
	case st.State != model.StateFinished:
		note = fmt.Sprintf("start page snapshot %s: %s", st.State, st.Error)
	}
	transient, why := c.seedTransient(st)
	if transient {
		note = cmp.Or(note, why)
	}
	var res activities.PageResult
	if st.HostQueue != "" {
		c.addHost(st.HostQueue)
		seed := activities.SeedPageInput{Crawl: c.in.Crawl, Page: page, Succeeded: note == "", Note: note, Hooks: finalHooks(st), Transient: transient}
		id := c.ident() + "/seed/complete"
		if n > 1 {
			id += fmt.Sprintf("#a%d", page.Attempt)
		}
		actx := workflow.WithActivityOptions(c.dctx, c.pageOptions(st.HostQueue, id, "complete start page", c.in.Timing.HostScheduleToStart, c.in.Timing.PageTimeout))
		err = workflow.ExecuteActivity(actx, crawlHostActs.CompleteSeedPage, seed).Get(c.dctx, &res)
	} else {
		err = errors.New("the start page's snapshot ran on no host")
	}
	if err != nil {
		res = c.completeAttempt(c.dctx, page, fmt.Sprintf("%s; complete the start page: %v", note, err), false)
	}
	c.pageDone(res)
	if transient && res.Status == activities.PageTransient && res.Counts.Waiting > 0 {
		return true
	}
	if res.Status != activities.PageSucceeded {
		c.job.failure = "start page failed: " + strings.TrimPrefix(cmp.Or(note, res.Error), "; ")
	}
	c.carry.SeedDone = true
	return false
}

// runURLList starts a URL-list crawl: one SeedURLList activity on the
// pool downloads the list (retried by the start page's retry policy) and
// seeds the frontier with its URLs, which the loop then runs as pages.
// The listed URLs' hosts become the crawl's start hosts (carried on in
// Crawl.Scope). A list that cannot be had fails the crawl, naming it.
func (c *crawl) runURLList() {
	l := *c.in.URLList
	in := activities.SeedURLListInput{Ident: c.ident(), List: l, MaxDepth: c.in.Crawl.MaxDepth,
		PageAttempts: c.in.Crawl.PageAttempts, UserAgent: c.settings.current.UserAgent, Scope: c.in.Crawl.Scope, RetryLater: c.in.PageRetryLater}
	actx := workflow.WithActivityOptions(c.runCtx, workflow.ActivityOptions{
		TaskQueue:           c.in.TaskQueue,
		ActivityID:          c.ident() + "/url-list",
		Summary:             "url list " + summary(l.URL),
		StartToCloseTimeout: l.FetchTimeout + c.in.Timing.PageTimeout,
		RetryPolicy:         retryPolicy(c.in.Seed.Retry.Default, false),
	})
	var res activities.SeedURLListResult
	if err := workflow.ExecuteActivity(actx, crawlActs.SeedURLList, in).Get(c.dctx, &res); err != nil {
		if c.stopping() {
			return
		}
		var appErr *temporal.ApplicationError
		msg := err.Error()
		if errors.As(err, &appErr) {
			msg = appErr.Message()
		}
		c.job.failure = fmt.Sprintf("url list %s: %s", l.URL, strings.TrimPrefix(msg, "url list "+l.URL+": "))
		c.stop(c.job.failure, false)
		return
	}
	c.in.Crawl.Scope.StartURLs = res.Starts
	c.setCounts(res.Counts)
	c.log().Info("url list seeded", "urls", res.URLs, "bad_lines", res.Bad, "denied", res.Denied, "start_hosts", len(res.Starts))
	c.carry.SeedDone = true
}

// finalHooks are the snapshot's hooks whose final status lets their links
// count (succeeded or noresults), as PLUGIN/NAME.
func finalHooks(st Status) []string {
	var out []string
	for _, h := range st.Hooks {
		if h.Result != nil && (h.Result.Status == model.StatusSucceeded || h.Result.Status == model.StatusNoResults) {
			out = append(out, h.Plugin+"/"+h.Hook)
		}
	}
	return out
}

// completeAttempt records a page attempt failed, or transient (the page
// is claimed again while it has attempts), when its activity could not
// (CompletePage is idempotent: a page already completed stays as is).
// ctx is the calling coroutine's: blocking on another coroutine's context
// panics the workflow task (a page whose activity failed did, from its
// launch coroutine); the command issued is the same whichever it is.
func (c *crawl) completeAttempt(ctx workflow.Context, p activities.PageSpec, note string, transient bool) activities.PageResult {
	in := activities.CompletePageInput{Ident: c.ident(), PageID: p.ID, Attempt: p.Attempt, Note: note, Transient: transient}
	var counts activities.PageCounts
	if err := workflow.ExecuteLocalActivity(c.redisCtx(c.dctx), crawlActs.CompletePage, in).Get(ctx, &counts); err != nil {
		c.log().Error("record a page attempt", "page", p.ID, "transient", transient, "error", err)
	}
	status := activities.PageFailed
	if transient {
		status = activities.PageTransient
	}
	return activities.PageResult{PageID: p.ID, Attempt: p.Attempt, Status: status, Error: note, Counts: counts}
}

// loop claims pages and runs them until the frontier is finished, the
// crawl stops, or the history is long enough to hand on.
func (c *crawl) loop() {
	idle := 0
	for !c.stopping() {
		if c.historyFull() {
			c.continueAsNew = true
			break
		}
		limit := c.settings.current.Concurrency
		if c.busy(limit) {
			if len(c.inflight) == 0 && c.durationReached() != "" {
				c.limits.reached = c.durationReached() // paused past its duration limit
				break
			}
			seen, version, wake := c.completed, c.settings.version, c.limits.wake
			_ = workflow.Await(c.dctx, func() bool {
				return c.stopping() || c.completed != seen || c.settings.version != version || c.limits.wake != wake
			})
			continue
		}
		var res activities.ClaimResult
		rulesVersion := c.rules.Version
		if c.durationReached() == "" {
			res = c.claim(c.claimSize(limit))
		}
		if c.batched() && len(res.Pages) > 0 {
			c.launchBatch(res.Pages, rulesVersion)
		} else {
			for _, p := range res.Pages {
				c.launch(p)
			}
		}
		if len(res.Pages) > 0 || c.stopping() {
			idle = 0
			continue
		}
		if len(c.inflight) > 0 {
			c.drainAtLimit()
			seen, version, wake := c.completed, c.settings.version, c.limits.wake
			_ = workflow.Await(c.dctx, func() bool {
				return c.stopping() || c.completed != seen || c.settings.version != version || c.limits.wake != wake
			})
			continue
		}
		if c.counts.Finished() {
			break
		}
		if reason := c.limitReached(); reason != "" {
			// Nothing in flight, no page claimable under the limit: the
			// crawl ends at it, its other pages READY for a continue.
			c.limits.reached = reason
			break
		}
		if c.onlyWaiting() {
			c.waitForLater()
			idle = 0
			continue
		}
		// Nothing claimable, nothing in flight, yet the frontier is not
		// finished: a propagation backlog (claims settle it) or stale
		// queue entries. Look again shortly; never spin.
		idle++
		if idle > 20 && c.counts.Claimed > 0 && c.counts.Ready == 0 && c.counts.Propagating == 0 {
			c.job.failure = fmt.Sprintf("%d pages stay claimed with nothing in flight", c.counts.Claimed)
			c.log().Error("crawl cannot finish", "claimed", c.counts.Claimed)
			break
		}
		_ = workflow.Sleep(c.runCtx, time.Second)
	}
	// Drain: every page in flight ends (stopped ones are released).
	_ = workflow.Await(c.dctx, func() bool { return len(c.inflight) == 0 })
	if len(c.released) > 0 {
		slices.Sort(c.released)
		c.release(c.dctx, c.released, "pages of a stopped crawl")
		c.released = nil
	}
	if !c.continueAsNew {
		c.failWaiting()
	}
}

// historyFull reports that this run's history reached its budget.
func (c *crawl) historyFull() bool {
	info := workflow.GetInfo(c.dctx)
	return info.GetCurrentHistoryLength() >= c.in.Timing.HistoryEvents || info.GetContinueAsNewSuggested()
}

// claim claims up to n pages with the latest rules.
func (c *crawl) claim(n int) activities.ClaimResult {
	c.claims++
	token := fmt.Sprintf("%s/r%d/claim-%d", c.runID, c.carry.Run, c.claims)
	in := activities.ClaimInput{Ident: c.ident(), N: n, Token: token, Rules: c.rules,
		MaxPages: c.settings.current.MaxPages, MaxBytes: c.settings.current.MaxBytes, Batch: c.batched()}
	if c.lockRoutes() {
		in.LockQueue = c.in.TaskQueue
	}
	var res activities.ClaimResult
	if err := workflow.ExecuteLocalActivity(c.redisCtx(c.dctx), crawlActs.ClaimPages, in).Get(c.dctx, &res); err != nil {
		// Only non-retryable errors get here (the frontier is gone).
		c.job.failure = fmt.Sprintf("claim pages: %v", err)
		c.stop(c.job.failure, false)
		return activities.ClaimResult{}
	}
	c.limits.claim = res.Limit
	c.locked = res.Locked
	c.setCounts(res.Counts)
	return res
}

// pageOptions are the options of a page's activity (RunPage,
// RunPageBatch, CompleteSeedPage) on queue, waiting there wait at most. It
// heartbeats, and its retry policy reruns an attempt that could not record
// its outcome (the worker died, Redis stayed down); a page's own transient
// failures are new attempts of the frontier.
func (c *crawl) pageOptions(queue, id, summary string, wait, startToClose time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		ActivityID:             id,
		Summary:                summary,
		ScheduleToStartTimeout: wait,
		StartToCloseTimeout:    startToClose,
		HeartbeatTimeout:       c.in.Timing.HeartbeatTimeout,
		WaitForCancellation:    true,
		RetryPolicy:            backoffPolicy(30*time.Second, c.in.Timing.PageActivityAttempts),
	}
}

// summary shortens a URL for a Web UI summary.
func summary(u string) string {
	if len(u) > 200 {
		return u[:200] + "…"
	}
	return u
}

// launch runs one page attempt as a RunPage activity on the pool's queue.
func (c *crawl) launch(p activities.PageSpec) {
	queue := c.pageQueue()
	c.inflight[p.ID] = p
	c.launched++
	opts := c.pageOptions(queue, fmt.Sprintf("%s/page-%d#a%d", c.ident(), p.ID, p.Attempt), summary(p.URL), c.pageStartTimeout(queue), c.in.Timing.PageTimeout)
	in := activities.RunPageInput{Crawl: c.in.Crawl, Page: p, Settings: c.settings.current}
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(c.runCtx, opts), crawlActs.RunPage, in)
	if c.collects() {
		c.pending = append(c.pending, pendingPage{page: p, queue: queue, fut: fut})
		return
	}
	workflow.Go(c.dctx, func(gc workflow.Context) {
		var res activities.PageResult
		err := fut.Get(gc, &res)
		c.pageEnded(gc, p, queue, res, err)
	})
}

// pageEnded takes in the end of page p's activity on queue (its result
// res, or err), in the calling coroutine gc.
func (c *crawl) pageEnded(gc workflow.Context, p activities.PageSpec, queue string, res activities.PageResult, err error) {
	switch {
	case err == nil:
	case c.stopping() && temporal.IsCanceledError(err):
		c.released = append(c.released, p.ID)
		res = activities.PageResult{PageID: p.ID, Attempt: p.Attempt}
	case c.unstarted(queue, err):
		c.releaseUnstarted(gc, []int64{p.ID}, queue, err)
	case queue != c.in.TaskQueue && isScheduleToStart(err):
		res = c.completeAttempt(gc, p, fmt.Sprintf("the pipeline locked to the crawl did not start the page (%s): %v", queue, err), true)
	default:
		res = c.completeAttempt(gc, p, fmt.Sprintf("page activity failed: %v", err), false)
	}
	delete(c.inflight, p.ID)
	c.completed++
	if res.Status != "" {
		c.pageDone(res)
	}
}

// pageDone takes a finished page attempt into account.
func (c *crawl) pageDone(res activities.PageResult) {
	c.addHost(res.HostQueue)
	c.setCounts(res.Counts)
}

// addHost remembers a host whose crawl setup must be torn down ("": none).
func (c *crawl) addHost(q string) {
	if i, found := slices.BinarySearch(c.carry.SetupHosts, q); q != "" && !found {
		c.carry.SetupHosts = slices.Insert(c.carry.SetupHosts, i, q)
	}
}

// setCounts takes newer counts and moves between active and draining.
func (c *crawl) setCounts(n activities.PageCounts) {
	if n == (activities.PageCounts{}) {
		return
	}
	c.counts = n
	c.indexRetryAt()
	if !c.stopping() && !c.job.state.Final() {
		switch {
		case n.Ready == 0 && len(c.inflight) > 0 && c.job.state == model.StateActive:
			c.setState(model.StateDraining, false)
		case n.Ready > 0 && c.job.state == model.StateDraining && c.limitReached() == "":
			c.setState(model.StateActive, false)
		}
	}
	c.publishPages()
}

// handOn drains and continues as new, carrying the run's state.
func (c *crawl) handOn() (CrawlStatus, error) {
	c.upsertSearchAttributes()
	if err := c.awaitEnd(); err != nil {
		return c.status(), err
	}
	next := c.in
	next.Settings = c.settings.current
	carry := c.carry
	carry.Run++
	carry.SettingsVersion = c.settings.version
	carry.Rules = c.rules
	carry.Counts = c.counts
	carry.Failure = c.job.failure
	carry.Pages += c.launched
	next.Carry = &carry
	c.log().Info("crawl continues as new", "run", carry.Run, "pages_launched", c.launched,
		"history_events", workflow.GetInfo(c.dctx).GetCurrentHistoryLength())
	return c.status(), workflow.NewContinueAsNewError(c.dctx, CrawlWorkflow, next)
}

// teardownLiveChange versions teardown's liveness check: histories from
// before it tear down every setup host, a dead one's queue waited out;
// teardownLiveVersion skips a host HostAlive reports gone but waits out
// HostScheduleToStart on one whose record has not expired yet (a host
// killed less than worker.pipeline_ttl before the teardown);
// teardownLeaseVersion waits on a host's queue no longer than its lease
// and asks again, so such a host is skipped once its record expires.
const (
	teardownLiveChange   = "crawl-teardown-skips-dead-hosts"
	teardownLiveVersion  = 1
	teardownLeaseVersion = 2
)

// teardown ends the crawl on every host that ran its setup. A host the
// pools' registry knows is gone (a worker killed mid-crawl) is skipped at
// once instead of holding the finished crawl until nothing picks its queue
// up; a host whose liveness cannot be told is tried as before.
func (c *crawl) teardown() {
	hosts := c.carry.SetupHosts
	switch workflow.GetVersion(c.dctx, teardownLiveChange, workflow.DefaultVersion, teardownLeaseVersion) {
	case teardownLeaseVersion:
		c.teardownByLease(hosts)
		return
	case teardownLiveVersion:
		hosts = c.liveHosts(hosts)
	}
	var futs []workflow.Future
	for _, q := range hosts {
		actx := workflow.WithActivityOptions(c.dctx, c.teardownOptions(q, "", c.in.Timing.HostScheduleToStart))
		futs = append(futs, workflow.ExecuteActivity(actx, crawlHostActs.TeardownCrawl, activities.TeardownInput{Ident: c.ident()}))
	}
	for i, f := range futs {
		if err := f.Get(c.dctx, nil); err != nil {
			c.log().Warn("crawl teardown on a host", "host_queue", hosts[i], "error", err)
		}
	}
}

// teardownOptions are the options of TeardownCrawl on host queue q; suffix
// tells a scheduling after the first apart (requeueSuffix).
func (c *crawl) teardownOptions(q, suffix string, wait time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              q,
		ActivityID:             fmt.Sprintf("%s/teardown/%s%s", c.ident(), q, suffix),
		Summary:                "tear down crawl on " + q,
		ScheduleToStartTimeout: wait,
		StartToCloseTimeout:    c.in.Timing.TeardownTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	}
}

// teardownByLease tears down on every host at once (teardownLeaseVersion):
// each host is asked for its liveness first (HostLiveness), a gone one is
// skipped, and a live one's TeardownCrawl waits on its queue no longer
// than the host's lease (plus leaseMargin). A host killed so recently that
// its record still looks alive has not picked the teardown up by then, and
// is asked again: by now its record has expired and it is skipped. A host
// that stays alive without starting the teardown (every slot busy) is
// waited for HostScheduleToStart in all, as before; one whose liveness
// cannot be read gets the whole wait.
func (c *crawl) teardownByLease(hosts []string) {
	pending := len(hosts)
	for _, q := range hosts {
		workflow.Go(c.dctx, func(ctx workflow.Context) {
			defer func() { pending-- }()
			c.teardownOn(ctx, q)
		})
	}
	_ = workflow.Await(c.dctx, func() bool { return pending == 0 })
}

// teardownOn tears the crawl down on host queue q (teardownByLease).
func (c *crawl) teardownOn(ctx workflow.Context, q string) {
	budget := c.in.Timing.HostScheduleToStart
	for round := 1; ; round++ {
		var live activities.Liveness
		actx := workflow.WithActivityOptions(ctx, hostAliveOptions(c.in.TaskQueue,
			fmt.Sprintf("%s/teardown-alive/%s%s", c.ident(), q, requeueSuffix(round)), c.in.Timing.HostScheduleToStart))
		err := workflow.ExecuteActivity(actx, poolActs.HostLiveness, q).Get(ctx, &live)
		if err == nil && !live.Alive {
			c.log().Info("crawl teardown skipped: the host is gone", "host_queue", q, "round", round)
			return
		}
		wait := budget
		if err == nil && live.Lease > 0 {
			wait = min(budget, live.Lease+leaseMargin)
		}
		budget -= wait
		actx = workflow.WithActivityOptions(ctx, c.teardownOptions(q, requeueSuffix(round), wait))
		var rep activities.TeardownReport
		err = workflow.ExecuteActivity(actx, crawlHostActs.TeardownCrawl, activities.TeardownInput{Ident: c.ident()}).Get(ctx, &rep)
		switch {
		case err == nil:
			c.tornDown = append(c.tornDown, tornDown{queue: q, report: rep})
			return
		case isScheduleToStart(err) && budget > 0:
			continue // not started within the host's lease: is it still alive?
		default:
			c.log().Warn("crawl teardown on a host", "host_queue", q, "error", err)
			return
		}
	}
}

// liveHosts returns the host queues HostAlive does not know to be dead,
// asking for all of them at once.
func (c *crawl) liveHosts(queues []string) []string {
	futs := make([]workflow.Future, len(queues))
	for i, q := range queues {
		actx := workflow.WithActivityOptions(c.dctx, hostAliveOptions(c.in.TaskQueue, fmt.Sprintf("%s/teardown-alive/%s", c.ident(), q), c.in.Timing.HostScheduleToStart))
		futs[i] = workflow.ExecuteActivity(actx, poolActs.HostAlive, q)
	}
	var live []string
	for i, f := range futs {
		var alive bool
		err := f.Get(c.dctx, &alive)
		if err == nil && !alive {
			c.log().Info("crawl teardown skipped: the host is gone", "host_queue", queues[i])
			continue
		}
		live = append(live, queues[i])
	}
	return live
}

// sealWACZChange versions the crawl's seal writing its WACZ: histories
// from before it end after the teardown.
const sealWACZChange = "crawl-seal-wacz"

// sealWACZ writes the crawl's WACZ on one host the teardown reached: the
// first of them in setup order, with every host's reported WARC files, so
// that host can name the ones it cannot see (archive dirs not shared). A
// crawl no live host tore down gets none (starter export writes one
// later); a failure is logged, never the crawl's: its pages are archived.
func (c *crawl) sealWACZ() {
	if workflow.GetVersion(c.dctx, sealWACZChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	reached := map[string]bool{}
	in := activities.SealCrawlInput{Ident: c.ident(), URL: c.in.Crawl.Job.URL}
	seen := map[string]bool{}
	for _, t := range c.tornDown {
		reached[t.queue] = true
		for _, w := range t.report.WARCs {
			if !seen[w.Name] {
				seen[w.Name] = true
				in.Reported = append(in.Reported, w)
			}
		}
	}
	i := slices.IndexFunc(c.carry.SetupHosts, func(q string) bool { return reached[q] })
	if i < 0 {
		c.log().Warn("no WACZ at the seal: the teardown reached no worker host (starter export writes one)")
		return
	}
	host := c.carry.SetupHosts[i]
	timeout := c.in.Timing.SealTimeout
	if timeout <= 0 {
		timeout = c.in.Timing.PageTimeout
	}
	actx := workflow.WithActivityOptions(c.dctx, workflow.ActivityOptions{
		TaskQueue:              host,
		ActivityID:             c.ident() + "/seal-wacz",
		Summary:                "write the crawl's WACZ on " + host,
		ScheduleToStartTimeout: c.in.Timing.HostScheduleToStart,
		StartToCloseTimeout:    timeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 2},
	})
	var rep activities.SealCrawlReport
	if err := workflow.ExecuteActivity(actx, crawlHostActs.SealCrawl, in).Get(c.dctx, &rep); err != nil {
		c.log().Warn("the crawl's WACZ was not written at the seal", "host_queue", host, "error", err)
		return
	}
	c.log().Info("crawl sealed into its WACZ", "host_queue", host, "wacz", rep.WACZ, "error", rep.Error, "missing_warcs", len(rep.Missing))
	ar := rep.Archive(c.ident())
	c.write("set wacz", poolActs.SetArchive, ar)
}

// crawlFinalCountsChange versions the final counts read from the frontier
// (finalCounts): runs from before it end with the counts they took in
// last.
const crawlFinalCountsChange = "crawl-final-counts"

// finalCounts reads the page counts once the crawl's pages are over. The
// counts of each result the workflow takes in (a page's, a claim's) are a
// snapshot of their own time, and results that end together can be taken
// in either order: a claim that found the page limit while pages were in
// flight can be taken in after those pages' results and show them still
// claimed.
func (c *crawl) finalCounts() {
	if workflow.GetVersion(c.dctx, crawlFinalCountsChange, workflow.DefaultVersion, 1) != 1 {
		return
	}
	var n activities.PageCounts
	if err := workflow.ExecuteLocalActivity(c.redisCtx(c.dctx), crawlActs.PageCounts, c.ident()).Get(c.dctx, &n); err != nil {
		c.log().Warn("final page counts not read; the last ones taken in stand", "error", err.Error())
		return
	}
	if n != (activities.PageCounts{}) {
		c.counts = n
	}
}

// finish writes the final state once; the frontier expires with the job.
func (c *crawl) finish() {
	c.finalCounts()
	state, reason := c.finalState()
	c.job.failure, c.job.state = reason, state
	c.upsertSearchAttributes()
	workflow.SetCurrentDetails(c.dctx, c.details())
	in := activities.FinishInput{Ident: c.ident(), State: state, Error: reason, Key: c.runID + "/finish"}
	if state == model.StateFinished {
		in.Limit = c.limits.reached // the limit it finished at, if any
	}
	c.hash.finish(in)
	c.log().Info("crawl done", "state", string(state), "reason", reason, "limit", in.Limit, "pages", c.counts.Total,
		"done", c.counts.Done, "failed", c.counts.Failed, "skipped", c.counts.Skipped)
}

// setState moves the crawl to a non-final state (always, when force).
func (c *crawl) setState(state model.JobState, force bool) {
	if c.job.state == state && !force {
		return
	}
	c.job.state = state
	c.upsertSearchAttributes()
	workflow.SetCurrentDetails(c.dctx, c.details())
	c.hash.state(activities.JobStateInput{
		Ident: c.ident(), State: state,
		WorkflowID: workflow.GetInfo(c.dctx).WorkflowExecution.ID, RunID: c.runID,
		Key: fmt.Sprintf("%s/state/%s", c.runID, state),
	})
}

// publishPages upserts the pages search attributes at most once per
// AttrInterval: a timer started at a change upserts what is current when
// it fires.
func (c *crawl) publishPages() {
	if c.attr.pending {
		return
	}
	c.attr.pending = true
	workflow.Go(c.dctx, func(gc workflow.Context) {
		err := workflow.NewTimerWithOptions(gc, c.in.Timing.AttrInterval, workflow.TimerOptions{Summary: "pages attribute"}).Get(gc, nil)
		c.attr.pending = false
		if err == nil && !c.job.state.Final() && (c.counts.Done != c.attr.done || c.counts.Queued() != c.attr.queued) {
			c.upsertSearchAttributes()
		}
	})
}

func (c *crawl) upsertSearchAttributes() {
	c.attr.done, c.attr.queued = c.counts.Done, c.counts.Queued()
	err := workflow.UpsertTypedSearchAttributes(c.dctx,
		searchattr.Ident.ValueSet(c.ident()),
		searchattr.URL.ValueSet(c.in.Crawl.Job.URL),
		searchattr.Pool.ValueSet(c.in.Pool),
		searchattr.State.ValueSet(string(c.shownState())),
		searchattr.PagesDone.ValueSet(c.counts.Done),
		searchattr.PagesQueued.ValueSet(c.counts.Queued()),
	)
	if err != nil {
		c.log().Warn("upsert search attributes", "error", err)
	}
}

// details is the crawl's current details line in the Web UI.
func (c *crawl) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s · %s · run %d · %d pages: %d done, %d queued", c.in.Crawl.Job.URL, c.stateWords(), c.carry.Run,
		c.counts.Total, c.counts.Done, c.counts.Queued())
	if !c.job.state.Final() && c.settings.current.Concurrency == 0 {
		b.WriteString(" · paused (concurrency 0)")
	}
	if c.job.failure != "" {
		b.WriteString(" · " + c.job.failure)
	}
	if r := c.limitReached(); r != "" {
		b.WriteString(" · " + r)
	}
	return b.String()
}
