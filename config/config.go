// Package config owns archiveflow's configuration: one typed struct, every
// default in one place (Default), loading from an optional archiveflow.yaml,
// ARCHIVEFLOW_* environment variables and command-line flags (in increasing
// precedence) through viper, and validation that names the key, the value and
// the rule it breaks.
package config

import (
	"net"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/bytesize"
)

// Config is archiveflow's whole configuration.
type Config struct {
	// ArchiveDir holds snapshots/IDENT/ directories.
	ArchiveDir string   `mapstructure:"archive_dir"`
	Log        Log      `mapstructure:"log"`
	Temporal   Temporal `mapstructure:"temporal"`
	Redis      Redis    `mapstructure:"redis"`
	Plugins    Plugins  `mapstructure:"plugins"`
	Hooks      Hooks    `mapstructure:"hooks"`
	Fetch      Fetch    `mapstructure:"fetch"`
	Retry      Retry    `mapstructure:"retry"`
	Job        Job      `mapstructure:"job"`
	Crawl      Crawl    `mapstructure:"crawl"`
	Worker     Worker   `mapstructure:"worker"`
	Pools      []Pool   `mapstructure:"pools"`
	// ArchiveBot times the pools that act as ArchiveBot pipelines
	// (pools[].archivebot).
	ArchiveBot ArchiveBot `mapstructure:"archivebot"`
	Purge      Purge      `mapstructure:"purge"`
	WACZ       WACZ       `mapstructure:"wacz"`
	Metrics    Metrics    `mapstructure:"metrics"`
	// Flapjack configures the fleet's health in Flapjack's layout
	// (internal/fleethealth).
	Flapjack Flapjack `mapstructure:"flapjack"`
}

// Flapjack configures fleet health (internal/fleethealth): host × plugin
// and job × hook checks in Flapjack's Redis layout, maintenances and
// notifications, or a feed to a real Flapjack.
type Flapjack struct {
	// Enabled writes a check from every final hook outcome.
	Enabled bool `mapstructure:"enabled"`
	// Feed pushes every outcome to Flapjack's events queue instead, and
	// leaves the check structures to Flapjack's processor.
	Feed bool `mapstructure:"feed"`
	// OKAfter: a host × plugin check is ok after this many ok outcomes in
	// a row; CriticalAfter: critical after this many hard failures in a
	// row; anything else is warning.
	OKAfter       int `mapstructure:"ok_after"`
	CriticalAfter int `mapstructure:"critical_after"`
	// HistoryCap bounds each check's state changes and notification lists.
	HistoryCap int `mapstructure:"history_cap"`
	// JobTTL is the expiry of a running job's checks (a finished job's
	// take the job's retention; the purge removes them with the job).
	JobTTL time.Duration `mapstructure:"job_ttl"`
	// Notifications is the list notifications are pushed to.
	Notifications string `mapstructure:"notifications"`
	// Webhook, when set, is an http(s) URL each notification is POSTed
	// to (through the fetch policy, with retries).
	Webhook string `mapstructure:"webhook"`
	// MaintenancePoll is how often a worker looks for a maintenance of
	// its host (a host-wide one drains it).
	MaintenancePoll time.Duration `mapstructure:"maintenance_poll"`
}

// WACZ configures the package a job is sealed into (internal/jobwacz):
// its WARCs, a CDXJ index, its pages.
type WACZ struct {
	// Seal writes IDENT.wacz when the job ends, on the host that ends it
	// (a snapshot's directory; a crawl's ARCHIVE_DIR/crawls/IDENT/); false
	// leaves it to `starter export`.
	Seal bool `mapstructure:"seal"`
	// Captures are the plugins whose outputs of a capture's kind (PNG,
	// JPEG, WebP, PDF, HTML, MHTML) are captures of the page: each file is
	// added to the job's WARCs as a resource record (internal/captures).
	Captures []string `mapstructure:"captures"`
	// SealTimeout bounds writing a crawl's WACZ at its seal (the WARCs
	// are copied into it, their index read or built).
	SealTimeout time.Duration `mapstructure:"seal_timeout"`
}

// Metrics configures a worker process's Prometheus endpoint
// (internal/metrics; docs/operations.md lists the metrics).
type Metrics struct {
	// Listen is where the worker serves /metrics: host:port, or :port for
	// loopback (127.0.0.1:port); 0.0.0.0:port serves every interface.
	// Empty = no endpoint.
	Listen string `mapstructure:"listen"`
}

