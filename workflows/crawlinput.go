package workflows

import (
	"fmt"
	"time"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
)

// CrawlTiming holds the crawl's timeouts and bounds; every value comes from
// the configuration (internal/submit).
type CrawlTiming struct {
	// HeartbeatTimeout of page activities: how soon a dead worker is
	// noticed (its page is run again by another worker).
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	// PageTimeout bounds one page attempt (StartToClose).
	PageTimeout time.Duration `json:"page_timeout"`
	// PageActivityAttempts is how often a page activity is run again when
	// it could not record its outcome (worker lost, Redis down too long);
	// then the page attempt is recorded failed.
	PageActivityAttempts int32 `json:"page_activity_attempts"`
	// HostScheduleToStart bounds the wait for a worker's own queue (the
	// start page's completion and the teardown there).
	HostScheduleToStart time.Duration `json:"host_schedule_to_start"`
	// TeardownTimeout bounds the teardown on one host.
	TeardownTimeout time.Duration `json:"teardown_timeout"`
	// SealTimeout bounds writing the crawl's WACZ at its seal (0, an
	// input from before it: PageTimeout).
	SealTimeout time.Duration `json:"seal_timeout,omitempty"`
	// HistoryEvents is the history length at which a run stops launching
	// pages, drains and continues as new.
	HistoryEvents int `json:"history_events"`
	// AttrInterval is how often at most the pages done/queued search
	// attributes are upserted.
	AttrInterval time.Duration `json:"attr_interval"`
	// BatchPages > 0 runs the pages in batches (issue 26): one
	// RunPageBatch activity of up to max(BatchPages, concurrency) claimed
	// pages at a time, starting pages for BatchTime at most. 0 (every
	// input from before batches) runs each page as its own RunPage.
	BatchPages int           `json:"batch_pages,omitempty"`
	BatchTime  time.Duration `json:"batch_time,omitempty"`
	// BatchConcurrency > 0 runs several batches at once, each running at
	// most that many pages at once (its share of the concurrency); 0
	// (every input from before it) runs one batch at a time.
	BatchConcurrency int `json:"batch_concurrency,omitempty"`
	// MaxDuration bounds the whole crawl (0 = none); it ends failed.
	MaxDuration time.Duration `json:"max_duration"`
}

// Validate checks every timing.
func (t CrawlTiming) Validate() error {
	switch {
	case t.HeartbeatTimeout <= 0:
		return fmt.Errorf("crawl timing heartbeat_timeout %s: must be > 0", t.HeartbeatTimeout)
	case t.PageTimeout <= 0:
		return fmt.Errorf("crawl timing page_timeout %s: must be > 0", t.PageTimeout)
	case t.PageActivityAttempts < 1:
		return fmt.Errorf("crawl timing page_activity_attempts %d: must be >= 1", t.PageActivityAttempts)
	case t.HostScheduleToStart <= 0:
		return fmt.Errorf("crawl timing host_schedule_to_start %s: must be > 0", t.HostScheduleToStart)
	case t.TeardownTimeout <= 0:
		return fmt.Errorf("crawl timing teardown_timeout %s: must be > 0", t.TeardownTimeout)
	case t.HistoryEvents < 100:
		return fmt.Errorf("crawl timing history_events %d: must be >= 100", t.HistoryEvents)
	case t.AttrInterval <= 0:
		return fmt.Errorf("crawl timing attr_interval %s: must be > 0", t.AttrInterval)
	case t.BatchPages < 0 || (t.BatchPages > 0 && t.BatchTime <= 0):
		return fmt.Errorf("crawl timing batch_pages %d, batch_time %s: batch_pages must be >= 0 (0 = a page per activity), batch_time > 0 with batches", t.BatchPages, t.BatchTime)
	case t.BatchConcurrency < 0:
		return fmt.Errorf("crawl timing batch_concurrency %d: must be >= 0 (0 = one batch at a time)", t.BatchConcurrency)
	case t.MaxDuration < 0:
		return fmt.Errorf("crawl timing max_duration %s: must be >= 0 (0 = none)", t.MaxDuration)
	}
	return nil
}

