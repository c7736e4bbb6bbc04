package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// Engine is the production Discoverer and Runner: discovery and plugin
// configuration from internal/hooks, process supervision from internal/procs.
// Plugin configuration is resolved twice on the worker host, once at
// discovery (enabled flag, timeout, errors go into the plan) and once per
// attempt (the values go into the hook's env), so config values, which may
// be secrets, never enter workflow history.
type Engine struct {
	// PluginDirs are searched in order; a later dir's plugin of the same
	// name overrides an earlier one.
	PluginDirs []string
	// ArchiveDir holds snapshots/SNAPSHOT_ID/ directories.
	ArchiveDir string
	// File is the archiveflow config file's plugin settings (KEY → value).
	File map[string]any
	// Env is the worker's environment as KEY=VALUE; nil means os.Environ().
	Env []string
	// DefaultTimeout is TIMEOUT when nothing sets it (DESIGN: 60 s).
	DefaultTimeout time.Duration
	// Grace is the SIGTERM → SIGKILL delay of foreground hooks (15 s).
	Grace time.Duration
	// Limits are every hook's resource limits unless its plugin's limit
	// keys say otherwise (hooks.limits; none by default).
	Limits procs.Limits
	Log    *zap.Logger
}

var (
	_ Discoverer = (*Engine)(nil)
	_ Runner     = (*Engine)(nil)
)

func (e *Engine) log() *zap.Logger {
	if e.Log == nil {
		return zap.NewNop()
	}
	return e.Log
}

func (e *Engine) defaultTimeout() time.Duration {
	if e.DefaultTimeout > 0 {
		return e.DefaultTimeout
	}
	return 60 * time.Second
}

func (e *Engine) grace() time.Duration {
	if e.Grace > 0 {
		return e.Grace
	}
	return procs.DefaultGrace
}

func (e *Engine) environ() []string {
	if e.Env != nil {
		return e.Env
	}
	return os.Environ()
}

// snapDir is ARCHIVE_DIR/snapshots/SNAPSHOT_ID.
func (e *Engine) snapDir(snapshotID string) (string, error) {
	if snapshotID == "" || snapshotID != filepath.Base(snapshotID) || strings.HasPrefix(snapshotID, ".") {
		return "", fmt.Errorf("snapshot id %q: must be a single path element not starting with a dot", snapshotID)
	}
	if e.ArchiveDir == "" {
		return "", errors.New("archive dir: must be configured")
	}
	return filepath.Join(e.ArchiveDir, "snapshots", snapshotID), nil
}

// sources are the config sources of one snapshot.
func (e *Engine) sources(overrides map[string]string, base map[string]string) hooks.Sources {
	env := map[string]string{}
	for _, kv := range e.environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return hooks.Sources{Job: overrides, Env: env, File: e.File, Base: base}
}

// Discover finds the hooks and resolves each plugin's enabled flag, timeout
// and configuration error.
func (e *Engine) Discover(ctx context.Context, in DiscoverInput) (Plan, error) {
	found, err := hooks.Discover(e.PluginDirs, e.log())
	if err != nil {
		return Plan{}, fmt.Errorf("discover hooks in %v: %w", e.PluginDirs, err)
	}
	snapDir, err := e.snapDir(in.SnapshotID)
	if err != nil {
		return Plan{}, fmt.Errorf("discover hooks for %s: %w: %w", in.Ident, err, ErrConfig)
	}
	base := map[string]string{"SNAP_DIR": snapDir, "ARCHIVE_DIR": e.ArchiveDir}
	src := e.sources(in.Overrides, base)
	resolved := map[string]*hooks.Resolved{}
	configErr := map[string]string{}
	for _, plugin := range found.Plugins() {
		r, err := found.Schema(plugin).Resolve(src)
		if err != nil {
			configErr[plugin] = err.Error()
			continue
		}
		resolved[plugin] = r
	}
	plan := Plan{Hooks: make([]HookSpec, 0, len(found.Hooks))}
	for _, h := range found.Hooks {
		spec := HookSpec{Plugin: h.Plugin, Name: h.Name, Path: h.Path, Step: h.Step, Background: h.Background,
			Timeout: e.defaultTimeout(), Grace: e.grace(), Enabled: true}
		if msg, bad := configErr[h.Plugin]; bad {
			spec.ConfigError = msg
		} else if r := resolved[h.Plugin]; r != nil {
			spec.Enabled = r.Enabled
			spec.Timeout = r.Timeout(e.defaultTimeout())
		}
		if spec.Background {
			// At the seal a background hook gets its plugin's timeout as grace.
			spec.Grace = spec.Timeout
		}
		plan.Hooks = append(plan.Hooks, spec)
	}
	return plan, nil
}

