package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/hookenv"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// FieldError is one invalid configuration value.
type FieldError struct {
	Key   string // dotted config key, e.g. redis.log_cap
	Value any    // the offending value (secrets are never put here)
	Rule  string // the rule it breaks
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("config %s = %v: %s", e.Key, e.Value, e.Rule)
}

var poolName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// tagPattern is ValidateTag's rule.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidateTag checks a job or pipeline tag (Pool.Tags, submit --tag,
// workers --tag): 1..64 characters of [A-Za-z0-9._-], as a tag is part of
// a task queue's name (Pool.QueueFor).
func ValidateTag(tag string) error {
	if !tagPattern.MatchString(tag) {
		return fmt.Errorf("tag %q: must be 1..64 characters of A-Z a-z 0-9 . _ -", tag)
	}
	return nil
}

// Validate checks every value and returns all problems found, joined.
func (c *Config) Validate() error {
	v := &validator{}
	v.nonEmpty("archive_dir", c.ArchiveDir)
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, "console", "json")

	v.hostPort("temporal.host_port", c.Temporal.HostPort)
	if c.Metrics.Listen != "" {
		v.listenAddr("metrics.listen", c.Metrics.Listen)
	}
	v.nonEmpty("temporal.namespace", c.Temporal.Namespace)
	if c.Temporal.UIURL != "" {
		v.httpURL("temporal.ui_url", c.Temporal.UIURL)
	}
	v.tls("temporal.tls", c.Temporal.TLS)
	v.oneOf("temporal.compression", c.Temporal.Compression, "none", "gzip")

	v.redisURL("redis.url", c.Redis.URL)
	v.tls("redis.tls", c.Redis.TLS)
	v.positiveDur("redis.dial_timeout", c.Redis.DialTimeout)
	v.positiveDur("redis.read_timeout", c.Redis.ReadTimeout)
	v.positiveDur("redis.write_timeout", c.Redis.WriteTimeout)
	v.check(c.Redis.MaxRetries >= -1, "redis.max_retries", c.Redis.MaxRetries, "must be >= -1 (-1 disables retries)")
	v.positiveDur("redis.min_retry_backoff", c.Redis.MinBackoff)
	v.check(c.Redis.MaxBackoff >= c.Redis.MinBackoff, "redis.max_retry_backoff", c.Redis.MaxBackoff, "must be >= redis.min_retry_backoff")
	v.check(c.Redis.LogCap >= 1, "redis.log_cap", c.Redis.LogCap, "must be >= 1")
	v.check(c.Redis.PacketCap >= 256, "redis.packet_cap", c.Redis.PacketCap, "must be >= 256 bytes")
	v.check(c.Redis.RetainCompleted >= 0, "redis.retain_completed", c.Redis.RetainCompleted, "must be >= 0")
	v.check(c.Redis.RetainAborted >= 0, "redis.retain_aborted", c.Redis.RetainAborted, "must be >= 0")
	v.check(c.Redis.RetainFailed >= 0, "redis.retain_failed", c.Redis.RetainFailed, "must be >= 0")
	v.positiveDur("redis.events_ttl", c.Redis.EventsTTL)
	v.oneOf("redis.page_events", c.Redis.PageEvents, "problems", "all")
	v.check(c.Redis.LogBatchWindow >= 1, "redis.log_batch_window", c.Redis.LogBatchWindow, "must be >= 1")
	v.check(!strings.ContainsAny(c.Redis.Namespace, " \t\r\n"), "redis.namespace", c.Redis.Namespace, "must not contain whitespace")

	v.positiveDur("wacz.seal_timeout", c.WACZ.SealTimeout)
	for i, p := range c.WACZ.Captures {
		v.check(p != "" && !strings.ContainsAny(p, "/:\\ "), fmt.Sprintf("wacz.captures[%d]", i), p, "must be a plugin name (no /, :, \\ or space)")
	}
	v.check(c.Plugins.Builtin || len(c.Plugins.Dirs) > 0, "plugins.dirs", c.Plugins.Dirs, "must list at least one plugin root when plugins.builtin is false")
	for i, d := range c.Plugins.Dirs {
		v.nonEmpty(fmt.Sprintf("plugins.dirs[%d]", i), d)
	}

	v.positiveDur("hooks.timeout", c.Hooks.Timeout)
	v.check(c.Hooks.Grace >= 0, "hooks.grace", c.Hooks.Grace, "must be >= 0")
	v.check(c.Hooks.LineCap >= 1024, "hooks.line_cap", c.Hooks.LineCap, "must be >= 1024 bytes")
	v.positiveDur("hooks.heartbeat_interval", c.Hooks.HeartbeatInterval)
	v.check(c.Hooks.HeartbeatTimeout > c.Hooks.HeartbeatInterval, "hooks.heartbeat_timeout", c.Hooks.HeartbeatTimeout, "must be > hooks.heartbeat_interval")
	v.positiveDur("hooks.job_heartbeat_interval", c.Hooks.JobHeartbeatInterval)
	v.positiveDur("hooks.settings_poll_interval", c.Hooks.SettingsPollInterval)
	v.positiveDur("hooks.start_margin", c.Hooks.StartMargin)
	v.positiveDur("hooks.ready_margin", c.Hooks.ReadyMargin)
	v.positiveDur("hooks.background_max_run", c.Hooks.BackgroundMaxRun)
	v.positiveDur("hooks.log_flush_interval", c.Hooks.LogFlushInterval)
	v.check(c.Hooks.LogBatch >= 1, "hooks.log_batch", c.Hooks.LogBatch, "must be >= 1")
	v.check(c.Hooks.LogLinesPerAttempt >= 1, "hooks.log_lines_per_attempt", c.Hooks.LogLinesPerAttempt, "must be >= 1")
	v.check(c.Hooks.LogLineBytes >= 64, "hooks.log_line_bytes", c.Hooks.LogLineBytes, "must be >= 64 bytes")
	v.check(c.Hooks.ResultFieldBytes >= 64, "hooks.result_field_bytes", c.Hooks.ResultFieldBytes, "must be >= 64 bytes")
	v.check(c.Hooks.ResponsesPerAttempt >= 1, "hooks.responses_per_attempt", c.Hooks.ResponsesPerAttempt, "must be >= 1")
	for i, p := range c.Hooks.PassEnv {
		if err := hookenv.CheckPattern(p); err != nil {
			v.check(false, fmt.Sprintf("hooks.pass_env[%d]", i), fmt.Sprintf("%q", p), err.Error())
		}
	}
	for i, r := range c.Fetch.Deny {
		if _, err := netpolicy.ParseRule(r); err != nil {
			v.check(false, fmt.Sprintf("fetch.deny[%d]", i), fmt.Sprintf("%q", r), err.Error())
		}
	}
	v.hookLimits("hooks.limits", c.Hooks.Limits)
	v.retryLater("hooks.retry_later", c.Hooks.RetryLater)
	for _, name := range sortedKeys(c.Hooks.RetryLaterPlugins) {
		v.retryLater("hooks.retry_later_plugins."+name, c.Hooks.RetryLaterPlugins[name])
	}

	v.retry("retry", c.Retry.RetryPolicy, false)
	for _, name := range sortedKeys(c.Retry.Plugins) {
		v.retry("retry.plugins."+name, c.Retry.Plugins[name], true)
	}

	v.check(c.Job.Concurrency >= 0, "job.concurrency", c.Job.Concurrency, "must be >= 0 (0 pauses a job)")
	for i, s := range c.Job.SequentialSteps {
		v.check(s >= 0 && s <= 9, fmt.Sprintf("job.sequential_steps[%d]", i), s, "must be a step from 0 to 9")
	}
	v.check(c.Job.DelayMin >= 0, "job.delay_min", c.Job.DelayMin, "must be >= 0")
	v.check(c.Job.DelayMax >= c.Job.DelayMin, "job.delay_max", c.Job.DelayMax, "must be >= job.delay_min")
	v.oneOf("job.fetch_depth", c.Job.FetchDepth, model.FetchDepths...)
	v.positiveDur("job.max_duration", c.Job.MaxDuration)
	v.check(c.Job.StepAttributeDelay >= 0, "job.step_attribute_delay", c.Job.StepAttributeDelay, "must be >= 0 (0 = show every step at once)")
	v.nonEmpty("job.task_queue", c.Job.TaskQueue)
	v.check(c.Job.HostTimeout >= c.Hooks.HeartbeatTimeout, "job.host_timeout", c.Job.HostTimeout, "must be >= hooks.heartbeat_timeout")
	v.check(c.Job.MaxClaims >= 1, "job.max_claims", c.Job.MaxClaims, "must be >= 1")

	v.check(len(c.Crawl.PagePlugins) > 0, "crawl.page_plugins", c.Crawl.PagePlugins, "must list at least one plugin")
	for i, p := range c.Crawl.PagePlugins {
		v.check(strings.TrimSpace(p) != "" && !strings.ContainsAny(p, "/\\"), fmt.Sprintf("crawl.page_plugins[%d]", i), fmt.Sprintf("%q", p), "must be a plugin (directory) name")
	}
	v.check(c.Crawl.PageAttempts >= 1 && c.Crawl.PageAttempts <= 100, "crawl.page_attempts", c.Crawl.PageAttempts, "must be 1..100")
	v.positiveDur("crawl.page_timeout", c.Crawl.PageTimeout)
	v.check(c.Crawl.HistoryEvents >= 500 && c.Crawl.HistoryEvents <= 40000, "crawl.history_events", c.Crawl.HistoryEvents, "must be 500..40000 (Temporal's limit is 51,200 events per run)")
	v.check(c.Crawl.BatchPages >= 0 && c.Crawl.BatchPages <= model.MaxConcurrency, "crawl.batch_pages", c.Crawl.BatchPages, fmt.Sprintf("must be 0..%d (0 = every page its own activity)", model.MaxConcurrency))
	v.check(c.Crawl.BatchConcurrency >= 0 && c.Crawl.BatchConcurrency <= model.MaxConcurrency, "crawl.batch_concurrency", c.Crawl.BatchConcurrency, fmt.Sprintf("must be 0..%d (0 = one batch at a time)", model.MaxConcurrency))
	v.check(c.Crawl.BatchPages == 0 || c.Crawl.BatchTime > 0, "crawl.batch_time", c.Crawl.BatchTime, "must be > 0 when crawl.batch_pages is set")
	v.check(c.Crawl.WARCMaxBytes >= 1<<20, "crawl.warc_max_bytes", c.Crawl.WARCMaxBytes, "must be >= 1 MiB")
	v.positiveDur("crawl.attr_interval", c.Crawl.AttrInterval)
	v.positiveDur("crawl.live_interval", c.Crawl.LiveInterval)
	v.check(c.Crawl.WriteTimeout > 0 && c.Crawl.WriteTimeout < c.Crawl.PageTimeout, "crawl.write_timeout", c.Crawl.WriteTimeout, "must be > 0 and < crawl.page_timeout")
	v.check(c.Crawl.MaxLinksPerPage >= 1, "crawl.max_links_per_page", c.Crawl.MaxLinksPerPage, "must be >= 1")
	v.check(c.Crawl.URLList.MaxBytes >= 1, "crawl.url_list.max_bytes", c.Crawl.URLList.MaxBytes, "must be >= 1")
	v.check(c.Crawl.URLList.MaxURLs >= 1, "crawl.url_list.max_urls", c.Crawl.URLList.MaxURLs, "must be >= 1")
	v.check(c.Crawl.URLList.FetchTimeout > 0, "crawl.url_list.fetch_timeout", c.Crawl.URLList.FetchTimeout, "must be > 0")
	v.oneOf("crawl.robots", c.Crawl.Robots, model.RobotsPolicies...)
	v.check(c.Crawl.Sitemaps.MaxBytes >= 1, "crawl.sitemaps.max_bytes", c.Crawl.Sitemaps.MaxBytes, "must be >= 1")
	v.check(c.Crawl.Sitemaps.MaxURLs >= 1, "crawl.sitemaps.max_urls", c.Crawl.Sitemaps.MaxURLs, "must be >= 1")
	v.check(c.Crawl.Sitemaps.MaxFiles >= 1, "crawl.sitemaps.max_files", c.Crawl.Sitemaps.MaxFiles, "must be >= 1")
	v.perHost(c.Crawl.PerHost, c.Crawl.RateLimit)

	v.check(c.Worker.DrainTimeout >= 0, "worker.drain_timeout", c.Worker.DrainTimeout, "must be >= 0")
	v.positiveDur("worker.stats_interval", c.Worker.StatsInterval)
	v.check(c.Worker.PipelineTTL > c.Worker.StatsInterval, "worker.pipeline_ttl", c.Worker.PipelineTTL, "must be > worker.stats_interval")
	c.validateFlapjack(v)
	if _, err := c.Worker.MinFreeDiskBytes(); err != nil {
		v.check(false, "worker.min_free_disk", c.Worker.MinFreeDisk, "must be a size with a unit, e.g. 1GiB or 500MB, or 0 to turn the disk guard off: "+err.Error())
	}

	v.positiveDur("archivebot.poll_interval", c.ArchiveBot.PollInterval)
	v.check(c.ArchiveBot.MaxJobs >= 1, "archivebot.max_jobs", c.ArchiveBot.MaxJobs, "must be >= 1")
	v.check(c.ArchiveBot.ClaimLease >= time.Second, "archivebot.claim_lease", c.ArchiveBot.ClaimLease, "must be >= 1s")
	v.positiveDur("archivebot.watch_interval", c.ArchiveBot.WatchInterval)

	v.nonEmpty("purge.schedule_id", c.Purge.ScheduleID)
	v.positiveDur("purge.interval", c.Purge.Interval)
	v.check(c.Purge.Batch >= 1, "purge.batch", c.Purge.Batch, "must be >= 1")
	v.check(c.Purge.MaxBatches >= 1, "purge.max_batches", c.Purge.MaxBatches, "must be >= 1")
	v.check(c.Purge.KeyBatch >= 1, "purge.key_batch", c.Purge.KeyBatch, "must be >= 1")

	v.pools(c)
	return v.err()
}

