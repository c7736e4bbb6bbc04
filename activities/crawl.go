package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/robots"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/sitemap"
)

// ErrPageNotClaimed marks a CrawlStore write for a page attempt that no
// longer holds its page (completed by an earlier run of the same attempt,
// released, or skipped): the write is refused and nothing is counted.
var ErrPageNotClaimed = errors.New("page is not claimed by this attempt")

// Link is one link to add to a crawl's frontier, judged by internal/scope.
type Link struct {
	URL       string
	NoRecurse bool
	Requisite bool
}

// LiveSettings are the parts of a crawl a host reads from Redis while the
// crawl runs: ArchiveBot's ignores (IDENT_ignores, which its bot may
// change at any time), its suppress_ignore_reports flag, and the latest
// rules (the workflow writes them before a rules change returns).
type LiveSettings struct {
	Ignores               []string
	SuppressIgnoreReports bool
	Rules                 scope.Versioned
	// Concurrency, DelayMinMS and DelayMaxMS are the job's live
	// concurrency and delays (-1: not in Redis), BytesDownloaded its
	// bytes_downloaded: a running page batch follows them (RunPageBatch).
	Concurrency, DelayMinMS, DelayMaxMS int
	BytesDownloaded                     int64
}

// CrawlStore is the Redis side of a crawl: internal/frontier for pages,
// internal/rkeys for the job hash, log and rules. internal/jobstore
// adapts them. Every method is safe to repeat.
type CrawlStore interface {
	SeedCrawl(ctx context.Context, in SeedCrawlInput) (SeedCrawlResult, error)
	// Claim claims up to n pages, never charging more than budget pages
	// in all (0 = no budget; internal/frontier ClaimWithin).
	Claim(ctx context.Context, ident string, n int, token string, rulesVersion, budget int64) ([]PageSpec, PageCounts, error)
	// ClaimBatch is Claim for a page batch: pages in line whatever their
	// host's turn now (internal/frontier ClaimBatch).
	ClaimBatch(ctx context.Context, ident string, n int, token string, rulesVersion, budget int64) ([]PageSpec, PageCounts, error)
	// BytesDownloaded reads the job's bytes_downloaded.
	BytesDownloaded(ctx context.Context, ident string) (int64, error)
	Skip(ctx context.Context, ident string, pageID int64, reason string) error
	// Complete ends a page attempt and counts what it tallied with the
	// job's counters (items_downloaded, bytes_downloaded, r1xx..r5xx,
	// runk, error_count, cut_count) in the same write; ErrPageNotClaimed
	// when the attempt no longer holds the page.
	// A postponed attempt's page is READY again after notBefore, its
	// attempt kept.
	Complete(ctx context.Context, ident string, pageID int64, attempt int, status, note string, notBefore time.Time, t PageTally) (PageCounts, error)
	// RecordPages records finished attempts of a crawl's pages, each as
	// AppendLog, Discover and Complete would one after the other, in a few
	// round trips for all of them (a page batch's flush), and returns the
	// counts after them. Safe to repeat: each outcome applies once. An
	// error means some of it may be applied and the call is to be made
	// again.
	RecordPages(ctx context.Context, ident string, ws []PageWrite) ([]PageWritten, PageCounts, error)
	// RefusedLinks are the links Discover would refuse (no I/O).
	RefusedLinks(links []Link) []RefusedLink
	Release(ctx context.Context, ident string, ids []int64) (PageCounts, error)
	// LockedHostQueues are the host queues of shared queue queue on the
	// pipelines locked to the crawl (rkeys.Store.LockedHostQueues).
	LockedHostQueues(ctx context.Context, ident, queue string) ([]string, error)
	// FailWaiting ends every page waiting for a later retry as failed,
	// note before its last note (a crawl that stopped).
	FailWaiting(ctx context.Context, ident, note string) (PageCounts, error)
	// Requeue makes the failed pages of a finished crawl READY again for a
	// retry run (the frontier loses its retention until the job ends
	// again), once per token.
	Requeue(ctx context.Context, in RequeueInput) (RequeueResult, error)
	Counts(ctx context.Context, ident string) (PageCounts, error)
	LiveSettings(ctx context.Context, ident string) (LiveSettings, error)
	// StillClaimed returns the pages of ps still CLAIMED by their
	// attempt (a retried page batch runs only those again).
	StillClaimed(ctx context.Context, ident string, ps []PageSpec) ([]PageSpec, error)
	SetRules(ctx context.Context, ident string, rules scope.Versioned) error
	// SeedList creates the frontier from a URL list's start URLs (depth
	// 0, items_queued counts each once) and returns the counts.
	SeedList(ctx context.Context, in SeedListInput) (PageCounts, error)
	// FinishCrawl writes the job's final state (FinishJob) and gives the
	// frontier the job's retention.
	FinishCrawl(ctx context.Context, in FinishInput) error
	AppendLog(ctx context.Context, ident, key string, seq int, entries []LogEntry) error
	// SucceededPages lists the crawl's pages that succeeded, in discovery
	// order.
	SucceededPages(ctx context.Context, ident string) ([]PageRef, error)
	// Robots reads the record the crawl keeps for origin's robots.txt
	// (ok false: none yet).
	Robots(ctx context.Context, ident, origin string) (rec robots.Record, ok bool, err error)
	// KeepRobots keeps rec for origin unless the crawl keeps one already,
	// and returns the record kept.
	KeepRobots(ctx context.Context, ident, origin string, rec robots.Record) (robots.Record, error)
}

