// Package submit owns turning one validated job request into what Temporal
// and Redis need: the SnapshotWorkflow or CrawlWorkflow input built from
// configuration, the workflow start options (ID, summary, priority, delay,
// search attributes) and the Redis job record. The starter, the dev stack, integration tests
// and benchmarks all submit through it, so every job is built the same way.
package submit

import (
	"cmp"
	"maps"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/searchattr"
	"github.com/archiveflow/archiveflow/internal/sitemap"
	"github.com/archiveflow/archiveflow/workflows"
)

// Request is one validated job: the caller has checked the URL (and derived
// its ident), the pool, the settings and the start time.
type Request struct {
	Ident       string
	URL         string // normalised
	FetchDepth  string // shallow or inf
	Pool        config.Pool
	Settings    model.Settings
	PriorityKey int           // Temporal priority key (1 = first); 0 = server default
	Nice        int           // the job's niceness, recorded in its hash (model.PriorityKey gives PriorityKey)
	StartDelay  time.Duration // 0 = now
	NotBefore   time.Time     // start time when delayed (for the scheduled index)
	StartedBy   string
	StartedIn   string // cli, dev, test, ...
	// CreateOp makes CreateJob repeat-safe for one submit command.
	CreateOp string
	// Replace starts afresh over a retained finished job.
	Replace bool
	// CrawlDepth is a crawl's depth limit when FetchDepth is inf (-1 =
	// none); Rules are its initial rules.
	CrawlDepth int
	Rules      scope.Rules
	// URLList is the URL of a list of start URLs (ArchiveBot's `!a <` /
	// `!ao <` jobs, url_file); URL is then the list's URL too. Such a job
	// is always a crawl: FetchDepth inf crawls from every listed URL
	// (CrawlDepth), shallow fetches each once (max depth 0).
	URLList string
	// Robots is a crawl's robots.txt policy (model.RobotsObey or
	// RobotsIgnore); "" takes config crawl.robots.
	Robots string
	// Sitemaps seeds a crawl's start host's sitemap URLs at depth 1.
	Sitemaps bool
	// Tag restricts the job to the pool's workers with that tag (mnbot's
	// pipeline tags): every task of the job goes to Pool.QueueFor(Tag).
	// "" = any worker of the pool that is not match_only.
	Tag string
}

// Queue is the task queue every task of the job goes to: the pool's, or
// its tag's (config.Pool.QueueFor).
func (r Request) Queue() string { return r.Pool.QueueFor(r.Tag) }

// IsCrawl reports whether the request is a crawl (FetchDepth inf, or a
// URL list).
func (r Request) IsCrawl() bool { return r.FetchDepth == model.FetchInf || r.URLList != "" }

// Workflow is the workflow a request starts and its input, validated:
// CrawlWorkflow with CrawlInput for a crawl, SnapshotWorkflow with Input
// otherwise. Every submitter picks the workflow here.
func Workflow(cfg *config.Config, r Request) (workflow, input any, err error) {
	if r.IsCrawl() {
		in := CrawlInput(cfg, r)
		return workflows.CrawlWorkflow, in, in.Validate()
	}
	in := Input(cfg, r)
	return workflows.SnapshotWorkflow, in, in.Validate()
}

// CrawlInput builds a crawl's workflow input from configuration: the start
// page's snapshot input (every plugin, crawl-page role) and the page
// settings of config crawl.*.
func CrawlInput(cfg *config.Config, r Request) workflows.CrawlInput {
	seed := Input(cfg, r)
	seed.Job.FetchDepth = model.FetchShallow // the start page is one page
	seed.Job.CrawlPage = true
	cc := cfg.Crawl
	maxDepth := r.CrawlDepth
	var list *activities.URLList
	if r.URLList != "" {
		list = &activities.URLList{URL: r.URLList, MaxBytes: cc.URLList.MaxBytes, MaxURLs: cc.URLList.MaxURLs, FetchTimeout: cc.URLList.FetchTimeout}
		if r.FetchDepth == model.FetchShallow {
			maxDepth = 0 // every listed URL once, with its requisites
		}
	}
	return workflows.CrawlInput{
		Version: workflows.InputComplete,
		Crawl: activities.Crawl{
			Job:          activities.Job{Ident: r.Ident, URL: r.URL, SnapshotID: r.Ident, FetchDepth: model.FetchInf},
			MaxDepth:     maxDepth,
			Scope:        scope.Config{Subdomains: cc.Scope.Subdomains, PathPrefix: cc.Scope.PathPrefix, OffsiteOnce: cc.Scope.OffsiteOnce},
			PagePlugins:  slices.Clone(cc.PagePlugins),
			PageAttempts: cc.PageAttempts,
			MaxLinks:     cc.MaxLinksPerPage,
			Robots:       cmp.Or(r.Robots, cc.Robots),
			RobotsAgent:  r.Settings.UserAgent,
			Sitemaps:     r.Sitemaps,
			SitemapLimits: sitemap.Limits{MaxBytes: cc.Sitemaps.MaxBytes, MaxURLs: cc.Sitemaps.MaxURLs,
				MaxFiles: cc.Sitemaps.MaxFiles},
		},
		Pool:      r.Pool.Name,
		TaskQueue: r.Queue(),
		Settings:  r.Settings,
		Rules:     r.Rules,
		Seed:      seed,
		Timing: workflows.CrawlTiming{
			HeartbeatTimeout:     cfg.Hooks.HeartbeatTimeout,
			PageTimeout:          cc.PageTimeout,
			PageActivityAttempts: int32(cc.PageAttempts),
			HostScheduleToStart:  cfg.Job.HostTimeout,
			TeardownTimeout:      cfg.Hooks.Grace + cfg.Hooks.StartMargin,
			HistoryEvents:        cc.HistoryEvents,
			BatchPages:           cc.BatchPages,
			BatchTime:            cc.BatchTime,
			BatchConcurrency:     cc.BatchConcurrency,
			AttrInterval:         cc.AttrInterval,
			MaxDuration:          cfg.Job.MaxDuration,
			SealTimeout:          cfg.WACZ.SealTimeout,
		},
		URLList: list,
		// A page's later retries are the hooks' default list
		// (hooks.retry_later): a crawl page is one unit, not a plugin's.
		PageRetryLater: slices.Clone(cfg.Hooks.RetryLater),
	}
}