type validator struct{ errs []error }

func (v *validator) check(ok bool, key string, value any, rule string) {
	if !ok {
		v.errs = append(v.errs, &FieldError{Key: key, Value: value, Rule: rule})
	}
}

func (v *validator) err() error { return errors.Join(v.errs...) }

func (v *validator) nonEmpty(key, s string) {
	v.check(strings.TrimSpace(s) != "", key, fmt.Sprintf("%q", s), "must not be empty")
}

func (v *validator) oneOf(key, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	v.check(false, key, fmt.Sprintf("%q", s), "must be one of "+strings.Join(allowed, ", "))
}

func (v *validator) hookLimits(prefix string, l HookLimits) {
	if _, err := l.MaxMemoryBytes(); err != nil {
		v.check(false, prefix+".max_memory", l.MaxMemory, "must be a size with a unit, e.g. 512MiB or 2GB, or empty for none: "+err.Error())
	}
	v.check(l.MaxCPUSeconds >= 0 && l.MaxCPUSeconds < float64(math.MaxInt64)/float64(time.Second), prefix+".max_cpu_seconds", l.MaxCPUSeconds, "must be >= 0 seconds (0 = no limit)")
	v.check(l.MaxOpenFiles >= 0, prefix+".max_open_files", l.MaxOpenFiles, "must be >= 0 (0 = no limit)")
	v.check(l.MaxProcesses >= 0, prefix+".max_processes", l.MaxProcesses, "must be >= 0 (0 = no limit)")
	v.check(l.Cgroup == "" || l.Cgroup == "none" || filepath.IsAbs(l.Cgroup), prefix+".cgroup", l.Cgroup, `must be empty (find one), "none" (rlimits only) or an absolute cgroup v2 directory`)
}

