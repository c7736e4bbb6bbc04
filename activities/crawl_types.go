package activities

import (
	"errors"
	"fmt"
	"time"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/sitemap"
)

// Page statuses of a page attempt, in the frontier's vocabulary
// (internal/frontier).
const (
	PageSucceeded = "succeeded"
	PageFailed    = "failed"
	// PageTransient: the attempt failed for a reason worth another attempt
	// (5xx, network error); the page is claimed again later while it has
	// attempts left.
	PageTransient = "transient"
	// PagePostponed: the page's host was busy or rate-limited
	// (internal/hostbudget); the page is READY again after
	// PageOutcome.NotBefore, its attempt kept.
	PagePostponed = "postponed"
)

// Crawl is the job-level context of a crawl's pages: everything a page
// attempt needs besides the page itself. It travels in every page
// activity's input, so it stays small.
type Crawl struct {
	Job Job `json:"job"`
	// MaxDepth is the depth limit; -1 = none.
	MaxDepth int          `json:"max_depth"`
	Scope    scope.Config `json:"scope"`
	// PagePlugins run on every page but the start URL.
	PagePlugins []string `json:"page_plugins"`
	// PageAttempts is every page's number of attempts.
	PageAttempts int `json:"page_attempts"`
	// MaxLinks caps the links one page attempt adds.
	MaxLinks int `json:"max_links"`
	// Robots is the crawl's robots.txt policy (model.RobotsObey or
	// RobotsIgnore; "" in inputs recorded before it existed: ignore).
	Robots string `json:"robots,omitempty"`
	// RobotsAgent is the user agent robots.txt is fetched with and read
	// for (its group, its Crawl-delay): the job's at submit.
	RobotsAgent string `json:"robots_agent,omitempty"`
	// Sitemaps, when set, seeds the start host's sitemap URLs (its
	// robots.txt's Sitemap lines and /sitemap.xml) at depth 1 when the
	// start page completes, within SitemapLimits.
	Sitemaps      bool           `json:"sitemaps,omitempty"`
	SitemapLimits sitemap.Limits `json:"sitemap_limits,omitzero"`
}

// ObeysRobots reports whether the crawl skips what robots.txt disallows.
func (c Crawl) ObeysRobots() bool { return c.Robots == model.RobotsObey }

// PageSpec is one claimed page attempt.
type PageSpec struct {
	ID        int64  `json:"id"`
	URL       string `json:"url"`
	Depth     int    `json:"depth"`
	Attempt   int    `json:"attempt"`
	NoRecurse bool   `json:"no_recurse,omitempty"`
	// UA is the user agent the rules give the page ("" = the job's).
	UA string `json:"ua,omitempty"`
}