// PageRunner runs crawl pages on a worker host (internal/engine).
type PageRunner interface {
	// RunPage runs one page attempt: the crawl's setup hooks first on
	// this host, then the page plugin set step by step. An error means the
	// page could not be run at all; wrap ErrConfig for configuration errors.
	RunPage(ctx context.Context, run PageRun) (PageOutcome, error)
	// SeedRecords reads what the start page's snapshot left on this host
	// and appends its WARC files to the job's WARC.
	SeedRecords(ctx context.Context, in SeedPageInput) (SeedRecords, error)
	// TeardownCrawl stops the crawl's setup hooks on this host.
	TeardownCrawl(ctx context.Context, ident string) error
	// JobWARCs lists the crawl's job WARC files this host sees.
	JobWARCs(ident string) ([]WARCFile, error)
	// SealCrawl writes the crawl's WACZ on this host from the job WARCs
	// it sees and pages; an error means none was written.
	SealCrawl(ctx context.Context, in SealCrawlInput, pages []PageRef) (SealCrawlReport, error)
	// FetchURLList downloads a URL-list job's list through the fetch
	// policy and keeps it in the crawl's directory on this host; a
	// permanent refusal wraps ErrURLListRefused.
	FetchURLList(ctx context.Context, in URLListFetch) (URLListData, error)
	// FetchRobots fetches an origin's robots.txt through the fetch policy
	// into the job's WARC on this host; a fetch that got no answer is a
	// Record with its Error. An error: nothing usable (this host's WARC
	// could not be written, ctx ended).
	FetchRobots(ctx context.Context, in RobotsFetch) (robots.Record, error)
	// FetchSitemaps reads the sitemaps at in.URLs and the indexes they
	// lead to, each file fetched through the fetch policy into the job's
	// WARC on this host; what a file could not give is a Problem.
	FetchSitemaps(ctx context.Context, in SitemapFetch) (sitemap.Result, error)
}

// CrawlOptions tune the crawl activities; every value comes from the
// configuration (config crawl.*, hooks.*).
type CrawlOptions struct {
	HeartbeatInterval time.Duration
	// LiveInterval is how long the ignores and rules read from Redis are
	// used before they are read again.
	LiveInterval time.Duration
	// WriteTimeout bounds the retries of the page's Redis writes (Redis
	// down delays a page; the page is not fetched again for it).
	WriteTimeout time.Duration
	// LogLineBytes caps one log entry's URL or message.
	LogLineBytes int
	// HostConcurrency (0: none) is how many of a page batch's pages of one
	// target host run at once, HostLimits a host's own number (config
	// crawl.per_host): a batch does not fill its slots with pages waiting
	// for one host's turns while other hosts' pages could run.
	HostConcurrency int
	HostLimits      map[string]int
}

// CrawlActivities are the crawl's activities on a pool's shared queue: the
// frontier writes the workflow runs as local activities (SeedCrawl,
// ClaimPages, CompletePage, ReleasePages, FailWaitingPages, RequeueFailed, SetRules,
// FinishCrawl) and the page attempts any worker of the pool may run
// (RunPage).
type CrawlActivities struct {
	store     CrawlStore
	pages     PageRunner
	hostQueue string
	opts      CrawlOptions
	log       *zap.Logger
	deny      scope.Denier
	live      timed[liveEntry]
	robots    robotsCache
	locks     timed[[]string] // ClaimResult.Locked by crawl and shared queue
}

// NewCrawl builds the crawl activities. hostQueue is the task queue only
// this worker process polls (its crawl setup is torn down there); deny may
// be nil (no deny policy).
func NewCrawl(store CrawlStore, pages PageRunner, hostQueue string, deny scope.Denier, log *zap.Logger, opts CrawlOptions) (*CrawlActivities, error) {
	switch {
	case store == nil:
		return nil, errors.New("crawl activities: store must not be nil")
	case pages == nil:
		return nil, errors.New("crawl activities: page runner must not be nil")
	case hostQueue == "":
		return nil, errors.New("crawl activities: host queue must not be empty")
	}
	if err := cmp.Or(
		positive("heartbeat interval", opts.HeartbeatInterval),
		positive("live interval", opts.LiveInterval),
		positive("write timeout", opts.WriteTimeout),
		positive("log line bytes", opts.LogLineBytes),
	); err != nil {
		return nil, fmt.Errorf("crawl activity options: %w", err)
	}
	log = cmp.Or(log, zap.NewNop())
	return &CrawlActivities{store: store, pages: pages, hostQueue: hostQueue, opts: opts, log: log, deny: deny}, nil
}

