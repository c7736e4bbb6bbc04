package submit

import (
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/searchattr"
	"github.com/archiveflow/archiveflow/workflows"
)

func TestInputFromConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Retry.Plugins = map[string]config.RetryPolicy{"wget": {MaximumAttempts: 7}}
	cfg.Job.HostTimeout = 90 * time.Second
	r := Request{Ident: "abc", URL: "http://x/", FetchDepth: "inf", Pool: cfg.Pools[0], Settings: model.Settings{Concurrency: 2}}
	in := Input(&cfg, r)
	require.NoError(t, in.Validate())
	assert.Equal(t, "abc", in.Job.SnapshotID)
	assert.Equal(t, int32(7), in.Retry.For("wget").MaximumAttempts)
	assert.Equal(t, int32(3), in.Retry.For("title").MaximumAttempts)
	assert.Equal(t, cfg.Retry.InitialInterval, in.Retry.For("wget").InitialInterval, "override inherits unset fields")
	assert.Equal(t, 90*time.Second, in.Timing.HostScheduleToStart)
	assert.Equal(t, cfg.Hooks.HeartbeatTimeout, in.Timing.HeartbeatTimeout)
	assert.Equal(t, 5*time.Second, in.Timing.StepAttributeDelay, "the configured default")
	assert.Equal(t, []int{5}, in.SequentialSteps)
	assert.Equal(t, workflows.Timing{
		HeartbeatTimeout: cfg.Hooks.HeartbeatTimeout, StartMargin: cfg.Hooks.StartMargin, ReadyMargin: cfg.Hooks.ReadyMargin, HostScheduleToStart: 90 * time.Second,
		BackgroundMaxRun: cfg.Hooks.BackgroundMaxRun, MaxDuration: cfg.Job.MaxDuration, MaxClaims: cfg.Job.MaxClaims,
		StepAttributeDelay: cfg.Job.StepAttributeDelay,
	}, in.Timing, "every timing comes from the configuration")
	assert.Equal(t, workflows.Retry{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 3},
		in.Retry.Default, "config's retry policy, not one of the workflow's own")
}

// hooks.retry_later goes into the input only when some list has a delay:
// an input without it (later retries off) is what every run before had.
func TestInputCarriesTheLaterRetries(t *testing.T) {
	cfg := config.Default()
	r := Request{Ident: "abc", URL: "http://x/", FetchDepth: "inf", Pool: cfg.Pools[0], Settings: model.Settings{Concurrency: 2}}
	assert.Nil(t, Input(&cfg, r).RetryLater, "off by default")
	cfg.Hooks.RetryLaterPlugins = map[string][]time.Duration{"title": {}}
	assert.Nil(t, Input(&cfg, r).RetryLater, "no list has a delay")
	cfg.Hooks.RetryLaterPlugins["wget"] = []time.Duration{time.Minute}
	in := Input(&cfg, r)
	require.NoError(t, in.Validate())
	require.NotNil(t, in.RetryLater)
	assert.Equal(t, []time.Duration{time.Minute}, in.RetryLater.For("wget"))
	assert.Empty(t, in.RetryLater.For("title"))
	assert.Empty(t, in.RetryLater.For("screenshot"))
	cfg.Hooks.RetryLater = []time.Duration{10 * time.Minute, time.Hour}
	assert.Equal(t, cfg.Hooks.RetryLater, Input(&cfg, r).RetryLater.For("screenshot"))
}

func TestStartOptions(t *testing.T) {
	r := Request{Ident: "abc", URL: "http://x/", Pool: config.Pool{Name: "p", TaskQueue: "q", Slots: 1}, PriorityKey: 2, StartDelay: time.Minute}
	o := StartOptions(r)
	assert.Equal(t, "abc", o.ID)
	assert.Equal(t, "q", o.TaskQueue)
	assert.Equal(t, "http://x/", o.StaticSummary)
	assert.Equal(t, 2, o.Priority.PriorityKey)
	assert.Equal(t, time.Minute, o.StartDelay)
	v, ok := o.TypedSearchAttributes.GetKeyword(searchattr.Pool)
	assert.True(t, ok)
	assert.Equal(t, "p", v)
	j := Job(r)
	assert.Equal(t, "q", j.TaskQueue)
	assert.Equal(t, "abc", j.WorkflowID)
}

func TestWorkflowPicksCrawlOrSnapshot(t *testing.T) {
	cfg := config.Default()
	base := Request{Ident: "abc", URL: "http://x/", Pool: cfg.Pools[0], Settings: model.Settings{Concurrency: 2}, CrawlDepth: -1}

	crawl := base
	crawl.FetchDepth = model.FetchInf
	wf, in, err := Workflow(&cfg, crawl)
	require.NoError(t, err)
	assert.Equal(t, workflowName(workflows.CrawlWorkflow), workflowName(wf))
	require.IsType(t, workflows.CrawlInput{}, in)
	assert.Equal(t, CrawlInput(&cfg, crawl), in, "the crawl input is CrawlInput's")

	shallow := base
	shallow.FetchDepth = model.FetchShallow
	wf, in, err = Workflow(&cfg, shallow)
	require.NoError(t, err)
	assert.Equal(t, workflowName(workflows.SnapshotWorkflow), workflowName(wf))
	assert.Equal(t, Input(&cfg, shallow), in, "the snapshot input is Input's")

	bad := crawl
	bad.Settings.Concurrency = -1
	_, _, err = Workflow(&cfg, bad)
	assert.ErrorContains(t, err, "concurrency", "an invalid input is refused with the rule")
}