// maxRetryLater bounds a list of later-retry delays: each one is a durable
// timer and a new run of the job's workflow.
const maxRetryLater = 20

func (v *validator) retryLater(key string, ds []time.Duration) {
	v.check(len(ds) <= maxRetryLater, key, ds, fmt.Sprintf("must list at most %d delays", maxRetryLater))
	for i, d := range ds {
		v.positiveDur(fmt.Sprintf("%s[%d]", key, i), d)
	}
}

func (v *validator) positiveDur(key string, d time.Duration) {
	v.check(d > 0, key, d, "must be a positive duration such as 500ms, 30s or 2h")
}

func (v *validator) hostPort(key, s string) {
	host, port, err := net.SplitHostPort(s)
	v.check(err == nil && host != "" && port != "", key, fmt.Sprintf("%q", s), "must be host:port")
}

// listenAddr checks an address to listen on: [host]:port, port 0..65535.
func (v *validator) listenAddr(key, s string) {
	_, port, err := net.SplitHostPort(s)
	n, perr := strconv.Atoi(port)
	v.check(err == nil && perr == nil && n >= 0 && n <= 65535, key, fmt.Sprintf("%q", s),
		"must be host:port or :port (port 0..65535; no host = loopback)")
}

func (v *validator) httpURL(key, s string) {
	u, err := url.Parse(s)
	v.check(err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "", key, fmt.Sprintf("%q", s), "must be an http(s) URL")
}