// SeedCrawl creates the frontier with the start URL and claims it.
func (a *CrawlActivities) SeedCrawl(ctx context.Context, in SeedCrawlInput) (SeedCrawlResult, error) {
	if in.Ident == "" || in.URL == "" || in.Token == "" {
		return SeedCrawlResult{}, invalidInput("seed crawl %q: ident, url and token must be set", in.Ident)
	}
	res, err := a.store.SeedCrawl(ctx, in)
	return crawlStored(res, err, "seed crawl %s", in.Ident)
}

// ClaimPages claims up to N pages, lowest depth first, and applies the
// rules: a page a skip rule matches goes to SKIPPED, a ua rule sets its
// user agent. It is where a crawl's page and byte limits are enforced:
// no claim once bytes_downloaded reached MaxBytes, none past MaxPages
// pages charged (the frontier's budget); the result names the limit.
func (a *CrawlActivities) ClaimPages(ctx context.Context, in ClaimInput) (ClaimResult, error) {
	if in.Ident == "" || in.Token == "" || in.N < 1 {
		return ClaimResult{}, invalidInput("claim pages of %q: ident, token and n >= 1 required (n %d)", in.Ident, in.N)
	}
	rules, err := in.Rules.Rules.Compile()
	if err != nil {
		return ClaimResult{}, invalidInput("claim pages of %s: rules version %d: %v", in.Ident, in.Rules.Version, err)
	}
	if in.MaxBytes > 0 {
		got, err := a.store.BytesDownloaded(ctx, in.Ident)
		if err != nil {
			return ClaimResult{}, crawlStoreError(err, "claim pages of %s: read bytes downloaded", in.Ident)
		}
		if got >= in.MaxBytes {
			counts, err := a.counts(ctx, in.Ident)
			return ClaimResult{Counts: counts, Limit: model.ByteLimitReached(in.MaxBytes, got)}, err
		}
	}
	claim := a.store.Claim
	if in.Batch {
		claim = a.store.ClaimBatch
	}
	pages, counts, err := claim(ctx, in.Ident, in.N, in.Token, in.Rules.Version, in.MaxPages)
	if err != nil {
		return ClaimResult{}, crawlStoreError(err, "claim pages of %s", in.Ident)
	}
	out := ClaimResult{Counts: counts}
	if in.LockQueue != "" {
		out.Locked, err = a.locks.get(in.Ident+" "+in.LockQueue, a.opts.LiveInterval, func([]string, bool) ([]string, error) {
			return a.store.LockedHostQueues(ctx, in.Ident, in.LockQueue)
		})
		if err != nil {
			return ClaimResult{}, crawlStoreError(err, "claim pages of %s: read the pipelines locked to it", in.Ident)
		}
	}
	if in.MaxPages > 0 && counts.Charged >= in.MaxPages {
		out.Limit = model.PageLimitReached(in.MaxPages)
	}
	for _, p := range pages {
		pr := rules.Eval(p.URL)
		if pr.Skip {
			reason := fmt.Sprintf("skipped by rule %d (%s) of rules version %d", pr.SkipRule, rules.Pattern(pr.SkipRule), in.Rules.Version)
			if err := a.store.Skip(ctx, in.Ident, p.ID, reason); err != nil {
				return ClaimResult{}, crawlStoreError(err, "skip page %d of %s", p.ID, in.Ident)
			}
			out.Skipped++
			out.Counts.Claimed--
			out.Counts.Skipped++
			continue
		}
		p.UA = pr.UA
		out.Pages = append(out.Pages, p)
	}
	return out, nil
}

// CompletePage ends a page attempt as failed (or transient, when asked)
// when its activity could not (attempts exhausted, host lost on the last
// one). A page already completed is left as it is.
func (a *CrawlActivities) CompletePage(ctx context.Context, in CompletePageInput) (PageCounts, error) {
	status := PageFailed
	if in.Transient {
		status = PageTransient
	}
	c, err := a.store.Complete(ctx, in.Ident, in.PageID, in.Attempt, status, in.Note, time.Time{}, PageTally{})
	if errors.Is(err, ErrPageNotClaimed) {
		a.log.Info("page already completed", logging.Ident(in.Ident), zap.Int64("page", in.PageID), zap.Int("attempt", in.Attempt))
		return a.counts(ctx, in.Ident)
	}
	return crawlStored(c, err, "complete page %d of %s", in.PageID, in.Ident)
}

func (a *CrawlActivities) counts(ctx context.Context, ident string) (PageCounts, error) {
	c, err := a.store.Counts(ctx, ident)
	return crawlStored(c, err, "counts of %s", ident)
}

