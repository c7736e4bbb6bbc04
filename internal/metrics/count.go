package metrics

import (
	"time"

	"github.com/archiveflow/archiveflow/internal/model"
)

// Hooks: counted where every hook attempt starts and ends
// (engine.Engine.attempt).
var (
	hooksStarted = counterVec("hooks_started_total",
		"Hook attempts started, by plugin.", "plugin")
	hooksFinished = counterVec("hooks_finished_total",
		"Hook attempts finished, by plugin and status: a final status (succeeded, noresults, skipped, failed), transient (to be retried) or error (the attempt could not run).",
		"plugin", "status")
	hookDuration = histogramVec("hook_duration_seconds",
		"Wall time of finished hook attempts, by plugin.",
		[]float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}, "plugin")
)

// Hook attempt statuses besides model's final ones.
const (
	HookTransient = "transient" // the attempt ended and will be retried
	HookError     = "error"     // the attempt could not run (no process, bad configuration)
)

// HookStarted counts one hook attempt of plugin starting.
func HookStarted(plugin string) { hooksStarted.WithLabelValues(plugin).Inc() }

// HookFinished counts one hook attempt of plugin ending with status (a
// model.Status, HookTransient or HookError) after d.
func HookFinished(plugin, status string, d time.Duration) {
	hooksFinished.WithLabelValues(plugin, status).Inc()
	hookDuration.WithLabelValues(plugin).Observe(d.Seconds())
}

// Crawl fetches: counted where a page attempt's fetches are added to its
// job's counters (jobstore.CrawlStore.Complete), exactly what was added.
var (
	fetches = counterVec("crawl_fetches_total",
		"Crawl fetches added to their jobs' counters, by kind (page: a page's own fetches and redirects; requisite: once per URL and crawl) and response class (1xx..5xx, unknown) and, counted besides its class, class error for those ArchiveBot counts as errors (error_count). 2xx+3xx is items_downloaded.",
		"kind", "class")
	fetchedBytes = counterVec("crawl_fetched_bytes_total",
		"Bytes of the crawl fetches added to their jobs' counters (bytes_downloaded), by kind (page, requisite).", "kind")
)

// Kinds of crawl fetches: the bounded values of the kind label.
const (
	FetchPage      = "page"      // a page's own fetches (the page, its redirects)
	FetchRequisite = "requisite" // a page's requisites, each URL once per crawl
)

// fetchClasses are the values of crawl_fetches_total's class label.
var fetchClasses = []string{"1xx", "2xx", "3xx", "4xx", "5xx", "unknown", "error"}

func init() {
	// Every bounded label value is exposed from the start, at zero.
	for _, k := range []string{FetchPage, FetchRequisite} {
		for _, c := range fetchClasses {
			fetches.WithLabelValues(k, c)
		}
		fetchedBytes.WithLabelValues(k)
	}
	for _, r := range []string{Backoff429, Backoff503, BackoffMarker, BackoffOther} {
		rateLimitBackoffs.WithLabelValues(r)
	}
}

// Fetched counts crawl fetches of kind (FetchPage, FetchRequisite) by
// class and their bytes (rc.Bytes), as they were added to a job's counters.
func Fetched(kind string, rc model.ResponseCounts) {
	for i, n := range []int64{rc.R1xx, rc.R2xx, rc.R3xx, rc.R4xx, rc.R5xx, rc.Runk, rc.Errors} {
		if n > 0 {
			fetches.WithLabelValues(kind, fetchClasses[i]).Add(float64(n))
		}
	}
	if rc.Bytes > 0 {
		fetchedBytes.WithLabelValues(kind).Add(float64(rc.Bytes))
	}
}

// Politeness: the per-host budget and rate-limit backoff count through
// these (docs/operations.md).
var (
	hostBudgetWaits = histogram("host_budget_wait_seconds",
		"Waits of fetches for their target host's budget (crawl.per_host concurrency and delay, fleet-wide in Redis); _count is the number of waits.",
		[]float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300})
	rateLimitBackoffs = counterVec("rate_limit_backoffs_total",
		"Hosts backed off after a rate-limit answer, by reason: 429, 503, marker (a configured rate-limit marker) or other.",
		"reason")
	rateLimitBackoffSeconds = histogram("rate_limit_backoff_seconds",
		"Length of the backoffs of rate-limited hosts (Retry-After or the exponential backoff).",
		[]float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600})
)

// Rate-limit backoff reasons: the bounded values of the reason label.
const (
	Backoff429    = "429"
	Backoff503    = "503"
	BackoffMarker = "marker"
	BackoffOther  = "other"
)

// HostBudgetWait counts one fetch that waited d for its host's budget.
func HostBudgetWait(d time.Duration) {
	hostBudgetWaits.Observe(d.Seconds())
}

// RateLimitBackoff counts one host backed off for d because of reason
// (Backoff429, Backoff503, BackoffMarker; any other value counts as
// BackoffOther, keeping the label bounded).
func RateLimitBackoff(reason string, d time.Duration) {
	switch reason {
	case Backoff429, Backoff503, BackoffMarker:
	default:
		reason = BackoffOther
	}
	rateLimitBackoffs.WithLabelValues(reason).Inc()
	rateLimitBackoffSeconds.Observe(d.Seconds())
}