// workflowName names a workflow function (functions do not compare).
func workflowName(fn any) string { return runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name() }

// TestURLListJobsAreCrawls: a URL-list request (ArchiveBot's `!a <` /
// `!ao <`) is a CrawlWorkflow whose input names the list with the
// configured limits; a shallow one has max depth 0.
func TestURLListJobsAreCrawls(t *testing.T) {
	cfg := config.Default()
	base := Request{Ident: "abc", URL: "http://x/list.txt", URLList: "http://x/list.txt", Pool: cfg.Pools[0],
		Settings: model.Settings{Concurrency: 2}, CrawlDepth: -1}
	want := &activities.URLList{URL: "http://x/list.txt", MaxBytes: cfg.Crawl.URLList.MaxBytes, MaxURLs: cfg.Crawl.URLList.MaxURLs,
		FetchTimeout: cfg.Crawl.URLList.FetchTimeout}
	for depth, maxDepth := range map[string]int{model.FetchInf: -1, model.FetchShallow: 0} {
		r := base
		r.FetchDepth = depth
		assert.True(t, r.IsCrawl(), depth)
		wf, in, err := Workflow(&cfg, r)
		require.NoError(t, err, depth)
		assert.Equal(t, workflowName(workflows.CrawlWorkflow), workflowName(wf), depth)
		require.IsType(t, workflows.CrawlInput{}, in)
		ci := in.(workflows.CrawlInput)
		assert.Equal(t, want, ci.URLList, depth)
		assert.Equal(t, maxDepth, ci.Crawl.MaxDepth, depth)
	}
	r := base
	r.FetchDepth = model.FetchInf
	ci := CrawlInput(&cfg, r)
	ci.URLList.FetchTimeout = 0
	assert.ErrorContains(t, ci.Validate(), "fetch timeout", "a list without its limits is refused")
}

// TestCrawlRetryOfAURLListGoesOnWithItsStartURLs: the first run of a
// URL-list crawl learns its start URLs from the list, so its input lacks
// them; the retry's input takes them from the run's final status, and
// keeps the input's own when a later run (continue-as-new) carried them.
func TestCrawlRetryOfAURLListGoesOnWithItsStartURLs(t *testing.T) {
	cfg := config.Default()
	r := Request{Ident: "abc", URL: "http://x/list.txt", URLList: "http://x/list.txt", FetchDepth: model.FetchInf,
		Pool: cfg.Pools[0], Settings: model.Settings{Concurrency: 2}, CrawlDepth: -1}
	first := CrawlInput(&cfg, r)
	require.Empty(t, first.Crawl.Scope.StartURLs)
	st := workflows.CrawlStatus{Settings: model.Settings{Concurrency: 5}, SettingsVersion: 3,
		StartURLs: []string{"http://a.example/", "http://b.example/"}}

	in := crawlRerunInput(first, st, "run-1", 4)
	assert.Equal(t, st.StartURLs, in.Crawl.Scope.StartURLs)
	assert.Equal(t, st.Settings, in.Settings)
	require.NotNil(t, in.Rerun)
	assert.Equal(t, workflows.CrawlRerun{PreviousRunID: "run-1", Pages: 4, SettingsVersion: 3}, *in.Rerun)
	assert.Nil(t, in.Carry)
	require.NoError(t, in.Validate())

	carried := first
	carried.Crawl.Scope.StartURLs = []string{"http://c.example/"}
	in = crawlRerunInput(carried, st, "run-2", 1)
	assert.Equal(t, []string{"http://c.example/"}, in.Crawl.Scope.StartURLs)

	single := CrawlInput(&cfg, Request{Ident: "abc", URL: "http://x/", FetchDepth: model.FetchInf, Pool: cfg.Pools[0],
		Settings: model.Settings{Concurrency: 2}, CrawlDepth: -1})
	in = crawlRerunInput(single, st, "run-3", 1)
	assert.Empty(t, in.Crawl.Scope.StartURLs, "a crawl of one start URL keeps its scope")
}

// TestCrawlRobotsPolicy: a crawl's robots.txt policy is the request's, else
// config crawl.robots; --sitemaps carries the configured limits; an
// unknown policy is refused naming the rule.
func TestCrawlRobotsPolicy(t *testing.T) {
	cfg := config.Default()
	r := Request{Ident: "abc", URL: "http://x/", FetchDepth: model.FetchInf, Pool: cfg.Pools[0], CrawlDepth: -1,
		Settings: model.Settings{Concurrency: 2, UserAgent: "ArchiveTeam ArchiveBot/1"}}
	in := CrawlInput(&cfg, r)
	assert.Equal(t, model.RobotsIgnore, in.Crawl.Robots, "config.Default's crawl.robots")
	assert.False(t, in.Crawl.ObeysRobots())
	assert.Equal(t, "ArchiveTeam ArchiveBot/1", in.Crawl.RobotsAgent)

	cfg.Crawl.Robots = model.RobotsObey
	assert.True(t, CrawlInput(&cfg, r).Crawl.ObeysRobots(), "the configured default")
	r.Robots, r.Sitemaps = model.RobotsIgnore, true
	in = CrawlInput(&cfg, r)
	assert.False(t, in.Crawl.ObeysRobots(), "the request's policy wins")
	assert.True(t, in.Crawl.Sitemaps)
	assert.Equal(t, cfg.Crawl.Sitemaps.MaxURLs, in.Crawl.SitemapLimits.MaxURLs)
	require.NoError(t, in.Validate())

	r.Robots = "respect"
	_, _, err := Workflow(&cfg, r)
	assert.ErrorContains(t, err, `robots "respect": must be obey or ignore`)
}