// PageCounts are a crawl's page counts (internal/frontier's Counts without
// the per-depth breakdown, which stays in Redis).
type PageCounts struct {
	Total       int64 `json:"total"`
	Ready       int64 `json:"ready"`
	Claimed     int64 `json:"claimed"`
	Skipped     int64 `json:"skipped"`
	Done        int64 `json:"done"`
	Succeeded   int64 `json:"succeeded"`
	Failed      int64 `json:"failed"`
	Deferred    int64 `json:"deferred"`
	Propagating int64 `json:"propagating,omitempty"`
	// Charged is the pages charged to the crawl's page limit (fetched as
	// pages, requisites not counted; internal/frontier ClaimWithin).
	Charged int64 `json:"charged,omitempty"`
	// Waiting is the READY pages waiting for a later retry
	// (CrawlInput.PageRetryLater), RetryAt when the first is due.
	Waiting int64     `json:"waiting,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	// ListPartial: the crawl's URL list was cut short while it was seeded
	// (internal/frontier Counts.ListPartial): a retry or continue seeds
	// the rest (SeedURLList).
	ListPartial bool `json:"list_partial,omitempty"`
}

// Finished reports that no page is READY or CLAIMED and no depth
// propagation is pending.
func (c PageCounts) Finished() bool { return c.Ready == 0 && c.Claimed == 0 && c.Propagating == 0 }

// Queued is the pages still to fetch (READY and CLAIMED).
func (c PageCounts) Queued() int64 { return c.Ready + c.Claimed }

// SeedCrawlInput creates a crawl's frontier and claims its start page.
type SeedCrawlInput struct {
	Ident        string `json:"ident"`
	URL          string `json:"url"`
	MaxDepth     int    `json:"max_depth"`
	PageAttempts int    `json:"page_attempts"`
	// Token names the claim of the start page (repeat-safe).
	Token string `json:"token"`
	// RetryLater are the pages' later-retry delays (frontier
	// Config.RetryLater; none: a page is failed when its attempts run out).
	RetryLater []time.Duration `json:"retry_later,omitempty"`
}

// SeedCrawlResult is the claimed start page (nil when the start page was
// already completed by an earlier run) and the counts.
type SeedCrawlResult struct {
	Page   *PageSpec  `json:"page,omitempty"`
	Counts PageCounts `json:"counts"`
}

// ClaimInput claims up to N pages and applies the rules to them.
type ClaimInput struct {
	Ident string `json:"ident"`
	N     int    `json:"n"`
	// Token names this claim (repeat-safe: a retried claim returns the
	// same pages).
	Token string `json:"token"`
	// Rules are the job's latest rules: skip moves a page to SKIPPED, ua
	// sets its user agent; their version is kept with the attempt.
	Rules scope.Versioned `json:"rules"`
	// MaxPages and MaxBytes are the crawl's limits (model.Settings; 0 =
	// none): no page is claimed past MaxPages pages charged in all, none
	// once bytes_downloaded reached MaxBytes.
	MaxPages int64 `json:"max_pages,omitempty"`
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Batch claims for a page batch (CrawlStore.ClaimBatch): the hosts'
	// turns are taken when the batch fetches, not at the claim.
	Batch bool `json:"batch,omitempty"`
	// LockQueue, when set, is the pool's shared queue: the result's
	// Locked names its host queues on the pipelines locked to the crawl
	// (`starter lock`), read at most every CrawlOptions.LiveInterval.
	LockQueue string `json:"lock_queue,omitempty"`
}

// ClaimResult is the claimed pages (skipped ones left out) and the counts.
type ClaimResult struct {
	Pages   []PageSpec `json:"pages,omitempty"`
	Skipped int        `json:"skipped,omitempty"`
	Counts  PageCounts `json:"counts"`
	// Limit names the limit that is reached (model.PageLimitReached,
	// ByteLimitReached): no new page is claimed any more; at the page
	// limit a charged page READY again (a transient failure) still is.
	Limit string `json:"limit,omitempty"`
	// Locked are the host queues of the pipelines locked to the crawl
	// (ClaimInput.LockQueue): its pages run there.
	Locked []string `json:"locked,omitempty"`
}

// RunPageInput asks for one attempt of one page.
type RunPageInput struct {
	Crawl    Crawl          `json:"crawl"`
	Page     PageSpec       `json:"page"`
	Settings model.Settings `json:"settings"`
}

// PageResult is how a page attempt ended. It is small: no URL lists.
type PageResult struct {
	PageID  int64  `json:"page_id"`
	Attempt int    `json:"attempt"`
	Status  string `json:"status"`
	// HostQueue is the queue of the worker that ran the page (its crawl
	// setup is torn down there at the end).
	HostQueue string     `json:"host_queue,omitempty"`
	Responses int        `json:"responses,omitempty"`
	Queued    int        `json:"queued,omitempty"`
	Error     string     `json:"error,omitempty"`
	Counts    PageCounts `json:"counts"`
}

// CompletePageInput ends a page attempt the page activity could not end
// (its attempts ran out, or the host died on the last one).
type CompletePageInput struct {
	Ident   string `json:"ident"`
	PageID  int64  `json:"page_id"`
	Attempt int    `json:"attempt"`
	Note    string `json:"note"`
	// Transient ends the attempt transient instead of failed: the page is
	// READY again while it has attempts (a page batch that failed for
	// good: most of its pages may never have started).
	Transient bool `json:"transient,omitempty"`
}

// RequeueInput makes a finished crawl's failed pages READY again for a
// retry run (starter retry).
type RequeueInput struct {
	Ident string `json:"ident"`
	// Token names the requeue (the retry run's id): repeating it never
	// requeues a page twice.
	Token string `json:"token"`
	// Continue (a crawl continued past a limit, CrawlRerun.Continue) only
	// takes the frontier's retention off: no page is requeued.
	Continue bool `json:"continue,omitempty"`
	// StartPage (with Continue) asks whether the start page is still
	// READY (waiting for a later retry, or released by an abort):
	// RequeueResult.Seed says so, and the run runs it as the start page.
	StartPage bool `json:"start_page,omitempty"`
}

// RequeueResult is how many failed pages were requeued, whether the start
// page is one of them (a continue: whether it is READY, asked with
// StartPage), and the counts after.
type RequeueResult struct {
	Pages  int64      `json:"pages"`
	Seed   bool       `json:"seed,omitempty"`
	Counts PageCounts `json:"counts"`
}

// FailWaitingInput ends a stopped crawl's pages waiting for a later retry
// as failed, Note (why the retry is not run) before each one's last note.
type FailWaitingInput struct {
	Ident string `json:"ident"`
	Note  string `json:"note"`
}

// ReleasePagesInput returns claimed pages to READY (an abort, or a run
// that stops before running them).
type ReleasePagesInput struct {
	Ident   string  `json:"ident"`
	PageIDs []int64 `json:"page_ids"`
}

// SeedPageInput completes the start page from what its snapshot (a child
// SnapshotWorkflow in the crawl-page role) left on its host.
type SeedPageInput struct {
	Crawl Crawl    `json:"crawl"`
	Page  PageSpec `json:"page"`
	// Hooks are the snapshot's hooks (PLUGIN/NAME) whose final status was
	// succeeded or noresults: their last attempt's Snapshot records are
	// the page's links.
	Hooks []string `json:"hooks"`
	// Succeeded is the snapshot's outcome (finished, not failed).
	Succeeded bool   `json:"succeeded"`
	Note      string `json:"note,omitempty"`
	// Transient: a foreground hook of the snapshot ended transiently (its
	// in-run attempts ran out) and the crawl retries its pages later
	// (CrawlInput.PageRetryLater): the start page waits for its next later
	// retry (failed when no delay is left) instead of being completed.
	// What this attempt left on the host is kept aside under
	// attempts/ATTEMPT (the next attempt's records and WARC files are its
	// own). False in every input from before it.
	Transient bool `json:"transient,omitempty"`
}

// SetRulesInput stores a new rules version in Redis (IDENT_rules).
type SetRulesInput struct {
	Ident string          `json:"ident"`
	Rules scope.Versioned `json:"rules"`
}

// TeardownInput ends a crawl on one host: its crawl-level background
// hooks get SIGTERM.
type TeardownInput struct {
	Ident string `json:"ident"`
}

// WARCFile is one of a crawl's job WARC files in a host's archive dir.
type WARCFile struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// TeardownReport is what a host holds of a crawl once it is torn down
// there: the job WARC files it sees (its own, and with a shared archive
// dir the other hosts' too).
type TeardownReport struct {
	WARCs []WARCFile `json:"warcs,omitempty"`
}

// SealCrawlInput writes a crawl's WACZ on one host once it is torn down
// everywhere; Reported are the WARC files every host reported at its
// teardown.
type SealCrawlInput struct {
	Ident    string     `json:"ident"`
	URL      string     `json:"url"`
	Reported []WARCFile `json:"reported,omitempty"`
}

// PageRef is a crawl page that succeeded, as its WACZ lists it.
type PageRef struct {
	ID     int64
	URL    string
	Parent int64
}

// SealCrawlReport is where a crawl's WACZ was written on the host (or why
// it was not), and which reported WARC files that host could not see.
type SealCrawlReport struct {
	WACZ    string   `json:"wacz,omitempty"`
	Bytes   int64    `json:"bytes,omitempty"`
	Error   string   `json:"error,omitempty"`
	Missing []string `json:"missing,omitempty"`
	Host    string   `json:"host,omitempty"`
}

// Archive is where the report says the crawl's WACZ is, for SetArchive.
func (r SealCrawlReport) Archive(ident string) ArchiveInput {
	return ArchiveInput{Ident: ident, WACZ: r.WACZ, Bytes: r.Bytes, Error: r.Error, Host: r.Host, Missing: len(r.Missing)}
}

// PageRun is one page attempt as the host-side page runner needs it.
type PageRun = RunPageInput

// Discovered is one URL a page's hooks found (a Snapshot record).
type Discovered struct {
	URL       string
	Requisite bool
}

// PageOutcome is what the page runner did.
type PageOutcome struct {
	Status string // PageSucceeded, PageFailed, PageTransient or PagePostponed
	Note   string
	// NotBefore is when a postponed page may be claimed again (Redis'
	// clock, the host budget's).
	NotBefore time.Time
	// Last, on a transient outcome, spends every attempt the page has
	// left (frontier Outcome.Last): the start page's snapshot ran its
	// in-run attempts itself.
	Last bool
	// Responses are the attempt's fetches (URL kept: each is logged as a
	// download packet), capped.
	Responses []model.Response
	// Notices are the attempt's lines for the job's log (a hook's
	// jsonl.IsNotice lines: each fetch the policy refused, naming the URL
	// and the rule, never counted as a response; a body cut at a size
	// limit; links over a cap), capped like Responses.
	Notices []string
	// Cuts counts the attempt's losses to a limit (jsonl.IsCut notices: a
	// body cut short, links dropped over crawl.max_links_per_page); a
	// succeeded page with any has them in its Note.
	Cuts int
	// Links are the attempt's discoveries, capped at Crawl.MaxLinks.
	Links        []Discovered
	LinksDropped int
	// Results are the final results of the attempt's hooks (a hook that
	// ended transiently has none: the page is tried again), in the order
	// they ended: each is an event, as a snapshot hook's result is.
	Results []model.ArchiveResult
}

// PageTally is what a page attempt adds to the job's counters.
type PageTally struct {
	// FetchTally are the page's own fetches (the page, its redirects).
	FetchTally
	// Requisites are the attempt's requisite fetches by URL: each URL
	// counts once per crawl, whichever page, host or attempt fetched it
	// first (a worker restarted mid-crawl fetches shared stylesheets
	// again; the counters do not move).
	Requisites map[string]FetchTally
	// Cuts counts losses to a limit: bodies cut, links dropped over a cap
	// or refused by the frontier (the job's cut_count).
	Cuts int64
	// Results are the final results of the attempt's hooks: events
	// (event_counters, events_archive) of the page at PageURL.
	Results []model.ArchiveResult
	PageURL string
}

// FetchTally counts fetches: their responses and the bytes fetched
// (Responses.Bytes).
type FetchTally struct {
	Responses model.ResponseCounts
}

// Tally splits an attempt's Response records into the page's own fetches
// and its requisites by URL.
func Tally(responses []model.Response) PageTally {
	var t PageTally
	for _, r := range responses {
		if !r.Requisite {
			t.Responses.Add(r)
			continue
		}
		if t.Requisites == nil {
			t.Requisites = map[string]FetchTally{}
		}
		ft := t.Requisites[r.URL]
		ft.Responses.Add(r)
		t.Requisites[r.URL] = ft
	}
	return t
}

// LinksAdded is what the frontier did with one batch of a page's links.
type LinksAdded struct {
	// Queued: links that became pages (new, or promoted into the depth
	// limit).
	Queued int
	// Refused: links the frontier cannot keep as pages.
	Refused []RefusedLink
}

// PageWrite is what recording one finished page attempt writes
// (CrawlStore.RecordPages), in this order: its log packets (Entries, a
// repeat-safe batch named LogKey), its links (in batches of
// LinkBatch: Discover's 0, 1, …), its outcome with its tally (Complete).
type PageWrite struct {
	PageID    int64
	Attempt   int
	Status    string
	Note      string
	NotBefore time.Time
	// Last: PageOutcome.Last.
	Last    bool
	Tally   PageTally
	Links   []Link
	LogKey  string
	Entries []LogEntry
}

// LinkBatch is how many of a page's links one Discover batch holds.
const LinkBatch = 1000

// PageWritten is how one PageWrite went.
type PageWritten struct {
	// Queued: links that became pages.
	Queued int
	// Superseded (wraps ErrPageNotClaimed): the attempt no longer holds
	// its page; its links and outcome were not applied by this write.
	Superseded error
}

// RefusedLink is a link the frontier refused, and the rule it broke.
type RefusedLink struct {
	URL   string // cut to 200 bytes
	Bytes int    // its whole length
	Rule  string // e.g. "longer than 8192 bytes"
}

// SeedRecords are what the start page's snapshot left: the Snapshot
// records of the given hooks' last attempts, the responses of every
// attempt, and its WARC files appended to the job's WARC on that host.
type SeedRecords struct {
	Responses    []model.Response
	Links        []Discovered
	LinksDropped int
	// Notices are the cut notices for the job's log (jsonl.CutPrefix: the
	// links over crawl.max_links_per_page dropped).
	Notices []string
}

// URLList is a URL-list crawl's list (ArchiveBot's `!a <` / `!ao <`
// jobs, their url_file): every URL it names is a start page; the limits
// come from config crawl.url_list.
type URLList struct {
	URL          string        `json:"url"`
	MaxBytes     int64         `json:"max_bytes"`
	MaxURLs      int           `json:"max_urls"`
	FetchTimeout time.Duration `json:"fetch_timeout"`
}

// Validate checks that the list can be fetched.
func (l URLList) Validate() error {
	switch {
	case l.URL == "":
		return errors.New("url list: url must be set")
	case l.MaxBytes < 1 || l.MaxURLs < 1:
		return fmt.Errorf("url list %s: max bytes %d and max urls %d: must be >= 1", l.URL, l.MaxBytes, l.MaxURLs)
	case l.FetchTimeout <= 0:
		return fmt.Errorf("url list %s: fetch timeout %s: must be > 0", l.URL, l.FetchTimeout)
	}
	return nil
}

// SeedURLListInput downloads a URL-list crawl's list and seeds the
// frontier with its URLs.
type SeedURLListInput struct {
	Ident        string  `json:"ident"`
	List         URLList `json:"list"`
	MaxDepth     int     `json:"max_depth"`
	PageAttempts int     `json:"page_attempts"`
	UserAgent    string  `json:"user_agent,omitempty"`
	// Scope is the crawl's scope configuration (what the start URLs
	// returned need: one per host, or per directory with path_prefix).
	Scope scope.Config `json:"scope"`
	// RetryLater: SeedCrawlInput.RetryLater.
	RetryLater []time.Duration `json:"retry_later,omitempty"`
}

// SeedURLListResult is what the list gave.
type SeedURLListResult struct {
	Counts PageCounts `json:"counts"`
	// Starts are the listed URLs that set the crawl's scope
	// (scope.Config.StartURLs, scope.Starts).
	Starts []string `json:"starts"`
	// URLs, Bad and Denied count the list's URLs queued, its bad lines
	// and the URLs the fetch policy denies (each an ignore packet).
	URLs   int `json:"urls"`
	Bad    int `json:"bad"`
	Denied int `json:"denied"`
	// Path is where the list is kept on the worker that fetched it.
	Path string `json:"path"`
}

// URLListFetch is one download of a list (PageRunner.FetchURLList).
type URLListFetch struct {
	Ident     string
	URL       string
	MaxBytes  int64
	Timeout   time.Duration
	UserAgent string
}

// RobotsFetch is one fetch of an origin's robots.txt
// (PageRunner.FetchRobots).
type RobotsFetch struct {
	Ident     string
	Origin    string
	UserAgent string
	Timeout   time.Duration
}

// SitemapFetch reads a crawl's sitemaps (PageRunner.FetchSitemaps).
type SitemapFetch struct {
	Ident     string
	URLs      []string
	UserAgent string
	Limits    sitemap.Limits
	// Timeout bounds each file's fetch.
	Timeout time.Duration
}

// URLListData is a downloaded list and where it is kept.
type URLListData struct {
	Data []byte
	Path string
}

// SeedListInput seeds a frontier from a list's URLs (CrawlStore.SeedList).
type SeedListInput struct {
	Ident        string
	List         string // the list's URL: the frontier's seed
	URLs         []string
	MaxDepth     int
	PageAttempts int
	RetryLater   []time.Duration
}

// ErrURLListRefused marks a list that another download would not change:
// denied by the fetch policy, a 4xx status, not text, too large.
var ErrURLListRefused = errors.New("the url list is refused")
