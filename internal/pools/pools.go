// Package pools owns running a process's worker pools: for each configured
// pool it polls the pool's shared Temporal task queue (snapshot and background
// workflows, host claims, Redis writes) and a task queue only this process
// polls (the hooks of the snapshots it claimed, so they run on the host that
// holds their directories). It decides the host's plugin roots (the
// embedded built-in set first, then plugins.dirs), sweeps leftover hook
// processes at start, registers the process as an ArchiveBot pipeline with
// periodic host stats, serves /metrics when configured (internal/metrics),
// and shuts down gracefully: stop polling, let running
// hooks finish within the drain timeout, then cancel them.
package pools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/abpipeline"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/diskguard"
	"github.com/archiveflow/archiveflow/internal/engine"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/hostbudget"
	"github.com/archiveflow/archiveflow/internal/metrics"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/outbox"
	"github.com/archiveflow/archiveflow/internal/pipelinelock"
	"github.com/archiveflow/archiveflow/internal/procs"
	"github.com/archiveflow/archiveflow/internal/purge"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/plugins"
	"github.com/archiveflow/archiveflow/workflows"
)

// Pipelines registers this process in Redis as an ArchiveBot pipeline.
// Register is called once with the served task queues, Refresh every
// stats interval, Unregister on clean exit.
type Pipelines interface {
	Register(ctx context.Context, queues []string) error
	Refresh(ctx context.Context) error
	Unregister(ctx context.Context) error
	// WatchLogOutbox adds the job-log outbox's backlog to every report.
	WatchLogOutbox(o *outbox.Outbox)
	// WatchDiskGuard adds the disk guard's reason (why no work is
	// claimed) to every report.
	WatchDiskGuard(g *diskguard.Guard)
}

// Deps are what the pools of one process share.
type Deps struct {
	Config *config.Config
	Client client.Client
	// Store writes job state, results and logs to Redis; when it also is an
	// activities.HostRegistry (internal/jobstore's is), HostAlive asks it.
	Store activities.Store
	// Crawl is the crawls' frontier and job layout (NewCrawlStore).
	Crawl activities.CrawlStore
	// Pipelines may be nil (no pipeline registration).
	Pipelines Pipelines
	Log       *zap.Logger
	// Env is the worker environment hooks get their allowed part of
	// (internal/hookenv; nil = this process's); the caller adds
	// ARCHIVEFLOW_BIN so built-in hooks find their binary.
	Env []string
	// Instance distinguishes host queues of several processes on one host;
	// default HOSTNAME-PID.
	Instance string
	// PluginDirs are the plugin roots in discovery order, from PluginRoots;
	// nil means Run calls PluginRoots itself.
	PluginDirs []string
	// Hosts is the host budget of crawl pages' fetches (NewHostBudget);
	// nil: none.
	Hosts *hostbudget.Gate
	// Purger, when set, runs the purge workflow's activities on the pools'
	// shared queues, and Run creates the purge Schedule (config
	// purge.schedule) once the workers are polling.
	Purger activities.Purger
	// Lookup, when set, resolves the host names of every fetch decision
	// (the fetch proxies, in-process built-ins, crawl scope) instead of
	// the system resolver: tests give a name the address they need.
	Lookup netpolicy.Lookup
	// DiskFree reads the archive dir's free space for the disk guard
	// (worker.min_free_disk); nil = rkeys.DiskAvailable. Tests inject one.
	DiskFree diskguard.FreeFunc
	// Lock is this process's claim lock (starter lock); nil: none.
	Lock *pipelinelock.Watcher
	// Health, when set, is the fleet's health: a host-wide maintenance of
	// Nickname drains this worker (the disk guard holds it), a plugin's
	// maintenance skips that plugin's hooks here.
	Health   *fleethealth.Health
	Nickname string
}

// BuiltinDir is where a worker host materialises the built-in plugin set,
// inside the archive dir that holds the host's other state (snapshots,
// outbox): ARCHIVE_DIR/plugins/builtin-HASH/.
func BuiltinDir(archiveDir string) string {
	return filepath.Join(archiveDir, "plugins")
}