// CrawlInput starts one CrawlWorkflow run. internal/submit builds it from
// the configuration; a run that continues as new passes it on with Carry.
type CrawlInput struct {
	Version int              `json:"version"`
	Crawl   activities.Crawl `json:"crawl"`
	// Pool is the worker pool's name (a search attribute).
	Pool string `json:"pool"`
	// TaskQueue is the pool's shared queue: pages run on any of its workers.
	TaskQueue string         `json:"task_queue"`
	Settings  model.Settings `json:"settings"`
	// Rules are the job's initial rules (version 0).
	Rules scope.Rules `json:"rules,omitempty"`
	// Seed is the start page's snapshot (every plugin): a child
	// SnapshotWorkflow in the crawl-page role (Job.CrawlPage).
	Seed   SnapshotInput `json:"seed"`
	Timing CrawlTiming   `json:"timing"`
	// Carry is the state the previous run handed on (nil for the first).
	Carry *CrawlCarry `json:"carry,omitempty"`
	// Rerun makes the run a retry of the crawl's failed pages (`starter
	// retry`, internal/submit.Rerun): it starts from the existing frontier
	// instead of seeding it. nil (every recorded history) seeds as before.
	Rerun *CrawlRerun `json:"rerun,omitempty"`
	// URLList, when set, makes this a URL-list crawl (ArchiveBot's `!a <`
	// and `!ao <` jobs): the list is downloaded on the pool and every URL
	// it names is a start page at depth 0 (SeedURLList); Seed is not run.
	// Absent: the single start URL of Crawl.Job.URL.
	URLList *activities.URLList `json:"url_list,omitempty"`
	// PageRetryLater are the delays of a page's later retries
	// (hooks.retry_later, crawllater.go): a page whose attempts all ended
	// transiently waits in the frontier for the next delay instead of
	// failing. Absent, as in every input recorded before it: the page is
	// failed when its attempts run out.
	PageRetryLater []time.Duration `json:"page_retry_later,omitempty"`
}

// CrawlRerun makes a CrawlWorkflow run a retry of a finished crawl: a new
// run of the same workflow ID that takes the job back in Redis (ReopenJob,
// as a snapshot retry does), makes the pages whose final status is failed
// READY again with fresh attempts (activities.RequeueFailed, once per
// run) and crawls from there: only those pages, and the pages they
// discover, are fetched. The start page, when it is one of them, runs
// again as the start page (a child SnapshotWorkflow with every plugin).
type CrawlRerun struct {
	// PreviousRunID is the run whose failed pages are retried.
	PreviousRunID string `json:"previous_run_id"`
	// Pages is how many failed pages the previous run left (what the
	// starter showed; the requeue counts them again).
	Pages int64 `json:"pages"`
	// SettingsVersion and Rules are the previous run's last ones: the
	// retry goes on with them (Settings holds its settings).
	SettingsVersion int             `json:"settings_version"`
	Rules           scope.Versioned `json:"rules"`
	// Continue makes the run go on with the pages the previous run left
	// READY (a crawl finished at a limit; `starter retry --continue`)
	// instead of retrying failed pages: nothing is requeued, so no page is
	// fetched twice; the run's Settings are the job's from its start
	// (their limits lifted or changed). Pages is then 0 or the READY
	// pages.
	Continue bool `json:"continue,omitempty"`
	// ListPartial: the previous run's URL list was cut short while it was
	// seeded (what the starter saw; the run reads its frontier again and
	// seeds the rest: resumesList), so a retry may have no failed page.
	ListPartial bool `json:"list_partial,omitempty"`
}

// Validate checks that the rerun names its run and has pages to retry.
func (r CrawlRerun) Validate() error {
	switch {
	case r.PreviousRunID == "":
		return fmt.Errorf("crawl rerun: previous_run_id must not be empty")
	case r.Pages < 0:
		return fmt.Errorf("crawl rerun of run %s: pages %d: must be >= 0", r.PreviousRunID, r.Pages)
	case r.Pages < 1 && !r.Continue && !r.ListPartial:
		return fmt.Errorf("crawl rerun of run %s: pages %d: must be >= 1 (no page failed)", r.PreviousRunID, r.Pages)
	case r.SettingsVersion < 0:
		return fmt.Errorf("crawl rerun of run %s: settings_version %d: must be >= 0", r.PreviousRunID, r.SettingsVersion)
	}
	return r.Rules.Rules.Validate()
}

