// Package engine owns running hooks on a worker host: discovery, per-attempt
// config resolution, the hook environment (env.go, with the rules of
// internal/hookenv), the attempt's fetch proxy (fetch.go, internal/egress)
// and supervision through internal/procs. Engine is the production
// activities.Discoverer and activities.Runner.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/hookenv"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
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
	// Fetch is the fetch network policy (config fetch.deny); when it
	// denies anything, each attempt fetches through its own egress proxy.
	Fetch *netpolicy.Policy
	// Limits are every hook's resource limits unless its plugin's limit
	// keys say otherwise (config hooks.limits; none by default).
	Limits procs.Limits
	Log    *zap.Logger
}

// Engine is the production Discoverer and Runner: discovery and plugin
// configuration from internal/hooks, process supervision from internal/procs.
// Plugin configuration is resolved twice on the worker host, once at
// discovery (enabled flag, timeout, errors go into the plan) and once per
// attempt (the values go into the hook's env), so config values, which may
// be secrets, never enter workflow history.
type Engine struct {
	cfg    Config
	log    *zap.Logger
	warned sync.Map // plugin + variable already warned about (env.go)
}

var (
	_ activities.Discoverer = (*Engine)(nil)
	_ activities.Runner     = (*Engine)(nil)
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
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Engine{cfg: cfg, log: log}, nil
}

func (e *Engine) environ() []string {
	if e.cfg.Env != nil {
		return e.cfg.Env
	}
	return os.Environ()
}

// snapDir is ARCHIVE_DIR/snapshots/SNAPSHOT_ID.
func (e *Engine) snapDir(snapshotID string) (string, error) {
	if snapshotID == "" || snapshotID != filepath.Base(snapshotID) || strings.HasPrefix(snapshotID, ".") {
		return "", fmt.Errorf("snapshot id %q: must be a single path element not starting with a dot", snapshotID)
	}
	return filepath.Join(e.cfg.ArchiveDir, "snapshots", snapshotID), nil
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
	env := map[string]string{}
	for _, kv := range e.environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && !e.cfg.Secrets.Reveals(k, v) {
			env[k] = v
		}
	}
	return hooks.Sources{Job: overrides, Env: env, File: e.cfg.File, Base: base}
}

// Discover finds the hooks and resolves each plugin's enabled flag, timeout
// and configuration error.
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
	base := map[string]string{"SNAP_DIR": snapDir, "ARCHIVE_DIR": e.cfg.ArchiveDir}
	src := e.sources(in.Overrides, base)
	resolved := map[string]*hooks.Resolved{}
	configErr := map[string]string{}
	for _, plugin := range found.Plugins() {
		r, err := found.Schema(plugin).Resolve(src)
		if err != nil {
			configErr[plugin] = e.cfg.Secrets.Redact(err.Error())
			continue
		}
		resolved[plugin] = r
	}
	plan := activities.Plan{Hooks: make([]activities.HookSpec, 0, len(found.Hooks))}
	for _, h := range found.Hooks {
		spec := activities.HookSpec{Plugin: h.Plugin, Name: h.Name, Path: h.Path, Step: h.Step, Background: h.Background,
			Timeout: e.cfg.Timeout, Grace: e.cfg.Grace, Enabled: true}
		if msg, bad := configErr[h.Plugin]; bad {
			spec.ConfigError = msg
		} else if r := resolved[h.Plugin]; r != nil {
			spec.Enabled = r.Enabled
			spec.Timeout = r.Timeout(e.cfg.Timeout)
		}
		if spec.Background {
			// At the seal a background hook gets its plugin's timeout as grace.
			spec.Grace = spec.Timeout
		}
		plan.Hooks = append(plan.Hooks, spec)
	}
	return plan, nil
}