// PluginRoots returns this worker host's plugin roots in discovery order:
// the built-in set (config plugins.builtin; materialised under
// BuiltinDir) first, then plugins.dirs in their order, so a later root's
// plugin overrides an earlier one of the same name, a built-in one
// included. A configured root that is missing or not a directory is a
// *config.FieldError naming it: the worker must not start.
func PluginRoots(cfg *config.Config) ([]string, error) {
	var roots []string
	var errs []error
	for i, d := range cfg.Plugins.Dirs {
		abs, err := filepath.Abs(d)
		if err == nil {
			err = hooks.CheckRoot(abs)
		}
		if err != nil {
			errs = append(errs, &config.FieldError{Key: fmt.Sprintf("plugins.dirs[%d]", i), Value: d,
				Rule: "must be an existing plugin root directory (" + err.Error() + ")"})
			continue
		}
		roots = append(roots, abs)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !cfg.Plugins.Builtin {
		return roots, nil
	}
	archiveDir, err := filepath.Abs(cfg.ArchiveDir)
	if err != nil {
		return nil, fmt.Errorf("archive dir %s: %w", cfg.ArchiveDir, err)
	}
	builtin, err := plugins.Materialise(BuiltinDir(archiveDir))
	if err != nil {
		return nil, err
	}
	return append([]string{builtin}, roots...), nil
}

// Tags are the tags pool p's workers serve: its configured tags and, for
// an ArchiveBot pipeline, the tag of the jobs it claims from named queues
// (abpipeline.NamedTag).
func Tags(cfg *config.Config, p config.Pool) []string {
	tags := slices.Clone(p.Tags)
	if t := abpipeline.NamedTag(cfg, p); t != "" && !slices.Contains(tags, t) {
		tags = append(tags, t)
	}
	return tags
}

// Select returns the configured pools named by names (all when empty).
func Select(cfg *config.Config, names []string) ([]config.Pool, error) {
	if len(names) == 0 {
		return cfg.Pools, nil
	}
	var out []config.Pool
	for _, n := range names {
		p, ok := cfg.Pool(n)
		if !ok {
			known := make([]string, 0, len(cfg.Pools))
			for _, q := range cfg.Pools {
				known = append(known, q.Name)
			}
			return nil, fmt.Errorf("pool %q: not configured (configured pools: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, p)
	}
	return out, nil
}

// HostQueue is the task queue only this process polls for pool p.
func HostQueue(p config.Pool, instance string) string {
	return p.TaskQueue + "@" + instance
}

// DefaultInstance is HOSTNAME-PID.
func DefaultInstance() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Run serves the named pools (all when empty) until ctx is cancelled, then
// drains and returns. It returns early with an error if a worker cannot start.
func Run(ctx context.Context, d Deps, names []string) error {
	if d.Config == nil || d.Client == nil || d.Store == nil || d.Crawl == nil {
		return errors.New("pools: config, Temporal client, store and crawl store are required")
	}
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	selected, err := Select(d.Config, names)
	if err != nil {
		return err
	}
	instance := d.Instance
	if instance == "" {
		instance = DefaultInstance()
	}
	archiveDir, err := filepath.Abs(d.Config.ArchiveDir)
	if err != nil {
		return fmt.Errorf("archive dir %s: %w", d.Config.ArchiveDir, err)
	}
	for _, top := range archivedir.Tops(archiveDir) {
		if err := os.MkdirAll(top, 0o755); err != nil {
			return fmt.Errorf("create archive dir: %w", err)
		}
	}
	if d.PluginDirs == nil {
		if d.PluginDirs, err = PluginRoots(d.Config); err != nil {
			return err
		}
	}
	log.Info("plugin roots (a later root's plugin overrides an earlier one)", zap.Strings("dirs", d.PluginDirs))
	sweep(archiveDir, d.Config.Hooks.Grace, log)
	logOutbox, stopOutbox, err := startLogOutbox(archiveDir, d.Store, log)
	if err != nil {
		return err
	}
	defer stopOutbox()
	guard, stopGuard, err := startDiskGuard(d, archiveDir, log)
	if err != nil {
		return err
	}
	defer stopGuard()
	gates := claimGates{guard: guard, lock: d.Lock, log: log}
	if d.Lock != nil {
		stopLock := startLock(d.Lock, d.Config.Worker.StatsInterval)
		defer stopLock()
	}
	stopMaint := watchMaintenance(d, guard, log)
	defer stopMaint()
	stopWebhook, err := startWebhook(d, log)
	if err != nil {
		return err
	}
	defer stopWebhook()
	stopMetrics, err := serveMetrics(d, logOutbox, log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	var started []worker.Worker
	var engines []*engine.Engine
	stopAll := func() {
		// Stop every worker at once: each Stop waits up to the drain
		// timeout for its running activities, so stopping them one by one
		// would multiply the drain by the number of workers.
		var wg sync.WaitGroup
		for _, w := range started {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.Stop()
			}()
		}
		wg.Wait()
		// The crawls' setup hooks of this worker end with it.
		cctx, cancel := context.WithTimeout(context.Background(), d.Config.Hooks.Grace+30*time.Second)
		defer cancel()
		for _, e := range engines {
			e.Close(cctx)
		}
		// Politeness turns kept for reuse go back now rather than
		// after crawl.per_host.reuse/2 or their lease.
		d.Hosts.Close()
	}
	var queues []string
	selected = slices.Clone(selected) // tagged below, the configuration's pools untouched
	for i, p := range selected {
		selected[i].Tags = Tags(d.Config, p)
		queues = append(queues, SharedQueues(selected[i])...)
		queues = append(queues, HostQueue(selected[i], instance), PageQueue(selected[i], instance))
	}
	if d.Pipelines != nil {
		d.Pipelines.WatchLogOutbox(logOutbox)
		if guard != nil {
			d.Pipelines.WatchDiskGuard(guard)
			guard.OnChange(func() {
				// Say it now, not at the next refresh.
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := d.Pipelines.Refresh(rctx); err != nil {
					log.Warn("refresh pipeline record after a disk guard change", zap.Error(err))
				}
			})
		}
	}
	// The pipeline record exists before any worker polls: a host running a
	// hook is a live pipeline (HostAlive, starter lock) from its first task.
	stopStats := startPipeline(ctx, d, queues, log)
	for _, p := range selected {
		ws, eng, err := newPoolWorkers(d, p, instance, archiveDir, logOutbox, gates, log)
		if err != nil {
			stopAll()
			stopStats()
			return err
		}
		engines = append(engines, eng)
		for _, w := range ws {
			if err := w.Start(); err != nil {
				stopAll()
				stopStats()
				return fmt.Errorf("start worker for pool %s: %w", p.Name, err)
			}
			started = append(started, w)
		}
		log.Info("serving pool", zap.String("pool", p.Name), zap.Strings("task_queues", SharedQueues(p)),
			zap.String("host_queue", HostQueue(p, instance)), zap.String("page_queue", PageQueue(p, instance)), zap.Int("slots", p.Slots),
			zap.Strings("tags", p.Tags), zap.Bool("match_only", p.MatchOnly))
	}
	ensurePurgeSchedule(ctx, d, log)
	<-ctx.Done()
	log.Info("shutting down: no new work; running hooks get the drain timeout",
		zap.Duration("drain_timeout", d.Config.Worker.DrainTimeout))
	stopAll()
	// Stop returns once the drain timeout has passed and the remaining hook
	// activities were cancelled; their runners are still sending SIGTERM,
	// waiting the grace and sending SIGKILL. Exit only when they are done,
	// so no hook outlives its worker.
	wctx, cancel := context.WithTimeout(context.Background(), d.Config.Hooks.Grace+30*time.Second)
	if n := procs.Wait(wctx); n > 0 {
		log.Warn("hooks still running after their grace; the next worker start sweeps them", zap.Int("hooks", n))
	}
	cancel()
	stopStats()
	sweep(archiveDir, d.Config.Hooks.Grace, log)
	log.Info("worker pools stopped")
	return nil
}

// SharedQueues are the shared task queues pool p's workers poll (mnbot's
// pipeline tags, docs/operations.md): the pool's task queue unless the
// pool is match_only, then one queue per tag (config.Pool.QueueFor), where
// the jobs submitted with that tag run.
func SharedQueues(p config.Pool) []string {
	var qs []string
	if !p.MatchOnly {
		qs = append(qs, p.TaskQueue)
	}
	for _, t := range p.Tags {
		qs = append(qs, p.QueueFor(t))
	}
	return qs
}

// newPoolWorkers builds the pool's workers, each registering only what
// runs on its queue: a worker per shared queue (SharedQueues) runs the
// workflows, the host claim and liveness check and, as local activities,
// the Redis writes (PoolActivities); the host queue's worker runs
// discovery and the hooks (HostActivities); the routed-page queue's
// worker (PageQueue) runs the pages of a crawl locked to this pipeline.
// The shared queues' workers share the pool's activity slots, the
// routed-page queue's has as many of its own; they wait while a gate is
// closed (claimGates: the disk guard, and for the shared queues the claim
// lock: no page, no host claimed); the host queue's work, already
// claimed, runs on.
func newPoolWorkers(d Deps, p config.Pool, instance, archiveDir string, logOutbox *outbox.Outbox, gates claimGates, log *zap.Logger) ([]worker.Worker, *engine.Engine, error) {
	cfg := d.Config
	plog := log.With(zap.String("pool", p.Name))
	ecfg, err := EngineConfig(cfg, d.PluginDirs, archiveDir, d.Env, plog)
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	ecfg.Instance = instance
	ecfg.Hosts = d.Hosts
	ecfg.Maintenance = pluginMaintenance(d, plog)
	ecfg.Host = d.Nickname
	if d.Lookup != nil {
		ecfg.Fetch = ecfg.Fetch.WithLookup(d.Lookup)
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	hosts, _ := d.Store.(activities.HostRegistry)
	poolActs, err := activities.NewPool(d.Store, hosts, eng, HostQueue(p, instance), plog)
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	hostActs, err := activities.NewHost(eng, eng, eng, d.Store, plog, ActivityOptions(cfg, logOutbox))
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	crawlActs, err := activities.NewCrawl(d.Crawl, eng, HostQueue(p, instance), ecfg.Fetch, plog, activities.CrawlOptions{
		HeartbeatInterval: cfg.Hooks.HeartbeatInterval,
		LiveInterval:      cfg.Crawl.LiveInterval,
		WriteTimeout:      cfg.Crawl.WriteTimeout,
		LogLineBytes:      cfg.Hooks.LogLineBytes,
		HostConcurrency:   batchHostConcurrency(cfg),
		HostLimits:        batchHostLimits(cfg),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	opts := WorkerOptions(cfg, p)
	queues := SharedQueues(p)
	if len(queues) == 0 {
		return nil, nil, fmt.Errorf("pool %s: match_only without a tag takes no job: give it pools[].tags or workers --tag", p.Name)
	}
	var purgeActs *activities.PurgeActivities
	if d.Purger != nil {
		if purgeActs, err = activities.NewPurge(d.Purger, plog); err != nil {
			return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
		}
	}
	slots, routed, err := gates.slots(p)
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	var ws []worker.Worker
	for _, q := range queues {
		sharedOpts, err := gates.options(opts, slots)
		if err != nil {
			return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
		}
		shared := worker.New(d.Client, q, sharedOpts)
		workflows.Register(shared)
		shared.RegisterActivity(poolActs)
		shared.RegisterActivity(crawlActs)
		if purgeActs != nil {
			shared.RegisterActivity(purgeActs)
		}
		ws = append(ws, shared)
	}

	host := worker.New(d.Client, HostQueue(p, instance), opts)
	host.RegisterActivity(hostActs)
	host.RegisterActivity(activities.NewCrawlHost(crawlActs))
	// A crawl locked to this process (`starter lock`) runs its pages on
	// the routed-page queue: the shared queues' slots wait while it is
	// locked, the disk guard holds both.
	pageOpts, err := gates.options(opts, routed)
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	pages := worker.New(d.Client, PageQueue(p, instance), pageOpts)
	pages.RegisterActivityWithOptions(crawlActs.RunPage, activity.RegisterOptions{Name: "RunPage"})
	pages.RegisterActivityWithOptions(crawlActs.RunPageBatch, activity.RegisterOptions{Name: "RunPageBatch"})
	return append(ws, host, pages), eng, nil
}

// ensurePurgeSchedule creates (or matches to the configuration) the purge
// Schedule. A failure is logged: the worker serves its pools anyway, and
// the next start tries again.
func ensurePurgeSchedule(ctx context.Context, d Deps, log *zap.Logger) {
	if d.Purger == nil || !d.Config.Purge.Schedule {
		return
	}
	if q := d.Config.PurgeQueue(); !pollsQueue(d.Config.Pools, q) {
		log.Warn("no pool of this worker polls the purge schedule's task queue (every pool is match_only, or purge.task_queue names another queue): purges run only where a pool polls it",
			zap.String("purge.task_queue", q))
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := purge.EnsureSchedule(sctx, d.Client, d.Config, log); err != nil {
		log.Warn("purge schedule not created; finished jobs are purged once a worker creates it (or by starter purge)", zap.Error(err))
	}
}

// pollsQueue reports whether one of pools polls the shared queue q.
func pollsQueue(pools []config.Pool, q string) bool {
	for _, p := range pools {
		if slices.Contains(SharedQueues(p), q) {
			return true
		}
	}
	return false
}

// hookLimits are the worker's default resource limits of every hook
// (config hooks.limits) in the runner's terms.
func hookLimits(l config.HookLimits) (procs.Limits, error) {
	mem, err := l.MaxMemoryBytes()
	if err != nil {
		return procs.Limits{}, fmt.Errorf("hooks.limits.max_memory: %w", err)
	}
	return procs.Limits{
		Memory:    mem,
		CPUTime:   time.Duration(l.MaxCPUSeconds * float64(time.Second)),
		OpenFiles: int64(l.MaxOpenFiles),
		Processes: int64(l.MaxProcesses),
		Cgroup:    l.Cgroup,
	}, nil
}

// WorkerOptions are the Temporal worker options of both queues of pool p.
func WorkerOptions(cfg *config.Config, p config.Pool) worker.Options {
	return worker.Options{
		MaxConcurrentActivityExecutionSize: p.Slots,
		// Stop waits this long for running activities, then cancels their
		// contexts, which makes the runner SIGTERM the hooks: nothing orphaned.
		WorkerStopTimeout: cfg.Worker.DrainTimeout,
		// Send heartbeats at once rather than holding them for 80% of the
		// heartbeat timeout, so cancellation reaches a hook within seconds.
		// The SDK would bound each heartbeat call by this too; the client
		// gives it tclient.HeartbeatCallTimeout instead.
		MaxHeartbeatThrottleInterval: time.Second,
	}
}

// EngineConfig is the hook engine's configuration: the plugin roots (from
// PluginRoots), archive dir, hook settings, the hook environment's
// allowlist additions and the secrets it must never carry, and the fetch
// policy. env is the worker environment (nil = this process's).
func EngineConfig(cfg *config.Config, pluginDirs []string, archiveDir string, env []string, log *zap.Logger) (engine.Config, error) {
	fetch, err := netpolicy.Parse(cfg.Fetch.Deny)
	if err != nil {
		return engine.Config{}, err
	}
	limits, err := hookLimits(cfg.Hooks.Limits)
	if err != nil {
		return engine.Config{}, err
	}
	return engine.Config{
		PluginDirs:  pluginDirs,
		ArchiveDir:  archiveDir,
		File:        cfg.Plugins.Values,
		Env:         env,
		Timeout:     cfg.Hooks.Timeout,
		Grace:       cfg.Hooks.Grace,
		ReadyMargin: cfg.Hooks.ReadyMargin,
		LineCap:     cfg.Hooks.LineCap,
		PassEnv:     cfg.Hooks.PassEnv,
		Secrets:     cfg.Secrets(),
		Fetch:       fetch,
		Limits:      limits,
		// A crawl's pages on this host (config crawl.*).
		WARCMaxBytes:      cfg.Crawl.WARCMaxBytes,
		Captures:          cfg.WACZ.Captures,
		SealWACZ:          cfg.WACZ.Seal,
		InProcessBuiltins: cfg.Crawl.InProcessBuiltins,
		MaxResponses:      cfg.Hooks.ResponsesPerAttempt,
		Log:               log,
	}, nil
}

// ActivityOptions are the hook activities' options from the configuration
// (config hooks.*); logOutbox may be nil.
func ActivityOptions(cfg *config.Config, logOutbox *outbox.Outbox) activities.Options {
	h := cfg.Hooks
	return activities.Options{
		HeartbeatInterval:    h.HeartbeatInterval,
		JobHeartbeatInterval: h.JobHeartbeatInterval,
		SettingsPollInterval: h.SettingsPollInterval,
		LogFlushInterval:     h.LogFlushInterval,
		LogBatch:             h.LogBatch,
		LogLinesPerRun:       h.LogLinesPerAttempt,
		LogLineBytes:         h.LogLineBytes,
		ResultFieldBytes:     h.ResultFieldBytes,
		ResponsesPerRun:      h.ResponsesPerAttempt,
		LogOutbox:            logOutbox,
	}
}

// startLogOutbox opens the process's job-log outbox in ARCHIVE_DIR/outbox
// and delivers from it, including batches an earlier process left there,
// until the returned stop is called. Undelivered batches stay on disk for
// the next start.
func startLogOutbox(archiveDir string, store activities.Store, log *zap.Logger) (*outbox.Outbox, func(), error) {
	ob, err := outbox.Open(filepath.Join(archiveDir, "outbox"), activities.LogDelivery(store), log, outbox.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("job log outbox: %w", err)
	}
	if pending, err := ob.Pending(); err == nil && len(pending) > 0 {
		log.Info("delivering job log batches left by an earlier run", zap.Int("batches", len(pending)), zap.String("outbox", ob.Dir()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ob.Run(ctx)
	}()
	return ob, func() {
		cancel()
		<-done
		if pending, err := ob.Pending(); err == nil && len(pending) > 0 {
			log.Warn("job log batches not yet delivered; the next worker start delivers them",
				zap.Int("batches", len(pending)), zap.String("outbox", ob.Dir()))
		}
	}, nil
}

// serveMetrics serves /metrics when configured (metrics.listen) and gives
// the metrics their scrape-time sources: the log outbox's backlog and, when
// the crawl store can read them, the running crawls' frontier sizes.
func serveMetrics(d Deps, logOutbox *outbox.Outbox, log *zap.Logger) (stop func(), err error) {
	addr := d.Config.Metrics.Addr()
	if addr == "" {
		return func() {}, nil
	}
	srv, err := metrics.Serve(addr, log)
	if err != nil {
		return nil, err
	}
	unsetBacklog := metrics.SetBacklogSource(func() (metrics.Backlog, error) {
		b, err := logOutbox.Backlog()
		return metrics.Backlog{Pending: b.Pending, Rejected: b.Rejected}, err
	})
	unsetFrontier := func() {}
	if fs, ok := d.Crawl.(interface {
		FrontierSizes(context.Context) (metrics.FrontierSizes, error)
	}); ok {
		unsetFrontier = metrics.SetFrontierSource(fs.FrontierSizes)
	}
	return func() {
		srv.Close()
		unsetBacklog()
		unsetFrontier()
	}, nil
}

// sweep kills hook processes left by a crashed worker on this host:
// snapshots' hooks and crawls' page and setup hooks.
func sweep(archiveDir string, grace time.Duration, log *zap.Logger) {
	for _, top := range archivedir.Tops(archiveDir) {
		rep, err := procs.SweepGrace(top, grace, log)
		if err != nil {
			log.Warn("sweep leftover hook processes", zap.String("dir", top), zap.Error(err))
			continue
		}
		if len(rep.Killed) > 0 || len(rep.Removed) > 0 {
			log.Info("swept leftover hook processes", zap.String("dir", top), zap.Ints("killed", rep.Killed), zap.Int("stale_pid_files", len(rep.Removed)))
		}
	}
}

// startPipeline registers the process and refreshes its record until the
// returned stop function is called, which also unregisters it.
func startPipeline(ctx context.Context, d Deps, queues []string, log *zap.Logger) func() {
	if d.Pipelines == nil {
		return func() {}
	}
	if err := d.Pipelines.Register(ctx, queues); err != nil {
		log.Warn("register pipeline in Redis (will retry on refresh)", zap.Error(err))
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(d.Config.Worker.StatsInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := d.Pipelines.Refresh(context.Background()); err != nil {
					log.Warn("refresh pipeline stats in Redis", zap.Error(err))
				}
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Pipelines.Unregister(uctx); err != nil {
			log.Warn("unregister pipeline from Redis", zap.Error(err))
		}
	}
}

// Serve runs the pools named (all when none) as Run does and, for those
// configured as ArchiveBot pipelines (pools[].archivebot), their
// ArchiveBot claimers (abpipeline.Serve), which stop claiming when ctx
// ends while the pools drain: what a worker process serves, the `workers`
// binary's and `starter dev`'s alike. d.Pipelines must be the
// RedisPipeline NewDeps gives (the claimers name its pipeline).
func Serve(ctx context.Context, d Deps, be *backend.Backend, names []string) error {
	selected, err := Select(d.Config, names)
	if err != nil {
		return err
	}
	rp, ok := d.Pipelines.(*RedisPipeline)
	if !ok {
		return errors.New("pools: Serve needs the Redis pipeline record NewDeps gives")
	}
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	abCtx, stopAB := context.WithCancel(ctx)
	defer stopAB()
	abDone := make(chan error, 1)
	go func() {
		abDone <- abpipeline.Serve(abCtx, d.Config, selected, be.Store, be.Temporal, rp.ID(), log)
	}()
	err = Run(ctx, d, names)
	stopAB()
	return errors.Join(err, <-abDone)
}

// startDiskGuard starts the disk guard of the archive dir (config
// worker.min_free_disk; nil when 0): it measures once before any worker
// polls, then every worker.stats_interval.
func startDiskGuard(d Deps, archiveDir string, log *zap.Logger) (*diskguard.Guard, func(), error) {
	minFree, err := d.Config.Worker.MinFreeDiskBytes()
	if err != nil {
		return nil, nil, fmt.Errorf("worker.min_free_disk: %w", err)
	}
	if minFree == 0 && d.Health == nil {
		return nil, func() {}, nil
	}
	free := d.DiskFree
	if free == nil {
		free = rkeys.DiskAvailable
	}
	g, err := diskguard.New(archiveDir, minFree, free, log)
	if err != nil {
		return nil, nil, err
	}
	if minFree == 0 {
		return g, func() {}, nil // holds only (a maintenance)
	}
	g.Check()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx, d.Config.Worker.StatsInterval)
	}()
	return g, func() { cancel(); <-done }, nil
}

// startLock checks the claim lock once (before any worker polls), then
// every interval, until the returned stop is called.
func startLock(l *pipelinelock.Watcher, interval time.Duration) func() {
	ctx, cancel := context.WithCancel(context.Background())
	l.Check(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx, interval)
	}()
	return func() { cancel(); <-done }
}

// gatedOptions are opts whose activity slots come from slots, the other
// slot counts as opts has them, as a tuner.
func gatedOptions(opts worker.Options, slots worker.SlotSupplier) (worker.Options, error) {
	fixed, err := worker.NewFixedSizeTuner(worker.FixedSizeTunerOptions{
		NumWorkflowSlots:      opts.MaxConcurrentWorkflowTaskExecutionSize,
		NumActivitySlots:      opts.MaxConcurrentActivityExecutionSize,
		NumLocalActivitySlots: opts.MaxConcurrentLocalActivityExecutionSize,
	})
	if err != nil {
		return opts, fmt.Errorf("worker slots: %w", err)
	}
	tuner, err := worker.NewCompositeTuner(worker.CompositeTunerOptions{
		WorkflowSlotSupplier:        fixed.GetWorkflowTaskSlotSupplier(),
		ActivitySlotSupplier:        slots,
		LocalActivitySlotSupplier:   fixed.GetLocalActivitySlotSupplier(),
		NexusSlotSupplier:           fixed.GetNexusSlotSupplier(),
		SessionActivitySlotSupplier: fixed.GetSessionActivitySlotSupplier(),
	})
	if err != nil {
		return opts, fmt.Errorf("worker slots: %w", err)
	}
	opts.MaxConcurrentWorkflowTaskExecutionSize = 0
	opts.MaxConcurrentActivityExecutionSize = 0
	opts.MaxConcurrentLocalActivityExecutionSize = 0
	opts.Tuner = tuner
	return opts, nil
}

// maintenanceHold names the disk guard's hold of a host-wide maintenance.
const maintenanceHold = "maintenance"

// watchMaintenance holds guard while a host-wide maintenance of this host
// (d.Nickname) is in force and releases it when it ends, looking every
// flapjack.maintenance_poll; nothing without fleet health.
func watchMaintenance(d Deps, guard *diskguard.Guard, log *zap.Logger) func() {
	if d.Health == nil || guard == nil || d.Nickname == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	look := func() {
		lctx, stop := context.WithTimeout(ctx, d.Config.Flapjack.MaintenancePoll)
		defer stop()
		m, ok, err := d.Health.Active(lctx, d.Nickname, fleethealth.HostWide)
		switch {
		case err != nil:
			log.Warn("look for a maintenance of this host; keeping the last answer", zap.String("host", d.Nickname), zap.Error(err))
		case ok:
			guard.Hold(maintenanceHold, m.Reason())
		default:
			guard.Release(maintenanceHold)
		}
	}
	look() // before any worker polls
	go func() {
		defer close(done)
		t := time.NewTicker(d.Config.Flapjack.MaintenancePoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				look()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// pluginMaintenance is the engine's question before a hook attempt: the
// maintenance of the plugin on this host in force now ("" when none, or
// when it cannot be read: a hook is not skipped on a reading that failed).
//
// A crawl page's hooks (activities.CrawlPage) take an answer up to
// crawl.live_interval old, as the page takes its crawl's ignores and
// rules: not a round trip per hook of every page.
func pluginMaintenance(d Deps, log *zap.Logger) func(ctx context.Context, plugin string) string {
	if d.Health == nil || d.Nickname == "" {
		return nil
	}
	type answer struct {
		at  time.Time
		why string
	}
	var mu sync.Mutex
	kept := map[string]answer{}
	return func(ctx context.Context, plugin string) string {
		maxAge, page := activities.CrawlPage(ctx)
		if page {
			mu.Lock()
			a, ok := kept[plugin]
			mu.Unlock()
			if ok && time.Since(a.at) < maxAge {
				return a.why
			}
		}
		why := activeMaintenance(ctx, d, log, plugin)
		mu.Lock()
		kept[plugin] = answer{at: time.Now(), why: why}
		mu.Unlock()
		return why
	}
}

// activeMaintenance reads the maintenance of plugin on this host in force
// now (pluginMaintenance).
func activeMaintenance(ctx context.Context, d Deps, log *zap.Logger, plugin string) string {
	m, ok, err := d.Health.Active(ctx, d.Nickname, plugin)
	if err != nil {
		log.Warn("look for a maintenance of the plugin on this host; running the hook", zap.String("plugin", plugin), zap.Error(err))
		return ""
	}
	if !ok || m.Check == fleethealth.HostWide {
		return "" // a host-wide one drains the worker; claimed work runs on
	}
	return m.Reason()
}

// startWebhook runs the fleet health's webhook sender (config
// flapjack.webhook) under the fetch policy until the returned stop.
func startWebhook(d Deps, log *zap.Logger) (func(), error) {
	if d.Health == nil || d.Config.Flapjack.Webhook == "" {
		return func() {}, nil
	}
	policy, err := netpolicy.Parse(d.Config.Fetch.Deny)
	if err != nil {
		return nil, fmt.Errorf("fetch.deny: %w", err)
	}
	if d.Lookup != nil {
		policy = policy.WithLookup(d.Lookup)
	}
	s := d.Health.NewSender(d.Config.Flapjack.Webhook, policy, d.Nickname, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}