// Run runs one attempt of a hook through procs.Run.
func (e *Engine) Run(ctx context.Context, req RunRequest, sink Sink) (Outcome, error) {
	spec, err := e.spec(req, sink)
	if err != nil {
		return Outcome{}, err
	}
	res, err := procs.Run(ctx, spec)
	if err != nil {
		if procs.IsPermanent(err) {
			return Outcome{}, fmt.Errorf("run hook %s: %w: %w", req.Hook.Key(), err, ErrConfig)
		}
		return Outcome{}, fmt.Errorf("run hook %s: %w", req.Hook.Key(), err)
	}
	out := Outcome{Result: res.ArchiveResult(), Transient: res.Transient}
	if res.Transient {
		out.Error = res.Reason
		if len(res.StderrTail) > 0 {
			out.Error += "; stderr: " + strings.Join(res.StderrTail, " | ")
		}
	}
	return out, nil
}

// spec builds the procs.Spec of one attempt: argv, env, cwd, timeouts and
// the live callbacks (DESIGN.md §3 Invocation).
func (e *Engine) spec(req RunRequest, sink Sink) (procs.Spec, error) {
	h := req.Hook
	snapDir, err := e.snapDir(req.Job.SnapshotID)
	if err != nil {
		return procs.Spec{}, fmt.Errorf("run hook %s: %w: %w", h.Key(), err, ErrConfig)
	}
	schema, err := hooks.LoadSchema(filepath.Join(filepath.Dir(h.Path), hooks.ConfigFile), h.Plugin)
	if err != nil {
		return procs.Spec{}, fmt.Errorf("run hook %s: %w: %w", h.Key(), err, ErrConfig)
	}
	base := map[string]string{"SNAP_DIR": snapDir, "ARCHIVE_DIR": e.ArchiveDir}
	resolved, err := schema.Resolve(e.sources(req.Job.Overrides, base))
	if err != nil {
		return procs.Spec{}, fmt.Errorf("run hook %s: %w: %w", h.Key(), err, ErrConfig)
	}
	timeout := resolved.Timeout(h.Timeout)
	if timeout <= 0 {
		timeout = e.defaultTimeout()
	}
	env, err := e.env(req, snapDir, timeout, resolved)
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
		Limits:     limits(e.Limits, resolved.Limits()),
		OnStderr:   sink.StderrLine,
		OnRecord: func(r jsonl.Record) {
			sink.Record()
			if r.Response != nil {
				sink.Response(*r.Response)
			}
		},
		Log: e.log(),
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

// env is the hook's environment: the worker's, the resolved plugin config,
// then archiveflow's own keys (later entries win).
func (e *Engine) env(req RunRequest, snapDir string, timeout time.Duration, r *hooks.Resolved) ([]string, error) {
	extra, err := json.Marshal(map[string]any{
		"snapshot_id": req.Job.SnapshotID,
		"ident":       req.Job.Ident,
		"plugin":      req.Hook.Plugin,
		"hook_name":   req.Hook.Name,
		"attempt":     req.Attempt,
	})
	if err != nil {
		return nil, fmt.Errorf("encode EXTRA_CONTEXT: %w", err)
	}
	ignores := req.Settings.Ignores
	if ignores == nil {
		ignores = []string{}
	}
	ign, err := json.Marshal(ignores)
	if err != nil {
		return nil, fmt.Errorf("encode IGNORE_PATTERNS: %w", err)
	}
	secs := strconv.Itoa(int((timeout + time.Second - 1) / time.Second))
	env := append([]string{}, e.environ()...)
	env = append(env, r.Env()...)
	env = append(env,
		"SNAP_DIR="+snapDir,
		"ARCHIVE_DIR="+e.ArchiveDir,
		"TIMEOUT="+secs,
		hooks.TimeoutKey(req.Hook.Plugin)+"="+secs,
		"FETCH_DEPTH="+req.Job.FetchDepth,
		"DELAY_MIN="+strconv.Itoa(req.Settings.DelayMinMS),
		"DELAY_MAX="+strconv.Itoa(req.Settings.DelayMaxMS),
		"EXTRA_CONTEXT="+string(extra),
		"IGNORE_PATTERNS="+string(ign),
	)
	if req.Settings.UserAgent != "" {
		env = append(env, "USER_AGENT="+req.Settings.UserAgent)
	}
	return env, nil
}
