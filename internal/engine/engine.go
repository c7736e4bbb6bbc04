// Package engine owns running hooks on a worker host: discovery, per-attempt
// config resolution, the hook environment (env.go, with the rules of
// internal/hookenv), the attempt's fetch proxy (fetch.go, internal/egress)
// and supervision through internal/procs; and, for crawls, the host side
// of a page (crawl setup hooks once per crawl and host, the page plugin
// set step by step, the job's WARC of this host). Engine is the production
// activities.Discoverer, activities.Runner and activities.PageRunner.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/hookenv"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/hostbudget"
	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/pageindex"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// Config is what an Engine needs; every value comes from the resolved
// configuration (internal/pools builds it).
type Config struct {
	// PluginDirs are searched in order; a later dir's plugin of the same
	// name overrides an earlier one (config plugins.dirs).
	PluginDirs []string
	// ArchiveDir holds snapshots/SNAPSHOT_ID/ directories (config archive_dir).
	ArchiveDir string
	// File is the archiveflow config file's plugin settings, KEY → value
	// (config plugins.values).
	File map[string]any
	// Env is the worker's environment as KEY=VALUE; nil means os.Environ().
	// Hooks get only its allowed part (PassEnv); plugin config keys are
	// resolved from all of it.
	Env []string
	// Timeout is TIMEOUT when no plugin setting says otherwise (config
	// hooks.timeout).
	Timeout time.Duration
	// Grace is the SIGTERM → SIGKILL delay of foreground hooks (config
	// hooks.grace).
	Grace time.Duration
	// ReadyMargin is added to a background hook's timeout to bound how
	// long the hooks after it wait for it to be ready (config
	// hooks.ready_margin).
	ReadyMargin time.Duration
	// LineCap is the longest stdout line a hook may print (config
	// hooks.line_cap).
	LineCap int
	// PassEnv names worker variables hooks get besides hookenv.Allowed
	// (config hooks.pass_env).
	PassEnv []string
	// Secrets are archiveflow's own secrets (config.Secrets): never in a
	// hook's environment, and redacted from what a hook reports and from
	// configuration errors, which go into workflow history.
	Secrets config.Secrets
	// Hosts is the host budget of the crawl pages' in-process fetches
	// (internal/hostbudget); nil: none.
	Hosts *hostbudget.Gate
	// Fetch is the fetch network policy (config fetch.deny); when it
	// denies anything, each attempt fetches through its own egress proxy.
	Fetch *netpolicy.Policy
	// Limits are every hook's resource limits unless its plugin's limit
	// keys say otherwise (config hooks.limits; none by default).
	Limits procs.Limits
	// Instance names this worker process among the hosts of a crawl: its
	// CRAWL_DIR is ARCHIVE_DIR/crawls/IDENT/INSTANCE and its WARC files
	// IDENT-INSTANCE-NNNNN.warc.gz (default: HOSTNAME-PID).
	Instance string
	// Maintenance, when set, says the maintenance of a plugin on this
	// host in force now ("" when none): attempt then skips the hook
	// (internal/fleethealth, wired by internal/pools).
	Maintenance func(ctx context.Context, plugin string) string
	// Host is this worker host's name in the fleet's health (its pipeline
	// nickname), put in every snapshot hook's result (ArchiveResult.Host).
	Host string
	// WARCMaxBytes rotates a crawl's WARC file of this host (config
	// crawl.warc_max_bytes; 0 = never).
	WARCMaxBytes int64
	// Captures are the plugins whose outputs are captures of the page,
	// recorded as resource records (config wacz.captures).
	Captures []string
	// SealWACZ writes a job's WACZ at its seal (config wacz.seal).
	SealWACZ bool
	// InProcessBuiltins runs built-in page hooks that start no process in
	// this process (config crawl.in_process_builtins).
	InProcessBuiltins bool
	// MaxResponses caps the responses one page attempt keeps (config
	// hooks.responses_per_attempt; 0 = no cap).
	MaxResponses int
	Log          *zap.Logger
}