func (v *validator) redisURL(key, s string) {
	u, err := url.Parse(s)
	ok := err == nil && ((u.Scheme == "redis" || u.Scheme == "rediss") && u.Host != "" || u.Scheme == "unix" && u.Path != "")
	// Never echo a URL that may carry a password.
	v.check(ok, key, RedactURL(s), "must be redis://[user:password@]host:port[/db], rediss://… for TLS, or unix:///path")
}

func (v *validator) tls(prefix string, t TLS) {
	v.check((t.CertFile == "") == (t.KeyFile == ""), prefix+".cert_file", t.CertFile, "cert_file and key_file must be set together")
}

func (v *validator) retry(prefix string, p RetryPolicy, override bool) {
	if override {
		// Zero fields inherit the default policy.
		v.check(p.InitialInterval >= 0, prefix+".initial_interval", p.InitialInterval, "must be >= 0")
		v.check(p.BackoffCoefficient == 0 || p.BackoffCoefficient >= 1, prefix+".backoff_coefficient", p.BackoffCoefficient, "must be >= 1")
		v.check(p.MaximumInterval >= 0, prefix+".maximum_interval", p.MaximumInterval, "must be >= 0")
		v.check(p.MaximumAttempts >= 0, prefix+".maximum_attempts", p.MaximumAttempts, "must be >= 1")
		return
	}
	v.positiveDur(prefix+".initial_interval", p.InitialInterval)
	v.check(p.BackoffCoefficient >= 1, prefix+".backoff_coefficient", p.BackoffCoefficient, "must be >= 1")
	v.check(p.MaximumInterval >= p.InitialInterval, prefix+".maximum_interval", p.MaximumInterval, "must be >= initial_interval")
	v.check(p.MaximumAttempts >= 1, prefix+".maximum_attempts", p.MaximumAttempts, "must be >= 1")
}