// Input builds the workflow input from configuration: every value the
// workflow needs is in it (the workflow fills in nothing).
func Input(cfg *config.Config, r Request) workflows.SnapshotInput {
	per := make(map[string]workflows.Retry, len(cfg.Retry.Plugins))
	for _, plugin := range slices.Sorted(maps.Keys(cfg.Retry.Plugins)) {
		per[plugin] = Retry(cfg.Retry.PolicyFor(plugin))
	}
	return workflows.SnapshotInput{
		Version: workflows.InputVersion,
		Job: activities.Job{
			Ident: r.Ident, URL: r.URL, SnapshotID: r.Ident, FetchDepth: r.FetchDepth,
		},
		Pool:            r.Pool.Name,
		TaskQueue:       r.Queue(),
		Settings:        r.Settings,
		SequentialSteps: slices.Clone(cfg.Job.SequentialSteps),
		Retry:           workflows.RetryPolicies{Default: Retry(cfg.Retry.RetryPolicy), PerPlugin: per},
		HostSteps:       cfg.Job.HostSteps,
		RetryLater:      retryLater(cfg.Hooks),
		Timing: workflows.Timing{
			HeartbeatTimeout:    cfg.Hooks.HeartbeatTimeout,
			StartMargin:         cfg.Hooks.StartMargin,
			ReadyMargin:         cfg.Hooks.ReadyMargin,
			HostScheduleToStart: cfg.Job.HostTimeout,
			BackgroundMaxRun:    cfg.Hooks.BackgroundMaxRun,
			MaxDuration:         cfg.Job.MaxDuration,
			MaxClaims:           cfg.Job.MaxClaims,
			StepAttributeDelay:  cfg.Job.StepAttributeDelay,
		},
	}
}

// retryLater is the workflow's view of hooks.retry_later and its
// per-plugin lists; nil when no list has a delay (later retries off).
func retryLater(h config.Hooks) *workflows.RetryLater {
	on := len(h.RetryLater) > 0
	per := make(map[string][]time.Duration, len(h.RetryLaterPlugins))
	for _, plugin := range slices.Sorted(maps.Keys(h.RetryLaterPlugins)) {
		per[plugin] = slices.Clone(h.RetryLaterPlugins[plugin])
		on = on || len(per[plugin]) > 0
	}
	if !on {
		return nil
	}
	return &workflows.RetryLater{Default: slices.Clone(h.RetryLater), PerPlugin: per}
}

// Retry converts a configured retry policy to the workflow's.
func Retry(p config.RetryPolicy) workflows.Retry {
	return workflows.Retry{
		InitialInterval:    p.InitialInterval,
		BackoffCoefficient: p.BackoffCoefficient,
		MaximumInterval:    p.MaximumInterval,
		MaximumAttempts:    int32(p.MaximumAttempts),
	}
}

// StartOptions are the workflow start options of one job: ID = ident,
// summary = URL, every search attribute set from the start.
func StartOptions(r Request) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       r.Ident,
		TaskQueue:                                r.Queue(),
		StaticSummary:                            r.URL,
		StartDelay:                               r.StartDelay,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		Priority:                                 temporal.Priority{PriorityKey: r.PriorityKey},
		TypedSearchAttributes:                    temporal.NewSearchAttributes(attrs(r)...),
	}
}

// attrs are a job's search attributes at its start.
func attrs(r Request) []temporal.SearchAttributeUpdate {
	a := []temporal.SearchAttributeUpdate{
		searchattr.Ident.ValueSet(r.Ident),
		searchattr.URL.ValueSet(r.URL),
		searchattr.State.ValueSet(string(model.StatePending)),
		searchattr.Pool.ValueSet(r.Pool.Name),
	}
	if r.IsCrawl() {
		return append(a, searchattr.PagesDone.ValueSet(0), searchattr.PagesQueued.ValueSet(1))
	}
	return append(a, searchattr.Step.ValueSet(0))
}

// Job is the Redis job record of the request.
func Job(r Request) rkeys.Job {
	return rkeys.Job{
		Ident: r.Ident, URL: r.URL, FetchDepth: r.FetchDepth,
		StartedBy: r.StartedBy, StartedIn: r.StartedIn, Nice: r.Nice,
		Settings:   r.Settings,
		WorkflowID: r.Ident, TaskQueue: r.Queue(),
		NotBefore: r.NotBefore,
		CreateOp:  r.CreateOp,
		Replace:   r.Replace,
	}
}