// Engine is the production Discoverer and Runner: discovery and plugin
// configuration from internal/hooks, process supervision from internal/procs.
// Plugin configuration is resolved twice on the worker host, once at
// discovery (enabled flag, timeout, errors go into the plan) and once per
// attempt (the values go into the hook's env), so config values, which may
// be secrets, never enter workflow history.
type Engine struct {
	cfg     Config
	log     *zap.Logger
	warned  sync.Map // plugin + variable already warned about (env.go)
	schemas fileCache[*hooks.Schema]
	crawls  perCrawl[*crawlHost] // the crawls set up on this worker (ensureSetup)
	warcs   warcFiles
	// plans keeps each crawl's page plan on this worker: discovered at its
	// first page here, kept until the crawl ends here.
	plans   perCrawl[activities.Plan]
	indexes pageIndexes
	wenv    workerEnv
}

var (
	_ activities.Discoverer = (*Engine)(nil)
	_ activities.Runner     = (*Engine)(nil)
	_ activities.PageRunner = (*Engine)(nil)
)

// New checks cfg and returns its Engine.
func New(cfg Config) (*Engine, error) {
	switch {
	case len(cfg.PluginDirs) == 0:
		return nil, errors.New("hook engine: plugin dirs must not be empty")
	case cfg.ArchiveDir == "":
		return nil, errors.New("hook engine: archive dir must not be empty")
	case cfg.Timeout <= 0:
		return nil, fmt.Errorf("hook engine: timeout %s: must be > 0", cfg.Timeout)
	case cfg.Grace < 0:
		return nil, fmt.Errorf("hook engine: grace %s: must be >= 0", cfg.Grace)
	case cfg.LineCap <= 0:
		return nil, fmt.Errorf("hook engine: line cap %d: must be > 0", cfg.LineCap)
	}
	for i, p := range cfg.PassEnv {
		if err := hookenv.CheckPattern(p); err != nil {
			return nil, fmt.Errorf("hook engine: pass_env[%d] %q: %w", i, p, err)
		}
	}
	log := cmp.Or(cfg.Log, zap.NewNop())
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	e := &Engine{cfg: cfg, log: log}
	e.crawls.m = map[string]*crawlHost{}
	e.warcs.m = map[string]*jobWARC{}
	e.plans.m = map[string]activities.Plan{}
	e.indexes.m = map[string]*pageindex.Writer{}
	return e, nil
}

// Close ends every crawl this engine set up (their setup hooks get
// SIGTERM) and closes their WARC and page index files; the worker calls it
// when it stops.
func (e *Engine) Close(ctx context.Context) {
	for _, ident := range e.crawls.idents() {
		if err := e.TeardownCrawl(ctx, ident); err != nil {
			e.log.Warn("tear down crawl at worker stop", zap.String("ident", ident), zap.Error(err))
		}
	}
	for _, ident := range e.warcs.idents() {
		if err := e.warcs.close(ident); err != nil {
			e.log.Warn("close job warc", zap.String("ident", ident), zap.Error(err))
		}
	}
	for _, ident := range e.indexes.idents() {
		if err := e.indexes.close(ident); err != nil {
			e.log.Warn("close page index", zap.String("ident", ident), zap.Error(err))
		}
	}
}

// perCrawl is one kind of state of the crawls on this worker, by ident
// (New makes the map).
type perCrawl[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

// get is ident's value; when there is none and create is not nil, the one
// create makes, kept.
func (c *perCrawl[V]) get(ident string, create func() V) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[ident]
	if !ok && create != nil {
		v, ok = create(), true
		c.m[ident] = v
	}
	return v, ok
}

func (c *perCrawl[V]) put(ident string, v V) {
	c.mu.Lock()
	c.m[ident] = v
	c.mu.Unlock()
}

// take removes ident's value and returns it.
func (c *perCrawl[V]) take(ident string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[ident]
	delete(c.m, ident)
	return v, ok
}

func (c *perCrawl[V]) idents() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.m))
}

func (e *Engine) environ() []string {
	if e.cfg.Env != nil {
		return e.cfg.Env
	}
	return os.Environ()
}

// workerEnv is what every hook attempt's spec derives from the worker's
// environment (environ), kept while that is unchanged: a crawl page runs
// a spec per hook, and deriving it each time was ~3 % of the worker's CPU
// per page (BenchmarkWire's profile).
type workerEnv struct {
	mu      sync.Mutex
	environ []string
	vars    map[string]string // environ without an entry revealing a secret (sources)
	hook    []string          // what a hook may get of it (hookenv.Worker)
}