// Addr is the address to listen on: Listen with a missing host made
// loopback; "" when metrics are off. Validate has checked Listen.
func (m Metrics) Addr() string {
	if m.Listen == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(m.Listen)
	if err != nil || host != "" {
		return m.Listen
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// Purge configures removing finished jobs from Redis once their retention
// (redis.retain_*) has passed: a Temporal Schedule the workers create at
// start runs the purge workflow every Interval on TaskQueue.
type Purge struct {
	// Schedule: false = the workers create no Schedule (`starter purge`
	// still runs a purge by hand); an existing one is left as it is.
	Schedule bool `mapstructure:"schedule"`
	// ScheduleID is the Temporal Schedule's ID (one per Temporal namespace
	// and Redis database).
	ScheduleID string `mapstructure:"schedule_id"`
	// Interval between purge runs.
	Interval time.Duration `mapstructure:"interval"`
	// TaskQueue runs the purge workflow: the task queue of a configured
	// pool; empty = job.task_queue (see Config.PurgeQueue).
	TaskQueue string `mapstructure:"task_queue"`
	// Batch is the most jobs one purge activity removes.
	Batch int `mapstructure:"batch"`
	// MaxBatches bounds the activities of one run; what is left waits for
	// the next run.
	MaxBatches int `mapstructure:"max_batches"`
	// KeyBatch is the most keys deleted per Redis round trip (a crawl's
	// frontier may have thousands).
	KeyBatch int `mapstructure:"key_batch"`
}

// Log configures zap.
type Log struct {
	Level  string `mapstructure:"level"`  // debug, info, warn, error
	Format string `mapstructure:"format"` // console or json
}

// TLS configures a TLS client connection.
type TLS struct {
	Enabled            bool   `mapstructure:"enabled"`
	CAFile             string `mapstructure:"ca_file"`
	CertFile           string `mapstructure:"cert_file"`
	KeyFile            string `mapstructure:"key_file"`
	ServerName         string `mapstructure:"server_name"`
	InsecureSkipVerify bool   `mapstructure:"insecure_skip_verify"`
}

// Temporal configures the Temporal client connection.
type Temporal struct {
	HostPort  string `mapstructure:"host_port"`
	Namespace string `mapstructure:"namespace"`
	// APIKey authenticates to Temporal Cloud or a server with API keys. Secret:
	// set it through ARCHIVEFLOW_TEMPORAL_API_KEY, never log it.
	APIKey string `mapstructure:"api_key"`
	TLS    TLS    `mapstructure:"tls"`
	// UIURL is the Web UI base address used in printed links.
	UIURL string `mapstructure:"ui_url"`
	// Compression of gRPC requests to the server: "none", or "gzip" for a
	// server behind a slow link. Payloads are small (no hook output goes
	// through Temporal) and gzip costs CPU on both ends of every call.
	Compression string `mapstructure:"compression"`
}

// Redis configures the Redis connection and the layout's limits.
type Redis struct {
	// URL is redis://[user:password@]host:port/db or rediss:// for TLS.
	URL string `mapstructure:"url"`
	// Password overrides the URL's password (secret: prefer the env var).
	Password     string        `mapstructure:"password"`
	Namespace    string        `mapstructure:"namespace"`
	TLS          TLS           `mapstructure:"tls"`
	DialTimeout  time.Duration `mapstructure:"dial_timeout"`
	ReadTimeout  time.Duration `mapstructure:"read_timeout"`
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
	MaxRetries   int           `mapstructure:"max_retries"`
	MinBackoff   time.Duration `mapstructure:"min_retry_backoff"`
	MaxBackoff   time.Duration `mapstructure:"max_retry_backoff"`
	// LogCap is the most entries kept in one job's IDENT_log (oldest trimmed).
	LogCap int `mapstructure:"log_cap"`
	// PacketCap is the largest log packet message in bytes (longer is truncated).
	PacketCap int `mapstructure:"packet_cap"`
	// Retention of finished jobs' keys, per final state.
	RetainCompleted time.Duration `mapstructure:"retain_completed"`
	RetainAborted   time.Duration `mapstructure:"retain_aborted"`
	RetainFailed    time.Duration `mapstructure:"retain_failed"`
	// EventsTTL is how long an hourly events_archive list lives after its last event.
	EventsTTL time.Duration `mapstructure:"events_ttl"`
	// PageEvents is which crawl page hook results go into events_archive:
	// "problems" (warning and critical: noresults, failed) or "all"; every
	// one is counted in event_counters either way. A page's events cost
	// about 400 bytes each for EventsTTL: a fast crawl's ok results would
	// be most of its Redis memory.
	PageEvents string `mapstructure:"page_events"`
	// LogBatchWindow is how many recent job log batch ids are remembered per
	// job, so a repeated log write is not appended twice.
	LogBatchWindow int `mapstructure:"log_batch_window"`
	// ResponseCounters: true = archiveflow writes r1xx..r5xx, runk and
	// error_count; false = ArchiveBot's log analyzer owns them.
	ResponseCounters bool `mapstructure:"response_counters"`
}

// Plugins configures hook discovery and plugin config values.
type Plugins struct {
	// Builtin puts the built-in plugin set, embedded in the binary and
	// written to ARCHIVE_DIR/plugins/builtin-HASH/ at worker start, first
	// among the plugin roots; false leaves it out.
	Builtin bool `mapstructure:"builtin"`
	// Dirs are further plugin roots, searched in order after the built-in
	// set; a later root's plugin of the same name overrides an earlier one
	// (a built-in one included). Each must exist when a worker starts.
	Dirs []string `mapstructure:"dirs"`
	// Values are plugin config keys (e.g. WGET_TIMEOUT) set in the config
	// file; they rank below job overrides and the process environment.
	Values map[string]any `mapstructure:"values"`
}

// Hooks configures how hooks are run.
type Hooks struct {
	Timeout time.Duration `mapstructure:"timeout"` // default TIMEOUT for foreground hooks
	Grace   time.Duration `mapstructure:"grace"`   // SIGTERM → SIGKILL
	// LineCap is the longest stdout JSON line kept, in bytes.
	LineCap int `mapstructure:"line_cap"`
	// HeartbeatInterval is how often a running hook activity heartbeats.
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	// HeartbeatTimeout is how long Temporal waits for a heartbeat before it
	// declares the worker dead and retries the hook elsewhere.
	HeartbeatTimeout time.Duration `mapstructure:"heartbeat_timeout"`
	// Limits are every hook's default resource limits; a plugin overrides
	// each with <PLUGIN>_MAX_MEMORY, _MAX_CPU_SECONDS, _MAX_OPEN_FILES,
	// _MAX_PROCESSES (docs/hooks.md "Resource limits").
	Limits HookLimits `mapstructure:"limits"`
	// JobHeartbeatInterval is how often a running hook pulses the job's
	// ArchiveBot heartbeat field in Redis.
	JobHeartbeatInterval time.Duration `mapstructure:"job_heartbeat_interval"`
	// SettingsPollInterval is how often a host-steps segment (job.host_steps)
	// asks its workflow for the job's current settings while it has hooks
	// left to start: a concurrency change or a pause reaches a running
	// segment within about this long. Each read is one status query.
	SettingsPollInterval time.Duration `mapstructure:"settings_poll_interval"`
	// StartMargin is added to a foreground hook's timeout and grace to give
	// its activity attempt a StartToClose timeout.
	StartMargin time.Duration `mapstructure:"start_margin"`
	// ReadyMargin is added to a background hook's timeout to bound how long
	// the hooks after it wait for it to be ready (its first line of stdout)
	// before they are launched anyway (abx-dl waits the timeout + 30 s).
	ReadyMargin time.Duration `mapstructure:"ready_margin"`
	// BackgroundMaxRun bounds how long a background hook may run before the
	// seal stops it.
	BackgroundMaxRun time.Duration `mapstructure:"background_max_run"`
	// RetryLater are the delays of a hook's later retries (the ArchiveBox
	// plan's retry_at): a foreground hook whose attempts all failed
	// transiently waits the first delay, unattended, then runs again with
	// its retry policy's attempts, and so on down the list; after the last
	// it is failed for good. Empty (the default): no later retry. A crawl
	// page whose attempts (crawl.page_attempts) all ended transiently
	// waits these delays the same way (docs/crawls.md).
	RetryLater []time.Duration `mapstructure:"retry_later"`
	// RetryLaterPlugins overrides RetryLater per plugin name (an empty
	// list turns later retries off for that plugin).
	RetryLaterPlugins map[string][]time.Duration `mapstructure:"retry_later_plugins"`
	// LogFlushInterval and LogBatch bound how long and how many of a hook's
	// stderr lines and responses are buffered before a job log write.
	LogFlushInterval time.Duration `mapstructure:"log_flush_interval"`
	LogBatch         int           `mapstructure:"log_batch"`
	// LogLinesPerAttempt caps the job log entries of one hook attempt;
	// LogLineBytes caps one entry.
	LogLinesPerAttempt int `mapstructure:"log_lines_per_attempt"`
	LogLineBytes       int `mapstructure:"log_line_bytes"`
	// ResultFieldBytes caps a result's output_str and output_json: results
	// live in workflow history.
	ResultFieldBytes int `mapstructure:"result_field_bytes"`
	// ResponsesPerAttempt caps the Response records one attempt keeps in
	// memory for the response counters.
	ResponsesPerAttempt int `mapstructure:"responses_per_attempt"`
	// PassEnv names worker environment variables hooks get besides the
	// fixed allowlist (internal/hookenv): exact names, or prefixes ending
	// in * (MY_*). archiveflow's own secrets never pass.
	PassEnv []string `mapstructure:"pass_env"`
}

// Fetch configures where fetches may go.
type Fetch struct {
	// Deny lists the addresses (CIDRs), host names (*.suffix patterns) and
	// optional ports fetches must not reach, decided after DNS resolution
	// (grammar: internal/netpolicy). Empty: no policy, no egress proxy.
	Deny []string `mapstructure:"deny"`
}

// HookLimits are resource limits of one hook; zero values mean no limit.
type HookLimits struct {
	// MaxMemory is a size with a unit (512MiB, 2GB) or bytes; "" = none.
	MaxMemory string `mapstructure:"max_memory"`
	// MaxCPUSeconds is the CPU time of each of the hook's processes.
	MaxCPUSeconds float64 `mapstructure:"max_cpu_seconds"`
	// MaxOpenFiles is the open files of each of the hook's processes.
	MaxOpenFiles int `mapstructure:"max_open_files"`
	// MaxProcesses is the processes (and threads) of the hook together.
	MaxProcesses int `mapstructure:"max_processes"`
	// Cgroup is where per-hook cgroups go: "" finds a place (rlimits when
	// none is writable), "none" uses rlimits only, or an absolute cgroup v2
	// directory delegated to the worker.
	Cgroup string `mapstructure:"cgroup"`
}

// MaxMemoryBytes is MaxMemory in bytes (0 = none).
func (l HookLimits) MaxMemoryBytes() (int64, error) {
	if strings.TrimSpace(l.MaxMemory) == "" {
		return 0, nil
	}
	return bytesize.Parse(l.MaxMemory)
}

// RetryPolicy is an activity retry policy.
type RetryPolicy struct {
	InitialInterval    time.Duration `mapstructure:"initial_interval"`
	BackoffCoefficient float64       `mapstructure:"backoff_coefficient"`
	MaximumInterval    time.Duration `mapstructure:"maximum_interval"`
	MaximumAttempts    int           `mapstructure:"maximum_attempts"`
}

// Retry is the default hook retry policy plus per-plugin overrides.
type Retry struct {
	RetryPolicy `mapstructure:",squash"`
	// Plugins overrides the policy per plugin name (zero fields inherit).
	Plugins map[string]RetryPolicy `mapstructure:"plugins"`
}

// Job holds defaults for newly submitted jobs.
type Job struct {
	Concurrency     int           `mapstructure:"concurrency"`
	SequentialSteps []int         `mapstructure:"sequential_steps"`
	DelayMin        time.Duration `mapstructure:"delay_min"`
	DelayMax        time.Duration `mapstructure:"delay_max"`
	UserAgent       string        `mapstructure:"user_agent"`
	FetchDepth      string        `mapstructure:"fetch_depth"` // shallow or inf
	MaxDuration     time.Duration `mapstructure:"max_duration"`
	TaskQueue       string        `mapstructure:"task_queue"` // default pool queue for submissions
	// HostTimeout is how long a hook may wait for the worker host that
	// claimed its snapshot; past it the host is taken as gone and the
	// snapshot is re-claimed by another worker (from step 0: archives are
	// per host). It bounds the recovery time after a worker dies.
	HostTimeout time.Duration `mapstructure:"host_timeout"`
	// StepAttributeDelay is how long a step (or a non-final state) must
	// last before the ArchiveflowStep and ArchiveflowState search
	// attributes show it; 0 upserts at every change. Each upsert rewrites
	// the workflow's visibility record, which on the embedded SQLite server
	// costs more server CPU than a no-op hook.
	StepAttributeDelay time.Duration `mapstructure:"step_attribute_delay"`
	// MaxClaims is how many times a snapshot may be claimed by a host (the
	// first claim included) before the job fails as lost.
	MaxClaims int `mapstructure:"max_claims"`
	// HostSteps runs consecutive steps without background hooks on the
	// claimed host in one activity (fewer activities and workflow tasks
	// per hook: bulk jobs of short hooks); false, the default, runs every
	// foreground hook as its own activity, named after the hook (the
	// product's contract: operators see each hook in the Web UI). `submit
	// --host-steps` chooses it per job.
	HostSteps bool `mapstructure:"host_steps"`
}

// Crawl configures crawl jobs (submit --depth inf or N): every page after
// the start URL runs the page plugin set in one activity (docs/crawls.md).
type Crawl struct {
	// PagePlugins are the plugins every page but the start URL runs, in
	// their step order (the start URL gets every plugin). They run even
	// when their <PLUGIN>_ENABLED is off for snapshots.
	PagePlugins []string `mapstructure:"page_plugins"`
	// PageAttempts is how many attempts a page gets: a page whose fetch
	// fails transiently (5xx, network error, worker lost) is claimed again
	// later, at the back of its depth.
	PageAttempts int `mapstructure:"page_attempts"`
	// PageTimeout bounds one page attempt (all its hooks).
	PageTimeout time.Duration `mapstructure:"page_timeout"`
	// HistoryEvents is the workflow history length at which a crawl stops
	// launching pages, drains and continues as new (Temporal's limit is
	// 51,200 events; the target is under ~10,000 per run).
	HistoryEvents int `mapstructure:"history_events"`
	// BatchPages is how many pages a crawl claims and runs in one page
	// batch activity at most (at least the job's concurrency); 0 runs
	// every page as its own activity (issue 26: before batches).
	BatchPages int `mapstructure:"batch_pages"`
	// BatchTime is how long a page batch starts pages; then its pages
	// not started are released and the next batch is claimed.
	BatchTime time.Duration `mapstructure:"batch_time"`
	// BatchConcurrency is how many of a crawl's pages one batch runs at
	// once at most: a crawl whose concurrency is higher runs several
	// batches at once, each with its share of the concurrency, on any of
	// the pool's workers. 0 runs one batch at a time with all of it.
	BatchConcurrency int `mapstructure:"batch_concurrency"`
	// WARCMaxBytes rotates a host's job WARC file past this size.
	WARCMaxBytes int64 `mapstructure:"warc_max_bytes"`
	// AttrInterval is how often at most the pages done/queued search
	// attributes are rewritten.
	AttrInterval time.Duration `mapstructure:"attr_interval"`
	// LiveInterval is how long a host keeps a job's ignores and rules
	// before reading them from Redis again.
	LiveInterval time.Duration `mapstructure:"live_interval"`
	// MaxLinksPerPage caps the links one page attempt may add.
	MaxLinksPerPage int `mapstructure:"max_links_per_page"`
	// WriteTimeout is how long a page keeps retrying its Redis writes
	// (Redis down delays a page; past it the page attempt is run again).
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
	// InProcessBuiltins runs the built-in page hooks that start no
	// process (pagefetch, title, outlinks, ...) inside the worker instead
	// of starting the worker binary for each (same contract, ~30 ms of CPU
	// less per hook).
	InProcessBuiltins bool       `mapstructure:"in_process_builtins"`
	Scope             CrawlScope `mapstructure:"scope"`
	// URLList bounds a list of start URLs (ArchiveBot's `!a <` / `!ao <`
	// jobs, `starter submit -f FILE`): internal/urllist.
	URLList URLList `mapstructure:"url_list"`
	// Robots is a crawl's robots.txt policy when `submit --robots` is not
	// given: obey (disallowed pages are not fetched) or ignore
	// (ArchiveBot's behaviour; ArchiveBot's jobs always ignore).
	Robots string `mapstructure:"robots"`
	// Sitemaps bounds what `submit --sitemaps` reads (internal/sitemap).
	Sitemaps Sitemaps `mapstructure:"sitemaps"`
	// PerHost is each target host's politeness budget, shared by every
	// worker process and job through Redis (internal/hostbudget).
	PerHost PerHost `mapstructure:"per_host"`
	// RateLimit says which answers back a host off, and how.
	RateLimit RateLimit `mapstructure:"rate_limit"`
}

// Sitemaps bounds a crawl's sitemaps.
type Sitemaps struct {
	// MaxBytes is the most one sitemap file may hold, decompressed.
	MaxBytes int64 `mapstructure:"max_bytes"`
	// MaxURLs is the most page URLs taken from a crawl's sitemaps.
	MaxURLs int `mapstructure:"max_urls"`
	// MaxFiles is the most sitemap files (indexes included) read.
	MaxFiles int `mapstructure:"max_files"`
}

// PerHost is the per-target-host budget of the in-process fetchers
// (pagefetch: pages and requisites) and of the crawl's claims.
type PerHost struct {
	// Enabled applies the budget and the rate-limit backoff; false
	// turns both off (no Redis call per fetch).
	Enabled bool `mapstructure:"enabled"`
	// Concurrency is the most fetches in flight per host, fleet-wide.
	Concurrency int `mapstructure:"concurrency"`
	// Delay is the least time between two fetch starts on a host.
	Delay time.Duration `mapstructure:"delay"`
	// Hosts are per-host overrides; `starter set IDENT
	// host:HOST=concurrency:N,delay:D` sets live ones, which win.
	Hosts []HostLimits `mapstructure:"hosts"`
	// Lease is how long a fetch's slot outlives a killed worker.
	Lease time.Duration `mapstructure:"lease"`
	// MaxWait is how long a fetch waits for its host's turn before its
	// page is postponed (READY again later, its attempt kept).
	MaxWait time.Duration `mapstructure:"max_wait"`
	// MaxCrawlDelay caps the Crawl-delay a robots.txt asks for (read by a
	// crawl with --robots obey), which then is the host's least delay for
	// every worker and job; 0 ignores Crawl-delay.
	MaxCrawlDelay time.Duration `mapstructure:"max_crawl_delay"`
	// Reuse: a worker process keeps the turn of a fetch on a host without
	// delay and reuses it for its next fetch of the host without a Redis
	// round trip, asking Redis again once this long after its last grant
	// (changed limits, a backoff or a waiting worker apply within it);
	// 0 asks Redis on every fetch.
	Reuse time.Duration `mapstructure:"reuse"`
}

// HostLimits are one host's politeness limits.
type HostLimits struct {
	Host        string        `mapstructure:"host"`
	Concurrency int           `mapstructure:"concurrency"`
	Delay       time.Duration `mapstructure:"delay"`
}

// RateLimit configures the rate-limit backoff of a host.
type RateLimit struct {
	// Statuses back a host off whatever the body (429).
	Statuses []int `mapstructure:"statuses"`
	// RetryAfterStatuses back a host off when the answer carries a
	// Retry-After (503); without one such an answer is the page's error,
	// retried as any other (a broken page must not hold its host).
	RetryAfterStatuses []int `mapstructure:"retry_after_statuses"`
	// Markers are further rate-limit answers: a status and, optionally,
	// an RE2 regular expression the body must match.
	Markers []RateLimitMarker `mapstructure:"markers"`
	// MaxRetryAfter caps an answer's Retry-After.
	MaxRetryAfter time.Duration `mapstructure:"max_retry_after"`
	// Backoff is the first wait without Retry-After, doubled by each
	// further rate limit in a row up to MaxBackoff.
	Backoff    time.Duration `mapstructure:"backoff"`
	MaxBackoff time.Duration `mapstructure:"max_backoff"`
	// GiveUpAfter: a host rate-limited this long in a row fails its pages.
	GiveUpAfter time.Duration `mapstructure:"give_up_after"`
}

// RateLimitMarker is one configured rate-limit answer.
type RateLimitMarker struct {
	Status int    `mapstructure:"status"`
	Body   string `mapstructure:"body"`
}

// URLList bounds a list of URLs (internal/urllist) and its download.
type URLList struct {
	// MaxBytes is the largest list read or downloaded.
	MaxBytes int64 `mapstructure:"max_bytes"`
	// MaxURLs is the most URLs one list may name.
	MaxURLs int `mapstructure:"max_urls"`
	// FetchTimeout bounds one download of a job's list.
	FetchTimeout time.Duration `mapstructure:"fetch_timeout"`
}

// CrawlScope is a crawl's URL scope (internal/scope).
type CrawlScope struct {
	Subdomains  bool `mapstructure:"subdomains"`
	PathPrefix  bool `mapstructure:"path_prefix"`
	OffsiteOnce bool `mapstructure:"offsite_once"`
}

// Worker configures a worker process.
type Worker struct {
	Nickname      string        `mapstructure:"nickname"`
	DrainTimeout  time.Duration `mapstructure:"drain_timeout"`
	StatsInterval time.Duration `mapstructure:"stats_interval"`
	PipelineTTL   time.Duration `mapstructure:"pipeline_ttl"`
	// Pools lists the pool names this process serves; empty = all pools.
	Pools []string `mapstructure:"pools"`
	// MinFreeDisk is the disk guard (internal/diskguard): a size with a
	// unit (1GiB, 500MB); while the archive dir's filesystem has less
	// free, the worker claims no work. "0" = off.
	MinFreeDisk string `mapstructure:"min_free_disk"`
}

// MinFreeDiskBytes is MinFreeDisk in bytes (0 = the guard is off).
func (w Worker) MinFreeDiskBytes() (int64, error) {
	return bytesize.Parse(w.MinFreeDisk)
}

// Pool is a set of workers polling one task queue.
type Pool struct {
	Name      string `mapstructure:"name" json:"name"`
	TaskQueue string `mapstructure:"task_queue" json:"task_queue"`
	// Slots bounds concurrently running hook activities per worker process.
	Slots int `mapstructure:"slots" json:"slots"`
	// ArchiveBot, when set, makes the pool an ArchiveBot pipeline: its
	// workers claim the jobs ArchiveBot's bot queues (internal/abpipeline).
	ArchiveBot *ArchiveBotPool `mapstructure:"archivebot" json:"archivebot,omitempty"`
	// Tags are mnbot's pipeline tags: a job submitted with a tag (submit
	// --tag) runs only on workers of a pool with that tag (workers --tag
	// adds to them). Each tag is a task queue of its own (QueueFor).
	Tags []string `mapstructure:"tags" json:"tags,omitempty"`
	// MatchOnly makes the pool's workers take only jobs tagged with one of
	// its tags; without it they also take untagged jobs, sharing the
	// pool's slots between both.
	MatchOnly bool `mapstructure:"match_only" json:"match_only,omitempty"`
}

// TagSeparator joins a pool's task queue and a tag into the tag's queue.
const TagSeparator = "#"

// QueueFor is the task queue of the pool's jobs tagged tag: the pool's
// task queue for an untagged job (tag ""), else TASK_QUEUE#TAG.
func (p Pool) QueueFor(tag string) string {
	if tag == "" {
		return p.TaskQueue
	}
	return p.TaskQueue + TagSeparator + tag
}

// ArchiveBotPool is what ArchiveBot's pipeline.py takes from its
// environment: the nickname (named queues pending:NAME are served when
// NAME is part of it), AO_ONLY and LARGE.
type ArchiveBotPool struct {
	// Nickname matches named queues; empty = worker.nickname, else the
	// host name.
	Nickname string `mapstructure:"nickname" json:"nickname,omitempty"`
	// AOOnly serves only !ao jobs (pending-ao), plus pending-large when
	// Large is set too.
	AOOnly bool `mapstructure:"ao_only" json:"ao_only,omitempty"`
	// Large also serves pending-large (jobs queued with --large).
	Large bool `mapstructure:"large" json:"large,omitempty"`
}

// ArchiveBot times claiming and obeying ArchiveBot's bot.
type ArchiveBot struct {
	// PollInterval is how often an idle pipeline looks at the queues
	// (ArchiveBot's GetItemFromQueue retries every 5 s).
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// MaxJobs is how many claimed jobs one worker process runs at once
	// per ArchiveBot pool (ArchiveBot's pipelines run one).
	MaxJobs int `mapstructure:"max_jobs"`
	// ClaimLease is how long a claimed job may stay unstarted; past it any
	// pipeline returns it to its queue unless its workflow runs.
	ClaimLease time.Duration `mapstructure:"claim_lease"`
	// WatchInterval is how often running jobs are checked for the bot's
	// abort_requested and settings_age (a publish on archivebot:job:IDENT
	// triggers a check at once).
	WatchInterval time.Duration `mapstructure:"watch_interval"`
}

// Default returns the configuration used when nothing is set. Every default
// lives here.
func Default() Config {
	return Config{
		ArchiveDir: "./data/archive",
		Log:        Log{Level: "info", Format: "console"},
		Temporal: Temporal{
			HostPort:    "127.0.0.1:7233",
			Namespace:   "default",
			UIURL:       "http://127.0.0.1:8233",
			Compression: "none",
		},
		Redis: Redis{
			URL:              "redis://127.0.0.1:6379/0",
			DialTimeout:      5 * time.Second,
			ReadTimeout:      3 * time.Second,
			WriteTimeout:     3 * time.Second,
			MaxRetries:       3,
			MinBackoff:       8 * time.Millisecond,
			MaxBackoff:       512 * time.Millisecond,
			LogCap:           10000,
			PacketCap:        64 * 1024,
			RetainCompleted:  48 * time.Hour,
			RetainAborted:    5 * time.Second,
			RetainFailed:     48 * time.Hour,
			EventsTTL:        3 * time.Hour,
			PageEvents:       "problems",
			LogBatchWindow:   4096,
			ResponseCounters: true,
		},
		Plugins: Plugins{Builtin: true, Dirs: []string{}},
		WACZ:    WACZ{Seal: true, Captures: []string{"screenshot", "pdf", "dom", "singlefile"}, SealTimeout: 30 * time.Minute},
		Hooks: Hooks{
			Timeout:              60 * time.Second,
			Grace:                15 * time.Second,
			LineCap:              1 << 20,
			HeartbeatInterval:    2 * time.Second,
			HeartbeatTimeout:     15 * time.Second,
			JobHeartbeatInterval: 5 * time.Second,
			SettingsPollInterval: 2 * time.Second,
			StartMargin:          30 * time.Second,
			ReadyMargin:          30 * time.Second,
			BackgroundMaxRun:     24 * time.Hour,
			LogFlushInterval:     time.Second,
			LogBatch:             200,
			LogLinesPerAttempt:   20000,
			LogLineBytes:         4096,
			ResultFieldBytes:     8 << 10,
			ResponsesPerAttempt:  1 << 20,
			PassEnv:              []string{},
		},
		Fetch: Fetch{Deny: []string{
			"169.254.0.0/16",           // IPv4 link-local: AWS, GCP, Azure, OpenStack metadata
			"fe80::/10",                // IPv6 link-local
			"fd00:ec2::254",            // AWS metadata over IPv6
			"100.100.100.200",          // Alibaba Cloud metadata
			"metadata.google.internal", // GCP metadata by name
			"0.0.0.0/8",                // "this host": connecting to 0.0.0.0 reaches loopback
			"::/128",                   // the IPv6 unspecified address, likewise
		}},
		Retry: Retry{RetryPolicy: RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    3,
		}},
		Job: Job{
			Concurrency:     4,
			SequentialSteps: []int{5},
			FetchDepth:      "shallow",
			MaxDuration:     24 * time.Hour,
			TaskQueue:       "archiveflow",
			HostTimeout:     2 * time.Minute,
			// Long enough to skip the steps of a fast snapshot, short
			// enough that a step an operator can watch is shown.
			StepAttributeDelay: 5 * time.Second,
			MaxClaims:          3,
			HostSteps:          false,
		},
		Crawl: Crawl{
			PagePlugins:       []string{"pagefetch", "title", "outlinks"},
			PageAttempts:      3,
			PageTimeout:       5 * time.Minute,
			HistoryEvents:     8000,
			BatchPages:        200,
			BatchTime:         20 * time.Second,
			BatchConcurrency:  4,
			WARCMaxBytes:      1 << 30,
			AttrInterval:      5 * time.Second,
			LiveInterval:      2 * time.Second,
			MaxLinksPerPage:   100_000,
			WriteTimeout:      2 * time.Minute,
			InProcessBuiltins: true,
			Scope:             CrawlScope{OffsiteOnce: true},
			URLList:           URLList{MaxBytes: 8 << 20, MaxURLs: 50_000, FetchTimeout: time.Minute},
			Robots:            "ignore",
			// sitemaps.org's limits for one file (50 MiB, 50,000 URLs),
			// and room for a modest sitemap index.
			Sitemaps: Sitemaps{MaxBytes: 50 << 20, MaxURLs: 100_000, MaxFiles: 50},
			PerHost:  PerHost{Enabled: true, Concurrency: 2, Lease: 15 * time.Second, MaxWait: 10 * time.Second, MaxCrawlDelay: 30 * time.Second, Reuse: time.Second},
			RateLimit: RateLimit{Statuses: []int{429}, RetryAfterStatuses: []int{503}, MaxRetryAfter: 10 * time.Minute,
				Backoff: 5 * time.Second, MaxBackoff: 10 * time.Minute, GiveUpAfter: time.Hour},
		},
		Worker: Worker{
			DrainTimeout:  30 * time.Second,
			StatsInterval: 5 * time.Second,
			PipelineTTL:   30 * time.Second,
			MinFreeDisk:   "1GiB",
		},
		Pools: []Pool{{Name: "default", TaskQueue: "archiveflow", Slots: 8}},
		ArchiveBot: ArchiveBot{
			PollInterval:  5 * time.Second,
			MaxJobs:       1,
			ClaimLease:    time.Minute,
			WatchInterval: 2 * time.Second,
		},
		Flapjack: Flapjack{
			Enabled:         true,
			OKAfter:         1,
			CriticalAfter:   3,
			HistoryCap:      100,
			JobTTL:          7 * 24 * time.Hour,
			Notifications:   "archiveflow:notifications",
			MaintenancePoll: 5 * time.Second,
		},
		Purge: Purge{
			Schedule:   true,
			ScheduleID: "archiveflow-purge",
			Interval:   10 * time.Minute,
			Batch:      100,
			MaxBatches: 50,
			KeyBatch:   500,
		},
	}
}

// RetryLaterFor returns plugin's later-retry delays: its override in
// RetryLaterPlugins, else RetryLater.
func (h Hooks) RetryLaterFor(plugin string) []time.Duration {
	if d, ok := h.RetryLaterPlugins[plugin]; ok {
		return d
	}
	return h.RetryLater
}

// PolicyFor returns the retry policy for plugin: the default with the
// plugin's non-zero overrides applied.
func (r Retry) PolicyFor(plugin string) RetryPolicy {
	p := r.RetryPolicy
	o, ok := r.Plugins[plugin]
	if !ok {
		return p
	}
	if o.InitialInterval > 0 {
		p.InitialInterval = o.InitialInterval
	}
	if o.BackoffCoefficient > 0 {
		p.BackoffCoefficient = o.BackoffCoefficient
	}
	if o.MaximumInterval > 0 {
		p.MaximumInterval = o.MaximumInterval
	}
	if o.MaximumAttempts > 0 {
		p.MaximumAttempts = o.MaximumAttempts
	}
	return p
}

// PurgeQueue is the task queue the purge workflow runs on: purge.task_queue,
// or job.task_queue when that is empty.
func (c *Config) PurgeQueue() string {
	if c.Purge.TaskQueue != "" {
		return c.Purge.TaskQueue
	}
	return c.Job.TaskQueue
}

// Pool returns the pool named name.
func (c *Config) Pool(name string) (Pool, bool) {
	for _, p := range c.Pools {
		if p.Name == name {
			return p, true
		}
	}
	return Pool{}, false
}