// ReleasePages returns claimed pages to READY without spending an attempt.
func (a *CrawlActivities) ReleasePages(ctx context.Context, in ReleasePagesInput) (PageCounts, error) {
	if len(in.PageIDs) == 0 {
		return a.counts(ctx, in.Ident)
	}
	c, err := a.store.Release(ctx, in.Ident, in.PageIDs)
	return crawlStored(c, err, "release pages of %s", in.Ident)
}

// FailWaitingPages ends a stopping crawl's pages waiting for a later
// retry as failed (their later retry is not run; FailWaitingInput.Note
// says why).
func (a *CrawlActivities) FailWaitingPages(ctx context.Context, in FailWaitingInput) (PageCounts, error) {
	c, err := a.store.FailWaiting(ctx, in.Ident, in.Note)
	return crawlStored(c, err, "fail waiting pages of %s", in.Ident)
}

// RequeueFailed makes a finished crawl's failed pages READY again at the
// start of a retry run (starter retry), once per token.
func (a *CrawlActivities) RequeueFailed(ctx context.Context, in RequeueInput) (RequeueResult, error) {
	if in.Ident == "" || in.Token == "" {
		return RequeueResult{}, invalidInput("requeue failed pages of %q: ident and token must be set", in.Ident)
	}
	res, err := a.store.Requeue(ctx, in)
	if err != nil {
		return RequeueResult{}, crawlStoreError(err, "requeue failed pages of %s", in.Ident)
	}
	a.log.Info("failed pages requeued for a retry", logging.Ident(in.Ident), zap.Int64("pages", res.Pages), zap.Bool("start_page", res.Seed))
	return res, nil
}

// SetRules stores a rules version (IDENT_rules) for the hosts to read.
func (a *CrawlActivities) SetRules(ctx context.Context, in SetRulesInput) error {
	if err := in.Rules.Rules.Validate(); err != nil {
		return invalidInput("set rules of %s: %v", in.Ident, err)
	}
	return crawlStoreError(a.store.SetRules(ctx, in.Ident, in.Rules), "set rules version %d of %s", in.Rules.Version, in.Ident)
}

// FinishCrawl writes the crawl's final state; its frontier expires with
// the job.
func (a *CrawlActivities) FinishCrawl(ctx context.Context, in FinishInput) error {
	if !in.State.Final() {
		return invalidInput("finish crawl %s: state %q: must be finished, aborted or failed", in.Ident, in.State)
	}
	return crawlStoreError(a.store.FinishCrawl(ctx, in), "finish crawl %s as %s", in.Ident, in.State)
}

// PageCounts reads the crawl's page counts from its frontier: what the
// workflow shows when the crawl ends (a result it took in last may carry
// older counts than one taken in before it).
func (a *CrawlActivities) PageCounts(ctx context.Context, ident string) (PageCounts, error) {
	c, err := a.store.Counts(ctx, ident)
	return crawlStored(c, err, "page counts of crawl %s", ident)
}

// RunPage runs one page attempt on this worker: the page plugin set (after
// the crawl's setup on this host), then its links judged by the crawl's
// scope, rules, ignores and deny policy and added to the frontier, one
// download packet per response and one ignore packet per ignored URL, and
// the attempt's outcome with its response counters in one frontier write.
// A transient outcome is a successful activity: the frontier claims the
// page again later while it has attempts left. The activity fails only
// when the attempt could not be recorded (Redis down past the write
// timeout, the worker stopping), so Temporal retries it; its last failure
// is recorded by the workflow (CompletePage).
func (a *CrawlActivities) RunPage(ctx context.Context, in RunPageInput) (PageResult, error) {
	p, ident := in.Page, in.Crawl.Job.Ident
	if ident == "" || p.ID < 1 || p.URL == "" || p.Attempt < 1 {
		return PageResult{}, invalidInput("run page %d of %q: ident, page id, url and attempt must be set", p.ID, ident)
	}
	info := activity.GetInfo(ctx)
	log := a.log.With(logging.Ident(ident), zap.Int64("page", p.ID), logging.Attempt(p.Attempt), zap.Int32("activity_attempt", info.Attempt))
	stop := heartbeatEvery(ctx, a.opts.HeartbeatInterval, fixed(Progress{Attempt: p.Attempt}))
	defer stop()
	d, err := a.runAttempt(ctx, ctx, 0, log, in, fmt.Sprintf("%s/%s/attempt-%d", info.WorkflowExecution.RunID, info.ActivityID, info.Attempt))
	if err != nil {
		return PageResult{}, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.WriteTimeout)
	defer cancel()
	res, err := a.recordPage(wctx, d)
	if err != nil {
		return PageResult{}, err
	}
	log.Debug("page done", zap.String("status", res.Status), zap.Int("responses", res.Responses), zap.Int("queued", res.Queued))
	return res, nil
}

// crawlPageKey marks the context of a crawl page attempt (CrawlPage).
type crawlPageKey struct{}

// CrawlPage says whether ctx is a crawl page attempt's, and how old what
// the page reads of the crawl's live state may be (crawl.live_interval, as
// its ignores and rules): the page runner's reads of state that changes
// rarely (a plugin's maintenance: internal/pools) may be kept that long
// instead of costing a round trip per hook of every page.
func CrawlPage(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(crawlPageKey{}).(time.Duration)
	return d, ok
}