func (v *validator) pools(c *Config) {
	v.check(len(c.Pools) > 0, "pools", len(c.Pools), "must define at least one pool")
	seen := map[string]bool{}
	queues := map[string]bool{}
	for i, p := range c.Pools {
		key := fmt.Sprintf("pools[%d]", i)
		v.check(poolName.MatchString(p.Name), key+".name", fmt.Sprintf("%q", p.Name), "must match "+poolName.String())
		v.check(!seen[p.Name], key+".name", fmt.Sprintf("%q", p.Name), "must be unique")
		seen[p.Name] = true
		v.nonEmpty(key+".task_queue", p.TaskQueue)
		v.check(!strings.Contains(p.TaskQueue, "@"), key+".task_queue", p.TaskQueue, "must not contain '@' (reserved for host-specific queues)")
		queues[p.TaskQueue] = true
		v.check(p.Slots >= 1, key+".slots", p.Slots, "must be >= 1")
		for j, tag := range p.Tags {
			if err := ValidateTag(tag); err != nil {
				v.check(false, fmt.Sprintf("%s.tags[%d]", key, j), fmt.Sprintf("%q", tag), "must be 1..64 characters of A-Z a-z 0-9 . _ -")
			}
		}
		v.check(!strings.Contains(p.TaskQueue, TagSeparator), key+".task_queue", p.TaskQueue, "must not contain '"+TagSeparator+"' (reserved for tag queues)")
		if ab := p.ArchiveBot; ab != nil {
			v.check(!strings.ContainsAny(ab.Nickname, " \t\r\n"), key+".archivebot.nickname", fmt.Sprintf("%q", ab.Nickname), "must not contain whitespace")
		}
	}
	if c.Job.TaskQueue != "" {
		v.check(queues[c.Job.TaskQueue], "job.task_queue", c.Job.TaskQueue, "must be the task_queue of a configured pool")
	}
	if c.Purge.TaskQueue != "" {
		v.check(queues[c.Purge.TaskQueue], "purge.task_queue", c.Purge.TaskQueue, "must be the task_queue of a configured pool (empty: job.task_queue)")
	}
	for i, name := range c.Worker.Pools {
		v.check(seen[name], fmt.Sprintf("worker.pools[%d]", i), fmt.Sprintf("%q", name), "must name a configured pool")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// RedactURL returns s with any password replaced by "xxxxx", for messages.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// perHost checks the host budget and the rate-limit backoff
// (internal/hostbudget).
func (v *validator) perHost(p PerHost, r RateLimit) {
	const maxConc = 1_000_000 // hostbudget.MaxConcurrency
	v.check(p.Concurrency >= 1 && p.Concurrency <= maxConc, "crawl.per_host.concurrency", p.Concurrency, "must be 1..1000000")
	v.check(p.Delay >= 0 && p.Delay <= time.Hour, "crawl.per_host.delay", p.Delay, "must be 0..1h")
	v.check(p.Lease >= time.Second, "crawl.per_host.lease", p.Lease, "must be >= 1s")
	v.check(p.MaxWait >= 0, "crawl.per_host.max_wait", p.MaxWait, "must be >= 0")
	v.check(p.MaxCrawlDelay >= 0 && p.MaxCrawlDelay <= time.Hour, "crawl.per_host.max_crawl_delay", p.MaxCrawlDelay, "must be 0..1h")
	v.check(p.Reuse >= 0 && p.Reuse <= time.Minute, "crawl.per_host.reuse", p.Reuse, "must be 0..1m")
	seen := map[string]bool{}
	for i, h := range p.Hosts {
		key := fmt.Sprintf("crawl.per_host.hosts[%d]", i)
		v.check(h.Host != "" && h.Host == strings.ToLower(h.Host) && !strings.ContainsAny(h.Host, "/: \t"), key+".host", h.Host, "must be a host name in lower case, without port")
		v.check(!seen[h.Host], key+".host", h.Host, "must be listed once")
		seen[h.Host] = true
		v.check(h.Concurrency >= 1 && h.Concurrency <= maxConc, key+".concurrency", h.Concurrency, "must be 1..1000000")
		v.check(h.Delay >= 0 && h.Delay <= time.Hour, key+".delay", h.Delay, "must be 0..1h")
	}
	for i, s := range r.Statuses {
		v.check(s >= 100 && s <= 599, fmt.Sprintf("crawl.rate_limit.statuses[%d]", i), s, "must be an HTTP status 100..599")
	}
	for i, s := range r.RetryAfterStatuses {
		v.check(s >= 100 && s <= 599, fmt.Sprintf("crawl.rate_limit.retry_after_statuses[%d]", i), s, "must be an HTTP status 100..599")
	}
	for i, m := range r.Markers {
		key := fmt.Sprintf("crawl.rate_limit.markers[%d]", i)
		v.check(m.Status >= 100 && m.Status <= 599, key+".status", m.Status, "must be an HTTP status 100..599")
		if m.Body != "" {
			_, err := regexp.Compile(m.Body)
			v.check(err == nil, key+".body", m.Body, fmt.Sprintf("must be an RE2 regular expression: %v", err))
		}
	}
	v.check(r.MaxRetryAfter >= 0, "crawl.rate_limit.max_retry_after", r.MaxRetryAfter, "must be >= 0")
	v.positiveDur("crawl.rate_limit.backoff", r.Backoff)
	v.check(r.MaxBackoff >= r.Backoff, "crawl.rate_limit.max_backoff", r.MaxBackoff, "must be >= crawl.rate_limit.backoff")
	v.check(r.GiveUpAfter > 0, "crawl.rate_limit.give_up_after", r.GiveUpAfter, "must be > 0")
}

// validateFlapjack checks flapjack.*.
func (c *Config) validateFlapjack(v *validator) {
	f := c.Flapjack
	v.check(f.OKAfter >= 1, "flapjack.ok_after", f.OKAfter, "must be >= 1")
	v.check(f.CriticalAfter >= 1, "flapjack.critical_after", f.CriticalAfter, "must be >= 1")
	v.check(f.HistoryCap >= 1, "flapjack.history_cap", f.HistoryCap, "must be >= 1")
	v.check(f.JobTTL >= time.Second, "flapjack.job_ttl", f.JobTTL, "must be >= 1s")
	v.nonEmpty("flapjack.notifications", f.Notifications)
	v.positiveDur("flapjack.maintenance_poll", f.MaintenancePoll)
	if f.Webhook != "" {
		v.webhookURL("flapjack.webhook", f.Webhook, c.Fetch.Deny)
	}
}

// webhookURL checks a URL archiveflow POSTs to: http(s), and not an
// address fetch.deny refuses (a name is decided after DNS, when sending).
func (v *validator) webhookURL(key, s string, deny []string) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.check(false, key, fmt.Sprintf("%q", s), "must be an http(s) URL")
		return
	}
	p, err := netpolicy.Parse(deny)
	if err != nil {
		return // fetch.deny reports its own error
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if u.Port() != "" {
		port, _ = strconv.Atoi(u.Port())
	}
	if a, ok := netpolicy.ParseAddr(u.Hostname()); ok {
		if d := p.CheckAddr(a, port); d.Denied {
			v.check(false, key, fmt.Sprintf("%q", s), "must not be "+d.Reason())
		}
	}
}