// workerEnv returns the worker's environment's variables without the
// entries revealing a secret, and the entries a hook may get; neither may
// be changed.
func (e *Engine) workerEnv() (map[string]string, []string) {
	environ := e.environ()
	w := &e.wenv
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.vars == nil || !slices.Equal(environ, w.environ) {
		vars := make(map[string]string, len(environ))
		for _, kv := range environ {
			if k, v, ok := strings.Cut(kv, "="); ok && !e.cfg.Secrets.Reveals(k, v) {
				vars[k] = v
			}
		}
		w.environ, w.vars, w.hook = environ, vars, hookenv.Worker(environ, e.cfg.PassEnv)
	}
	return w.vars, w.hook
}

// snapDir is ARCHIVE_DIR/snapshots/SNAPSHOT_ID.
func (e *Engine) snapDir(snapshotID string) (string, error) {
	if snapshotID == "" || snapshotID != filepath.Base(snapshotID) || strings.HasPrefix(snapshotID, ".") {
		return "", fmt.Errorf("snapshot id %q: must be a single path element not starting with a dot", snapshotID)
	}
	return archivedir.Snapshot(e.cfg.ArchiveDir, snapshotID), nil
}

// checkDirs refuses to run a hook in a snapshot or plugin directory that
// is not a real directory: a hook that replaced SNAP_DIR or
// SNAP_DIR/PLUGIN with a symbolic link would otherwise have the next hook
// run (and write its files) wherever the link points. A missing directory
// is fine: the runner creates it.
func checkDirs(dirs ...string) error {
	for _, d := range dirs {
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("snapshot directory %s: %w", d, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(d)
			return fmt.Errorf("snapshot directory %s is a symbolic link (to %s), left by a hook: not followed", d, target)
		case !fi.IsDir():
			return fmt.Errorf("snapshot directory %s is not a directory", d)
		}
	}
	return nil
}

// sources are the config sources of one snapshot. Variables that carry
// one of archiveflow's secrets are not a source: no plugin key, alias or
// {TEMPLATE} can pick them up.
func (e *Engine) sources(overrides map[string]string, base map[string]string) hooks.Sources {
	env, _ := e.workerEnv()
	return hooks.Sources{Job: overrides, Env: env, File: e.cfg.File, Base: base}
}

// Discover finds the hooks and resolves each plugin's enabled flag, timeout
// and configuration error. A single-URL job is a crawl of one page: the
// crawl setup hooks run here, on the snapshot's host, before its step 0.
// Their teardown is the snapshot's seal on this host (Seal; histories
// before InputV2 have none: they end with the worker, Close). A crawl's
// start page (Job.CrawlPage) is torn down by the crawl.
func (e *Engine) Discover(ctx context.Context, in activities.DiscoverInput) (activities.Plan, error) {
	found, err := hooks.Discover(e.cfg.PluginDirs, e.log)
	if errors.Is(err, hooks.ErrInvalidPlugins) {
		// A missing root or a malformed plugin: retrying cannot fix it.
		return activities.Plan{}, fmt.Errorf("discover hooks in %v: %w: %w", e.cfg.PluginDirs, err, activities.ErrConfig)
	}
	if err != nil {
		return activities.Plan{}, fmt.Errorf("discover hooks in %v: %w", e.cfg.PluginDirs, err)
	}
	snapDir, err := e.snapDir(in.SnapshotID)
	if err != nil {
		return activities.Plan{}, fmt.Errorf("discover hooks for %s: %w: %w", in.Ident, err, activities.ErrConfig)
	}
	if in.URL != "" {
		job := activities.Job{Ident: in.Ident, URL: in.URL, SnapshotID: in.SnapshotID, Overrides: in.Overrides}
		if err := e.ensureSetup(ctx, job); err != nil {
			e.log.Warn("crawl setup", zap.String("ident", in.Ident), zap.Error(err))
		}
	}
	return e.plan(found, in.Overrides, snapDir), nil
}

// Run runs one attempt of a snapshot's hook (attempt).
func (e *Engine) Run(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
	snapDir, err := e.snapDir(req.Job.SnapshotID)
	if err != nil {
		return activities.Outcome{}, fmt.Errorf("run hook %s: %w: %w", req.Hook.Key(), err, activities.ErrConfig)
	}
	inv := invocation{job: req.Job, hook: req.Hook, settings: req.Settings, attempt: req.Attempt,
		snapDir: snapDir, crawlDir: e.crawlDir(req.Job.Ident)}
	res, err := e.attempt(ctx, inv, attemptIO{onReady: req.OnReady, onRecord: func(r jsonl.Record) {
		sink.Record()
		if r.Response != nil {
			sink.Response(*r.Response)
		}
	}, onStderr: sink.StderrLine})
	if err != nil {
		return activities.Outcome{}, err
	}
	out := activities.Outcome{Result: res.ArchiveResult(), Transient: res.Transient}
	out.Result.Host = e.cfg.Host
	return out, nil
}