// CrawlPageContext marks ctx as a crawl page attempt's whose reads may be
// maxAge old (CrawlPage).
func CrawlPageContext(ctx context.Context, maxAge time.Duration) context.Context {
	return context.WithValue(ctx, crawlPageKey{}, maxAge)
}

// donePage is a page attempt that ended, to be recorded: its outcome, its
// attempt log's key, whether its responses are logged (download packets).
type donePage struct {
	log          *zap.Logger
	in           RunPageInput
	out          PageOutcome
	logKey       string
	logResponses bool
}

// runAttempt runs one claimed page attempt, the one page path of RunPage
// and RunPageBatch: the polite delay, then the page under pageCtx, whose
// deadline (timeout, when > 0) ends the attempt transient; the end of ctx
// (the activity's) stops it unrecorded: a canceled error, or a retryable
// one when the worker is shutting down. Its outcome is recorded alone
// (RunPage) or with others (a page batch's pageSink), both through
// recordPages.
func (a *CrawlActivities) runAttempt(ctx, pageCtx context.Context, timeout time.Duration, log *zap.Logger, in RunPageInput, logKey string) (donePage, error) {
	p, ident := in.Page, in.Crawl.Job.Ident
	stopped := func() error {
		return interrupted(ctx, log, "page", fmt.Errorf("page %d of %s: worker shut down during the page", p.ID, ident))
	}
	delayErr := politeDelay(pageCtx, in.Settings)
	if ctx.Err() != nil {
		return donePage{}, stopped()
	}
	var out PageOutcome
	var runErr error
	if delayErr == nil {
		out, runErr = a.pages.RunPage(CrawlPageContext(pageCtx, a.opts.LiveInterval), in)
	}
	if ctx.Err() != nil {
		return donePage{}, stopped()
	}
	if pageCtx.Err() != nil {
		runErr = fmt.Errorf("page attempt timed out after %s (crawl.page_timeout)", timeout)
	}
	if runErr != nil {
		status := PageTransient
		if errors.Is(runErr, ErrConfig) {
			status = PageFailed
		}
		out = PageOutcome{Status: status, Note: runErr.Error()}
	}
	return donePage{log: log, in: in, out: out, logKey: logKey, logResponses: true}, nil
}

// recordPage records one page attempt (recordPages).
func (a *CrawlActivities) recordPage(ctx context.Context, d donePage) (PageResult, error) {
	res, err := a.recordPages(ctx, []donePage{d})
	if err != nil {
		return PageResult{}, err
	}
	return res[0], nil
}

// recordPages writes what page attempts of one crawl did, together
// (CrawlStore.RecordPages, retried until ctx ends): each page's log packets
// (download packets only when logResponses), links, outcome with its
// response counters.
func (a *CrawlActivities) recordPages(ctx context.Context, pages []donePage) ([]PageResult, error) {
	ident := pages[0].in.Crawl.Job.Ident
	res := make([]PageResult, len(pages))
	ws := make([]PageWrite, len(pages))
	for i, d := range pages {
		var err error
		if res[i], ws[i], err = a.pageWrite(ctx, d); err != nil {
			return nil, err
		}
	}
	var written []PageWritten
	var counts PageCounts
	err := retryWrite(ctx, func() (err error) { written, counts, err = a.store.RecordPages(ctx, ident, ws); return err })
	if err != nil {
		return nil, fmt.Errorf("record %d pages of %s (page %d first): %w", len(pages), ident, ws[0].PageID, err)
	}
	for i, w := range written {
		res[i].Queued, res[i].Counts = w.Queued, counts
		if w.Superseded != nil {
			pages[i].log.Warn("outcome not recorded: the page attempt no longer holds its page", zap.Error(w.Superseded))
			res[i].Error = "superseded: " + w.Superseded.Error()
		}
	}
	return res, nil
}