// Run runs one attempt of a hook through procs.Run, behind its own fetch
// proxy when the fetch policy denies anything.
func (e *Engine) Run(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
	fp, err := e.startFetchProxy(req, sink)
	if err != nil {
		return activities.Outcome{}, fmt.Errorf("run hook %s: %w", req.Hook.Key(), err)
	}
	defer fp.close()
	spec, err := e.spec(req, sink, fp)
	if err != nil {
		return activities.Outcome{}, err
	}
	res, err := procs.Run(ctx, spec)
	if err != nil {
		if procs.IsPermanent(err) {
			return activities.Outcome{}, fmt.Errorf("run hook %s: %w: %w", req.Hook.Key(), err, activities.ErrConfig)
		}
		return activities.Outcome{}, fmt.Errorf("run hook %s: %w", req.Hook.Key(), err)
	}
	out := activities.Outcome{Result: res.ArchiveResult(), Transient: res.Transient}
	if res.Transient {
		out.Error = res.Reason
		if len(res.StderrTail) > 0 {
			out.Error += "; stderr: " + strings.Join(res.StderrTail, " | ")
		}
	}
	return e.redactOutcome(out), nil
}

// redactOutcome removes archiveflow's secrets from the text a hook
// reported: it goes into workflow history and Redis.
func (e *Engine) redactOutcome(o activities.Outcome) activities.Outcome {
	s := e.cfg.Secrets
	o.Error = s.Redact(o.Error)
	o.Result.OutputStr = s.Redact(o.Result.OutputStr)
	o.Result.Error = s.Redact(o.Result.Error)
	if raw := string(o.Result.OutputJSON); raw != "" {
		if red := s.Redact(raw); red != raw {
			o.Result.OutputJSON = json.RawMessage(red)
		}
	}
	return o
}

// configError is a plugin configuration error as it may enter workflow
// history: with any secret value it quotes redacted.
func (e *Engine) configError(h activities.HookSpec, err error) error {
	return fmt.Errorf("run hook %s: %s: %w", h.Key(), e.cfg.Secrets.Redact(err.Error()), activities.ErrConfig)
}

// spec builds the procs.Spec of one attempt: argv, env, cwd, timeouts and
// the live callbacks (DESIGN.md §3 Invocation). fp is the attempt's fetch
// proxy (nil: none).
func (e *Engine) spec(req activities.RunRequest, sink activities.Sink, fp *fetchProxy) (procs.Spec, error) {
	h := req.Hook
	snapDir, err := e.snapDir(req.Job.SnapshotID)
	if err != nil {
		return procs.Spec{}, e.configError(h, err)
	}
	if err := checkDirs(snapDir, filepath.Join(snapDir, h.Plugin)); err != nil {
		return procs.Spec{}, e.configError(h, err)
	}
	schema, err := hooks.LoadSchema(filepath.Join(filepath.Dir(h.Path), hooks.ConfigFile), h.Plugin)
	if err != nil {
		return procs.Spec{}, e.configError(h, err)
	}
	base := map[string]string{"SNAP_DIR": snapDir, "ARCHIVE_DIR": e.cfg.ArchiveDir}
	resolved, err := schema.Resolve(e.sources(req.Job.Overrides, base))
	if err != nil {
		return procs.Spec{}, e.configError(h, err)
	}
	timeout := resolved.Timeout(h.Timeout)
	if timeout <= 0 {
		timeout = e.cfg.Timeout
	}
	fetchEnv, err := e.fetchEnv(fp)
	if err != nil {
		return procs.Spec{}, fmt.Errorf("run hook %s: %w", h.Key(), err)
	}
	env, err := e.env(req, snapDir, timeout, resolved, fetchEnv)
	if err != nil {
		return procs.Spec{}, fmt.Errorf("run hook %s: %w", h.Key(), err)
	}
	spec := procs.Spec{
		Path:       h.Path,
		Args:       append([]string{"--url=" + req.Job.URL, "--snapshot-id=" + req.Job.SnapshotID}, req.Job.ExtraArgs...),
		Env:        env,
		Dir:        filepath.Join(snapDir, h.Plugin),
		Stem:       strings.TrimSuffix(h.Name, filepath.Ext(h.Name)),
		Timeout:    timeout,
		Grace:      h.Grace,
		Background: h.Background,
		LineCap:    e.cfg.LineCap,
		Limits:     limits(e.cfg.Limits, resolved.Limits()),
		OnStderr:   func(line string) { sink.StderrLine(e.cfg.Secrets.Redact(line)) },
		OnRecord: func(r jsonl.Record) {
			sink.Record()
			if r.Response != nil {
				resp := *r.Response
				resp.URL = e.cfg.Secrets.Redact(resp.URL)
				sink.Response(resp)
			}
		},
		Log: e.log,
	}
	if h.Background {
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