// CrawlCarry is what a crawl run hands to the next (continue-as-new): the
// frontier stays in Redis, only the workflow's own state travels.
type CrawlCarry struct {
	Run             int                   `json:"run"` // 2 for the second run, ...
	SettingsVersion int                   `json:"settings_version"`
	Rules           scope.Versioned       `json:"rules"`
	SeedDone        bool                  `json:"seed_done"`
	SetupHosts      []string              `json:"setup_hosts,omitempty"`
	Counts          activities.PageCounts `json:"counts"`
	// Deadline is the absolute end of MaxDuration (zero: none).
	Deadline time.Time `json:"deadline,omitzero"`
	// Failure is why the crawl will end failed, if it will.
	Failure string `json:"failure,omitempty"`
	// Pages is how many page attempts earlier runs launched.
	Pages int64 `json:"pages"`
	// Started is when the crawl's first run (of its submit, or of a
	// retry) started: Settings.MaxDuration counts from it. Zero in runs
	// carried before it existed: the duration limit then counts from the
	// run's own start.
	Started time.Time `json:"started,omitzero"`
}

// Validate checks that the input carries every value the workflow needs.
func (in CrawlInput) Validate() error {
	job := in.Crawl.Job
	switch {
	case in.Version != InputComplete:
		return fmt.Errorf("crawl input version %d: must be %d (build the input with internal/submit)", in.Version, InputComplete)
	case job.Ident == "" || job.URL == "" || job.SnapshotID == "":
		return fmt.Errorf("crawl %q: ident, url and snapshot_id must be set", job.Ident)
	case in.TaskQueue == "":
		return fmt.Errorf("crawl %s: task_queue must not be empty", job.Ident)
	case in.Crawl.MaxDepth < -1:
		return fmt.Errorf("crawl %s: max depth %d: must be -1 (none) or >= 0", job.Ident, in.Crawl.MaxDepth)
	case len(in.Crawl.PagePlugins) == 0:
		return fmt.Errorf("crawl %s: page plugins must not be empty", job.Ident)
	case in.Crawl.PageAttempts < 1:
		return fmt.Errorf("crawl %s: page attempts %d: must be >= 1", job.Ident, in.Crawl.PageAttempts)
	case !in.Seed.Job.CrawlPage || in.Seed.Job.Ident != job.Ident:
		return fmt.Errorf("crawl %s: the seed snapshot must be a crawl page of the same job", job.Ident)
	}
	if in.Crawl.Robots != "" {
		if err := model.ValidateRobots(in.Crawl.Robots); err != nil {
			return fmt.Errorf("crawl %s: %w", job.Ident, err)
		}
	}
	if in.Crawl.Sitemaps {
		if err := in.Crawl.SitemapLimits.Validate(); err != nil {
			return fmt.Errorf("crawl %s: %w", job.Ident, err)
		}
	}
	if err := in.Settings.Validate(); err != nil {
		return fmt.Errorf("crawl %s settings: %w", job.Ident, err)
	}
	if err := in.Rules.Validate(); err != nil {
		return fmt.Errorf("crawl %s: %w", job.Ident, err)
	}
	if _, err := scope.New(job.URL, in.Crawl.Scope); err != nil {
		return fmt.Errorf("crawl %s: %w", job.Ident, err)
	}
	if err := in.Timing.Validate(); err != nil {
		return fmt.Errorf("crawl %s: %w", job.Ident, err)
	}
	if in.URLList != nil {
		if err := in.URLList.Validate(); err != nil {
			return fmt.Errorf("crawl %s: %w", job.Ident, err)
		}
	}
	if err := in.Seed.Validate(); err != nil {
		return fmt.Errorf("crawl %s seed: %w", job.Ident, err)
	}
	if in.Rerun != nil {
		if err := in.Rerun.Validate(); err != nil {
			return fmt.Errorf("crawl %s: %w", job.Ident, err)
		}
	}
	if len(in.PageRetryLater) > maxPageRetryLater {
		return fmt.Errorf("crawl %s: page_retry_later: %d delays: must be at most %d", job.Ident, len(in.PageRetryLater), maxPageRetryLater)
	}
	for i, d := range in.PageRetryLater {
		if d < time.Millisecond {
			return fmt.Errorf("crawl %s: page_retry_later[%d] %s: must be >= 1ms", job.Ident, i, d)
		}
	}
	return nil
}