// pageWrite is what recording a page attempt writes: its log packets
// (download packets only when logResponses), the links judged by the
// crawl's scope, rules, ignores, deny policy and robots.txt (one ignore
// packet per ignored URL, and per link the frontier refuses), its outcome
// with its response counters.
func (a *CrawlActivities) pageWrite(ctx context.Context, d donePage) (PageResult, PageWrite, error) {
	log, in, out := d.log, d.in, d.out
	p := in.Page
	res := PageResult{PageID: p.ID, Attempt: p.Attempt, Status: out.Status, HostQueue: a.hostQueue,
		Responses: len(out.Responses), Error: out.Note}
	var links []Link
	var entries []LogEntry
	now := time.Now()
	say := a.pageLine(&entries, now)
	if d.logResponses {
		for _, r := range out.Responses {
			if r.Reused {
				continue // fetched for an earlier page: no download of this one
			}
			r.URL = truncate(r.URL, a.opts.LogLineBytes)
			entries = append(entries, LogEntry{Kind: LogDownload, Time: now, Hook: "page", Response: &r})
		}
	}
	for _, n := range out.Notices {
		say(n)
	}
	if out.Status == PageSucceeded {
		live, judge, err := a.liveSettings(ctx, in.Crawl)
		if err != nil {
			return res, PageWrite{}, err
		}
		links, entries = judgeLinks(ctx, log, judge, live, p, out.Links, entries, now, a.opts.LogLineBytes)
		if in.Crawl.ObeysRobots() {
			if links, entries, err = a.obeyRobots(ctx, in.Crawl, links, entries, live.SuppressIgnoreReports, now); err != nil {
				return res, PageWrite{}, err
			}
		}
	}
	if out.Status == PageTransient && out.Note != "" {
		what := "will be retried"
		switch n := in.Crawl.PageAttempts; {
		case out.Last:
			what = "its snapshot ran its in-run attempts: a later retry if hooks.retry_later has a delay left, else the page failed"
		case n > 0 && p.Attempt >= n:
			what = fmt.Sprintf("its last attempt (crawl.page_attempts %d): the page failed", n)
		}
		say(fmt.Sprintf("page %s attempt %d failed, %s: %s", p.URL, p.Attempt, what, out.Note))
	}
	if out.Status == PagePostponed {
		say(fmt.Sprintf("page %s attempt %d postponed until %s, its attempt kept: %s", p.URL, p.Attempt,
			out.NotBefore.UTC().Format(time.RFC3339), out.Note))
	}
	refused := a.store.RefusedLinks(links)
	entries = append(entries, a.refusedEntries(refused, now)...)
	tally := Tally(out.Responses)
	tally.Cuts = int64(out.Cuts + len(refused))
	tally.Results, tally.PageURL = out.Results, p.URL
	note := out.Note
	if len(refused) > 0 {
		note = joinNote(note, fmt.Sprintf("cut: %d of its links refused by the frontier (see the job log's ignore packets)", len(refused)))
	}
	return res, PageWrite{PageID: p.ID, Attempt: p.Attempt, Status: out.Status, Note: note, NotBefore: out.NotBefore, Last: out.Last,
		Tally: tally, Links: links, LogKey: d.logKey, Entries: entries}, nil
}

// pageLine returns a func appending a page's stdout line to *entries.
func (a *CrawlActivities) pageLine(entries *[]LogEntry, now time.Time) func(string) {
	return func(msg string) {
		*entries = append(*entries, LogEntry{Kind: LogStdout, Time: now, Hook: "page", Message: truncate(msg, a.opts.LogLineBytes)})
	}
}

// joinNote appends more to a page's note.
func joinNote(note, more string) string {
	if note == "" {
		return more
	}
	return note + "; " + more
}

// refusedEntries report each link the frontier refuses (too long to be a
// page, not a URL) as an ArchiveBot ignore packet naming the rule, source
// "frontier": a dropped link is never silent.
func (a *CrawlActivities) refusedEntries(refused []RefusedLink, now time.Time) []LogEntry {
	var entries []LogEntry
	for _, r := range refused {
		entries = append(entries, LogEntry{Kind: LogIgnore, Time: now, Hook: "page", URL: truncate(r.URL, a.opts.LogLineBytes),
			Pattern: fmt.Sprintf("%s (%d bytes)", r.Rule, r.Bytes), Source: "frontier"})
	}
	return entries
}

// judgeLinks decides which links become pages and adds an ignore packet
// for each ignored URL (unless the job suppresses them).
func judgeLinks(ctx context.Context, log *zap.Logger, judge *scope.Judge, live LiveSettings, p PageSpec, found []Discovered,
	entries []LogEntry, now time.Time, lineBytes int) ([]Link, []LogEntry) {
	var links []Link
	invalid := 0
	for _, d := range found {
		dec := judge.Link(ctx, p.NoRecurse, scope.Link{URL: d.URL, Requisite: d.Requisite})
		switch dec.Reason {
		case scope.Queued:
			links = append(links, Link{URL: dec.URL, NoRecurse: dec.NoRecurse, Requisite: dec.Requisite})
		case scope.ReasonIgnored:
			if !live.SuppressIgnoreReports {
				entries = append(entries, LogEntry{Kind: LogIgnore, Time: now, Hook: "page",
					URL: truncate(dec.URL, lineBytes), Pattern: dec.Pattern, Source: "accept_url"})
			}
		case scope.ReasonDenied:
			// A security refusal: reported even when ignore reports are
			// suppressed.
			entries = append(entries, LogEntry{Kind: LogIgnore, Time: now, Hook: "page",
				URL: truncate(dec.URL, lineBytes), Pattern: dec.Pattern, Source: "fetch.deny"})
		case scope.ReasonInvalid:
			invalid++
			if invalid <= 3 {
				log.Info("link dropped: not a valid URL", zap.String("link", truncate(d.URL, 200)), zap.String("error", dec.Detail))
			}
		}
	}
	if invalid > 3 {
		log.Info("further invalid links dropped", zap.Int("invalid", invalid))
	}
	return links, entries
}

