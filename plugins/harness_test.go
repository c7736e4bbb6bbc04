package plugins_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/builtin"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// TestMain lets the test binary act as ARCHIVEFLOW_BIN: the hook wrappers
// exec `$ARCHIVEFLOW_BIN hook NAME ...`, exactly as with the real binaries.
func TestMain(m *testing.M) {
	if code, ok := builtin.Dispatch(os.Args); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// hookDeadline bounds any single hook run in these tests; generous for a
// loaded 2-core machine.
const hookDeadline = 90 * time.Second

var (
	planOnce sync.Once
	plan     hooks.Plan
	planErr  error
)

// builtinPlan discovers the plugins of this directory with the real
// discovery code.
func builtinPlan(t *testing.T) hooks.Plan {
	t.Helper()
	planOnce.Do(func() {
		dir, err := filepath.Abs(".")
		if err != nil {
			planErr = err
			return
		}
		plan, planErr = hooks.Discover([]string{dir}, zap.NewNop())
	})
	require.NoError(t, planErr)
	return plan
}

func hookOf(t *testing.T, plugin string) hooks.Hook {
	t.Helper()
	for _, h := range builtinPlan(t).Hooks {
		if h.Plugin == plugin {
			return h
		}
	}
	t.Fatalf("plugin %s: not discovered", plugin)
	return hooks.Hook{}
}

// snapshot is one snapshot directory and the job-level values its hooks get.
type snapshot struct {
	t       *testing.T
	dir     string
	url     string
	depth   string            // FETCH_DEPTH
	ignores []string          // IGNORE_PATTERNS
	env     map[string]string // extra process env (e.g. PATH), also a config source
	plan    hooks.Plan
	cgroup  string // procs.Limits.Cgroup of the resolved limits: "" finds one, as a worker does
}

func newSnapshot(t *testing.T, url string) *snapshot {
	return &snapshot{t: t, dir: t.TempDir(), url: url, depth: "shallow", env: map[string]string{}, plan: builtinPlan(t)}
}

// hookRun is the outcome of one hook run through the runner.
type hookRun struct {
	hook    hooks.Hook
	res     procs.Result
	records []jsonl.Record
}

func (r hookRun) status() model.Status { return r.res.Status }

func (r hookRun) last() *jsonl.ArchiveResult { return r.res.Last }

func (r hookRun) outputJSON(t *testing.T) map[string]any {
	t.Helper()
	require.NotNil(t, r.res.Last, "hook %s printed no ArchiveResult", r.hook.Name)
	out := map[string]any{}
	if len(r.res.Last.OutputJSON) > 0 {
		require.NoError(t, json.Unmarshal(r.res.Last.OutputJSON, &out))
	}
	return out
}

func (r hookRun) responses() []model.Response {
	var out []model.Response
	for _, rec := range r.records {
		if rec.Response != nil {
			out = append(out, *rec.Response)
		}
	}
	return out
}

func (r hookRun) snapshots() []jsonl.Snapshot {
	var out []jsonl.Snapshot
	for _, rec := range r.records {
		if rec.Snapshot != nil {
			out = append(out, *rec.Snapshot)
		}
	}
	return out
}

// file returns the path of a file in the hook's plugin directory.
func (s *snapshot) file(plugin, name string) string {
	return filepath.Join(s.dir, plugin, filepath.FromSlash(name))
}

// run resolves the hook's config.json with the real resolver and runs the
// hook with the real runner, as a worker would.
func (s *snapshot) run(ctx context.Context, h hooks.Hook, ua string) hookRun {
	s.t.Helper()
	r, err := s.runE(ctx, h, ua)
	require.NoError(s.t, err)
	return r
}

// runWithEnv is run with env entries added after the resolved config, as if
// the hook were started by hand.
func (s *snapshot) runWithEnv(ctx context.Context, h hooks.Hook, ua string, post ...string) hookRun {
	s.t.Helper()
	r, err := s.runE(ctx, h, ua, post...)
	require.NoError(s.t, err)
	return r
}

// runE is run for use outside the test goroutine: it reports errors instead
// of failing the test.
func (s *snapshot) runE(ctx context.Context, h hooks.Hook, ua string, post ...string) (hookRun, error) {
	bin, err := os.Executable()
	if err != nil {
		return hookRun{}, err
	}
	ignores := []byte("[]")
	if s.ignores != nil {
		if ignores, err = json.Marshal(s.ignores); err != nil {
			return hookRun{}, err
		}
	}
	extra, err := json.Marshal(map[string]any{"snapshot_id": "snap-1", "ident": "ident1", "plugin": h.Plugin, "hook_name": h.Name, "attempt": 1})
	if err != nil {
		return hookRun{}, err
	}
	base := map[string]string{
		"SNAP_DIR": s.dir, "ARCHIVE_DIR": filepath.Dir(s.dir), "TIMEOUT": "60",
		"USER_AGENT": ua, "FETCH_DEPTH": s.depth, "DELAY_MIN": "0", "DELAY_MAX": "0",
		"IGNORE_PATTERNS": string(ignores), "EXTRA_CONTEXT": string(extra),
	}
	schema := s.plan.Schema(h.Plugin)
	if schema == nil {
		return hookRun{}, fmt.Errorf("plugin %s has no schema", h.Plugin)
	}
	resolved, err := schema.Resolve(hooks.Sources{Env: s.env, Base: base})
	if err != nil {
		return hookRun{}, fmt.Errorf("resolve %s: %w", h.Plugin, err)
	}
	if !resolved.Enabled {
		return hookRun{}, fmt.Errorf("plugin %s is disabled", h.Plugin)
	}

	env := os.Environ()
	for k, v := range base {
		env = append(env, k+"="+v)
	}
	env = append(env, resolved.Env()...)
	for k, v := range s.env {
		env = append(env, k+"="+v)
	}
	env = append(env, "ARCHIVEFLOW_BIN="+bin)
	env = append(env, post...)

	timeout := resolved.Timeout(60 * time.Second)
	spec := procs.Spec{
		Path: h.Path, Args: []string{"--url=" + s.url, "--snapshot-id=snap-1"},
		Env: env, Dir: filepath.Join(s.dir, h.Plugin), Stem: h.Stem,
		Timeout: timeout, Background: h.Background,
		Limits: limitsOf(resolved.Limits(), s.cgroup),
	}
	if h.Background {
		spec.Timeout, spec.Grace = 0, timeout
	}
	var mu sync.Mutex
	var records []jsonl.Record
	spec.OnRecord = func(r jsonl.Record) {
		mu.Lock()
		records = append(records, r)
		mu.Unlock()
	}
	t := s.t
	spec.OnStderr = func(line string) { t.Logf("%s: %s", h.Plugin, line) }

	runCtx, cancel := context.WithTimeout(ctx, hookDeadline)
	defer cancel()
	res, err := procs.Run(runCtx, spec)
	if err != nil {
		return hookRun{}, fmt.Errorf("run hook %s: %w", h.Name, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return hookRun{hook: h, res: res, records: records}, nil
}

// limitsOf is the resolved memory limit (the only limit key the built-in
// plugins declare) as the runner's limits, for a worker without
// hooks.limits.
func limitsOf(l hooks.Limits, cgroup string) procs.Limits {
	out := procs.Limits{Cgroup: cgroup}
	if l.Memory != nil {
		out.Memory = *l.Memory
	}
	return out
}

// haveChromium reports whether the browser hooks can find a Chromium.
func haveChromium() bool {
	for _, c := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"} {
		if _, err := exec.LookPath(c); err == nil {
			return true
		}
	}
	return false
}

// requireFinal asserts a run ended with want, showing the stderr tail when not.
func requireFinal(t *testing.T, r hookRun, want model.Status) {
	t.Helper()
	require.False(t, r.res.Transient, "hook %s: transient: %s\nstderr: %s", r.hook.Name, r.res.Reason, strings.Join(r.res.StderrTail, "\n"))
	require.Equal(t, want, r.status(), "hook %s: %s\nstderr: %s", r.hook.Name, r.res.Reason, strings.Join(r.res.StderrTail, "\n"))
	require.Zero(t, r.res.Leftovers, "hook %s left processes behind", r.hook.Name)
}

// statusKey formats a status/path pair for comparing request lists.
func statusKey(status int, path string) string { return fmt.Sprintf("%d %s", status, path) }