// configError is a plugin configuration error as it may enter workflow
// history: with any secret value it quotes redacted.
func (e *Engine) configError(h activities.HookSpec, err error) error {
	return fmt.Errorf("run hook %s: %s: %w", h.Key(), e.cfg.Secrets.Redact(err.Error()), activities.ErrConfig)
}

// invocation is one hook attempt with where it runs: a snapshot's hook,
// a crawl page's hook or a crawl setup hook.
type invocation struct {
	job           activities.Job
	hook          activities.HookSpec
	settings      model.Settings
	attempt       int
	snapDir       string // SNAP_DIR (a crawl setup hook: its CRAWL_DIR)
	crawlDir      string // CRAWL_DIR
	inProcessOK   bool   // a built-in may run in this process (a crawl page's)
	depth         int    // EXTRA_CONTEXT's depth (a crawl page's depth)
	noSnapshotArg bool   // a crawl setup hook gets --url only (abx-dl)
}

// spec builds the procs.Spec of one attempt: argv, env, cwd, timeouts,
// resource limits and the live callbacks (DESIGN.md §3 Invocation). What
// the hook prints reaches the callbacks with archiveflow's secrets
// redacted. fp is the attempt's fetch proxy (nil: none).
func (e *Engine) spec(inv invocation, onRecord func(jsonl.Record), onStderr func(string), fp *egress.Proxy) (procs.Spec, error) {
	h := inv.hook
	if err := checkDirs(inv.snapDir, filepath.Join(inv.snapDir, h.Plugin)); err != nil {
		return procs.Spec{}, e.configError(h, err)
	}
	schema, err := e.schema(filepath.Join(filepath.Dir(h.Path), hooks.ConfigFile), h.Plugin)
	if err != nil {
		return procs.Spec{}, e.configError(h, err)
	}
	base := map[string]string{"SNAP_DIR": inv.snapDir, "ARCHIVE_DIR": e.cfg.ArchiveDir, "CRAWL_DIR": inv.crawlDir}
	resolved, err := schema.Resolve(e.sources(inv.job.Overrides, base))
	if err != nil {
		return procs.Spec{}, e.configError(h, err)
	}
	timeout := resolved.Timeout(h.Timeout)
	if timeout <= 0 {
		timeout = e.cfg.Timeout
	}
	args := []string{"--url=" + inv.job.URL}
	if !inv.noSnapshotArg {
		args = append(args, "--snapshot-id="+inv.job.SnapshotID)
	}
	spec := procs.Spec{
		Path:       h.Path,
		Args:       append(args, inv.job.ExtraArgs...),
		Env:        e.env(inv, timeout, resolved, e.fetchEnv(fp)),
		Dir:        filepath.Join(inv.snapDir, h.Plugin),
		Stem:       strings.TrimSuffix(h.Name, filepath.Ext(h.Name)),
		Timeout:    timeout,
		Grace:      h.Grace,
		Background: h.Background,
		LineCap:    e.cfg.LineCap,
		SnapshotID: inv.job.SnapshotID,
		Limits:     limits(e.cfg.Limits, resolved.Limits()),
		Log:        e.log,
	}
	if onStderr != nil {
		spec.OnStderr = func(line string) { onStderr(e.cfg.Secrets.Redact(line)) }
	}
	if onRecord != nil {
		spec.OnRecord = func(r jsonl.Record) {
			if r.Response != nil {
				resp := *r.Response
				resp.URL = e.cfg.Secrets.Redact(resp.URL)
				r.Response = &resp
			}
			onRecord(r)
		}
	}
	if h.Background && hooks.HookUntilSeal(h.Name) {
		spec.Timeout = 0
	}
	return spec, nil
}

// limits applies a plugin's limit keys over the worker's defaults.
func limits(def procs.Limits, p hooks.Limits) procs.Limits {
	l := def
	if p.Memory != nil {
		l.Memory = *p.Memory
	}
	if p.CPUTime != nil {
		l.CPUTime = *p.CPUTime
	}
	if p.OpenFiles != nil {
		l.OpenFiles = *p.OpenFiles
	}
	if p.Processes != nil {
		l.Processes = *p.Processes
	}
	return l
}