// retryWrite retries a Redis write (an ErrNotWritable or ErrPageNotClaimed
// is final) with backoff until ctx ends: Redis being down delays a page.
func retryWrite(ctx context.Context, write func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := write()
		if err == nil || errors.Is(err, ErrNotWritable) || errors.Is(err, ErrPageNotClaimed) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// politeDelay waits a random time in [delay_min, delay_max] before a page
// (ArchiveBot's delay between a job's fetches).
func politeDelay(ctx context.Context, s model.Settings) error {
	if s.DelayMaxMS <= 0 {
		return nil
	}
	ms := s.DelayMinMS
	if s.DelayMaxMS > s.DelayMinMS {
		ms += rand.IntN(s.DelayMaxMS - s.DelayMinMS + 1)
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// interrupted is the error of work (a page, a page batch) that the end of
// ctx stopped: canceled, or shutdown (retryable) when the worker is
// shutting down.
func interrupted(ctx context.Context, log *zap.Logger, work string, shutdown error) error {
	if !workerStopping(ctx) {
		return temporal.NewCanceledError()
	}
	log.Warn(work + " interrupted by worker shutdown: retried")
	return shutdown
}

// heartbeatEvery heartbeats details until the returned stop is called.
func heartbeatEvery(ctx context.Context, every time.Duration, details func() any) func() {
	return onTicks(every, func() {
		if ctx.Err() == nil {
			activity.RecordHeartbeat(ctx, details())
		}
	})
}

// fixed is heartbeat details that do not change.
func fixed(details any) func() any { return func() any { return details } }

// onTicks calls fn every d until the returned stop is called; stop
// returns once fn is no longer running.
func onTicks(d time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// crawlStoreError wraps a CrawlStore error with context, non-retryable
// when retrying cannot help; nil when err is nil.
func crawlStoreError(err error, format string, args ...any) error {
	if errors.Is(err, ErrPageNotClaimed) {
		err = fmt.Errorf("%w: %w", ErrNotWritable, err)
	}
	return storeError(err, format, args...)
}

// crawlStored is a CrawlStore call's value, or its error wrapped by
// crawlStoreError (with the zero value).
func crawlStored[T any](v T, err error, format string, args ...any) (T, error) {
	if err = crawlStoreError(err, format, args...); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// timed keeps a value per key for CrawlOptions.LiveInterval: a change
// in Redis (a crawl's ignores and rules, its locked pipelines) reaches
// this worker's pages and claims that much later.
type timed[V any] struct {
	mu sync.Mutex
	m  map[string]timedEntry[V]
}

type timedEntry[V any] struct {
	at time.Time
	v  V
}

// get returns key's value when younger than maxAge, else load's (given
// the value it replaces, had false when none), kept from now on.
func (c *timed[V]) get(key string, maxAge time.Duration, load func(old V, had bool) (V, error)) (V, error) {
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && time.Since(e.at) < maxAge {
		return e.v, nil
	}
	v, err := load(e.v, ok)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]timedEntry[V]{}
	}
	c.m[key] = timedEntry[V]{at: time.Now(), v: v}
	c.mu.Unlock()
	return v, nil
}

// liveEntry is a crawl's live settings and the judge of its links.
type liveEntry struct {
	live  LiveSettings
	judge *scope.Judge
}

// liveSettings are the crawl's live settings and the judge of its links.
func (a *CrawlActivities) liveSettings(ctx context.Context, cr Crawl) (LiveSettings, *scope.Judge, error) {
	ident := cr.Job.Ident
	e, err := a.live.get(ident, a.opts.LiveInterval, func(old liveEntry, had bool) (liveEntry, error) {
		var live LiveSettings
		err := retryWrite(ctx, func() (err error) { live, err = a.store.LiveSettings(ctx, ident); return err })
		if err != nil {
			return liveEntry{}, fmt.Errorf("read ignores and rules of %s: %w", ident, err)
		}
		sc, err := scope.New(cr.Job.URL, cr.Scope)
		if err != nil {
			return liveEntry{}, nonRetryable(ErrTypeInvalidInput, "crawl %s: %v", ident, err)
		}
		rules, err := live.Rules.Rules.Compile()
		if err != nil {
			a.log.Warn("stored rules do not compile; using none", logging.Ident(ident), zap.Error(err))
		}
		ig := scope.CompileIgnores(live.Ignores, cr.Job.URL)
		if bad := ig.Invalid(); len(bad) > 0 && (!had || !slices.Equal(old.live.Ignores, live.Ignores)) {
			a.log.Warn("ignore patterns that do not compile are not applied", logging.Ident(ident), zap.Strings("patterns", bad))
		}
		return liveEntry{live: live, judge: &scope.Judge{Scope: sc, Rules: rules, Ignores: ig, Deny: a.deny}}, nil
	})
	return e.live, e.judge, err
}

// CrawlHostActivities are the crawl's activities on a worker's own queue:
// completing the start page from what its snapshot left on that host
// (CompleteSeedPage) and ending the crawl there (TeardownCrawl).
type CrawlHostActivities struct {
	c *CrawlActivities
}

// NewCrawlHost builds the host-queue crawl activities over the same
// dependencies as c.
func NewCrawlHost(c *CrawlActivities) *CrawlHostActivities { return &CrawlHostActivities{c: c} }

// CompleteSeedPage completes the start page: the links its snapshot's
// hooks found (their last attempts' Snapshot records) are judged and
// added, its responses counted, its WARC files appended to the job's
// WARC on this host.
func (h *CrawlHostActivities) CompleteSeedPage(ctx context.Context, in SeedPageInput) (PageResult, error) {
	a := h.c
	ident := in.Crawl.Job.Ident
	log := a.log.With(logging.Ident(ident), zap.Int64("page", in.Page.ID))
	stop := heartbeatEvery(ctx, a.opts.HeartbeatInterval, fixed(Progress{Attempt: in.Page.Attempt}))
	defer stop()
	recs, err := a.pages.SeedRecords(ctx, in)
	if err != nil {
		return PageResult{}, fmt.Errorf("read the start page's records of %s: %w", ident, err)
	}
	out := PageOutcome{Status: PageFailed, Note: in.Note, Responses: recs.Responses}
	if in.Transient {
		out.Status, out.Last = PageTransient, true
	}
	if in.Succeeded {
		out.Status, out.Links, out.LinksDropped = PageSucceeded, recs.Links, recs.LinksDropped
		out.Notices, out.Cuts = recs.Notices, len(recs.Notices)
		for _, n := range recs.Notices {
			out.Note = joinNote(out.Note, "cut: "+jsonl.CutText(n))
		}
	}
	info := activity.GetInfo(ctx)
	logKey := fmt.Sprintf("%s/%s/attempt-%d", info.WorkflowExecution.RunID, info.ActivityID, info.Attempt)
	if in.Succeeded && in.Crawl.Sitemaps {
		// Bounded by the activity's StartToClose (crawl.page_timeout).
		links, entries, note, cuts, err := a.sitemapLinks(ctx, in.Crawl, time.Now())
		if err != nil {
			return PageResult{}, err
		}
		if len(entries) > 0 {
			if err := retryWrite(ctx, func() error { return a.store.AppendLog(ctx, ident, logKey+"/sitemaps", 0, entries) }); err != nil {
				return PageResult{}, fmt.Errorf("log the sitemaps of %s: %w", ident, err)
			}
		}
		out.Links = append(out.Links, links...)
		out.Note, out.Cuts = joinNote(out.Note, note), out.Cuts+cuts
	}
	// The snapshot's hooks logged their responses already; they are
	// counted here, with the page's outcome.
	return a.recordPage(ctx, donePage{log: log, in: RunPageInput{Crawl: in.Crawl, Page: in.Page}, out: out, logKey: logKey})
}

// TeardownCrawl stops the crawl's setup hooks on this host and reports
// the crawl's job WARC files this host sees (SealCrawl's Reported).
func (h *CrawlHostActivities) TeardownCrawl(ctx context.Context, in TeardownInput) (TeardownReport, error) {
	if err := h.c.pages.TeardownCrawl(ctx, in.Ident); err != nil {
		return TeardownReport{}, fmt.Errorf("tear down crawl %s on %s: %w", in.Ident, h.c.hostQueue, err)
	}
	warcs, err := h.c.pages.JobWARCs(in.Ident)
	if err != nil {
		return TeardownReport{}, fmt.Errorf("tear down crawl %s on %s: %w", in.Ident, h.c.hostQueue, err)
	}
	return TeardownReport{WARCs: warcs}, nil
}

// SealCrawl writes the crawl's WACZ on this host (its job WARCs that this
// host sees, its pages that succeeded) and reports where (or why none was
// written: `starter export` writes one later); the workflow records it
// (PoolActivities.SetArchive).
func (h *CrawlHostActivities) SealCrawl(ctx context.Context, in SealCrawlInput) (SealCrawlReport, error) {
	a := h.c
	pages, err := a.store.SucceededPages(ctx, in.Ident)
	if err != nil {
		return SealCrawlReport{}, fmt.Errorf("seal crawl %s: %w", in.Ident, err)
	}
	rep, err := a.pages.SealCrawl(ctx, in, pages)
	if err != nil {
		rep = SealCrawlReport{Error: err.Error()}
		a.log.Warn("the crawl's WACZ was not written at the seal", logging.Ident(in.Ident), zap.Error(err))
	}
	rep.Host, _ = os.Hostname()
	a.log.Info("sealed crawl", logging.Ident(in.Ident), zap.String("wacz", rep.WACZ), zap.Int("pages", len(pages)),
		zap.Strings("missing_warcs", rep.Missing))
	return rep, nil
}
