package engine

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/metrics"
	"github.com/archiveflow/archiveflow/internal/metrics/metricstest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// probeHook records what it was started with (its environment and
// resource limits) in its working directory, tries to put the Redis
// password into the result, and fails.
const probeHook = `env | sort > env
{ ulimit -n; ulimit -d; } > limits
echo "stderr says ` + testSecret + `" >&2
echo '{"type":"ArchiveResult","status":"failed","error":"the password is ` + testSecret + `"}'
`

// nullSink is an activities.Sink that keeps nothing but stderr lines.
type nullSink struct{ lines []string }

func (s *nullSink) StderrLine(l string)     { s.lines = append(s.lines, l) }
func (s *nullSink) Response(model.Response) {}
func (s *nullSink) Record()                 {}

// TestEveryPathStartsAHookTheSameWay runs one hook as a snapshot's hook
// (Run: the per-hook activity and host steps alike), as a crawl page's
// hook (RunPage) and as a crawl setup hook: each gets the same
// environment (but for where it runs), the same resource limits, the same
// outcome mapping, and nothing it prints brings the Redis password into a
// result, a note or a log record.
func TestEveryPathStartsAHookTheSameWay(t *testing.T) {
	plugins := t.TempDir()
	writeHook(t, filepath.Join(plugins, "probe", "on_Snapshot__10_probe.sh"), probeHook)
	writeHook(t, filepath.Join(plugins, "probe", "on_CrawlSetup__10_probe.sh"), probeHook)
	cfg := config.Default()
	cfg.Redis.Password = testSecret
	core, logs := observer.New(zapcore.DebugLevel)
	e := pageEngine(t, plugins, func(c *Config) {
		c.Secrets = cfg.Secrets()
		c.Limits = procs.Limits{OpenFiles: 321, Memory: 700 << 20, Cgroup: "none"}
		c.Log = zap.New(core)
	})
	ctx := context.Background()
	before, err := metricstest.Gather(metrics.Registry())
	require.NoError(t, err)

	// A snapshot's hook.
	job := activities.Job{Ident: "snap1", URL: "http://site.test/", SnapshotID: "snap1"}
	hook := activities.HookSpec{Plugin: "probe", Name: "on_Snapshot__10_probe.sh", Path: filepath.Join(plugins, "probe", "on_Snapshot__10_probe.sh"),
		Step: 1, Timeout: 20 * time.Second, Grace: time.Second, Enabled: true}
	sink := &nullSink{}
	snap, err := e.Run(ctx, activities.RunRequest{Job: job, Hook: hook, Attempt: 1, Settings: model.Settings{Concurrency: 1}}, sink)
	require.NoError(t, err)
	snapDir := filepath.Join(e.cfg.ArchiveDir, "snapshots", "snap1", "probe")

	// A crawl page's hook, after the crawl's setup hook on this host.
	cr := testCrawl("probe")
	page, err := e.RunPage(ctx, activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: 2, URL: "http://site.test/p", Attempt: 1},
		Settings: model.Settings{Concurrency: 1}})
	require.NoError(t, err)
	pageDir := filepath.Join(e.pageDir(cr.Job.Ident, 2), "probe")
	setupDir := filepath.Join(e.crawlDir(cr.Job.Ident), "probe")

	// The same environment but for where the hook runs and what it runs on.
	perRun := map[string]bool{"SNAP_DIR": true, "CRAWL_DIR": true, "PERSONAS_DIR": true, "EXTRA_CONTEXT": true, "PWD": true, "OLDPWD": true, "SHLVL": true, "_": true,
		procs.MarkerEnv: true}
	envOf := func(dir string) map[string]string {
		b, err := os.ReadFile(filepath.Join(dir, "env"))
		require.NoError(t, err, dir)
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && !perRun[k] {
				m[k] = v
			}
		}
		return m
	}
	keys := func(m map[string]string) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	snapEnv, pageEnv, setupEnv := envOf(snapDir), envOf(pageDir), envOf(setupDir)
	assert.Equal(t, keys(snapEnv), keys(pageEnv), "a page hook's environment has the snapshot hook's keys")
	assert.Equal(t, keys(snapEnv), keys(setupEnv), "a setup hook's environment has the snapshot hook's keys")
	for _, k := range []string{"TIMEOUT", "PROBE_TIMEOUT", "USER_AGENT", "ARCHIVE_DIR", "PATH"} {
		if _, ok := snapEnv[k]; ok {
			assert.Equal(t, snapEnv[k], pageEnv[k], k)
			assert.Equal(t, snapEnv[k], setupEnv[k], k)
		}
	}
	for _, env := range []map[string]string{snapEnv, pageEnv, setupEnv} {
		for k, v := range env {
			assert.NotContains(t, v, testSecret, "no secret in the hook's environment (%s)", k)
		}
	}

	// The same limits on every path.
	for _, dir := range []string{snapDir, pageDir, setupDir} {
		b, err := os.ReadFile(filepath.Join(dir, "limits"))
		require.NoError(t, err, dir)
		assert.Equal(t, "321\n716800\n", string(b), "open files and data (KiB) limits in %s", dir)
	}

	// The same outcome mapping, redacted.
	assert.Equal(t, model.StatusFailed, snap.Result.Status)
	assert.Equal(t, "the password is xxxxx", snap.Result.Error)
	assert.Equal(t, activities.PageFailed, page.Status)
	assert.Equal(t, "on_Snapshot__10_probe.sh: the password is xxxxx", page.Note)
	for _, l := range sink.lines {
		assert.NotContains(t, l, testSecret)
	}

	// Counted the same way: three attempts started and finished failed.
	after, err := metricstest.Gather(metrics.Registry())
	require.NoError(t, err)
	for name, labels := range map[string][]string{
		"archiveflow_hooks_started_total":   {"plugin", "probe"},
		"archiveflow_hooks_finished_total":  {"plugin", "probe", "status", "failed"},
		"archiveflow_hook_duration_seconds": {"plugin", "probe"},
	} {
		assert.Equal(t, 3.0, after.Sum(name, labels...)-before.Sum(name, labels...), name)
	}
	for _, entry := range logs.All() {
		assert.NotContains(t, entry.Message, testSecret)
		for k, v := range entry.ContextMap() {
			s, _ := v.(string)
			assert.NotContains(t, s, testSecret, "log field %s of %q", k, entry.Message)
		}
	}
}

// TestOneFunctionStartsAHook: attempt is the only caller of the functions
// that start a hook (procs.Run, procs.RunFunc) outside tests, so every path
// gets its proxy, environment, limits, outcome mapping and redaction.
func TestOneFunctionStartsAHook(t *testing.T) {
	assert.Equal(t, []string{"internal/engine/attempt.go", "internal/engine/attempt.go"}, callersOf(t, "procs", "Run", "RunFunc"),
		"only Engine.attempt starts a hook")
}

// TestOneRunnerOrdersHooks: every path that runs a plan's hooks on a host
// (a host-steps segment, a crawl page, a crawl's setup) walks it with the
// step runner, and every path classifies an attempt's end with its one
// rule (RunHook's attempt too).
func TestOneRunnerOrdersHooks(t *testing.T) {
	assert.Equal(t, []string{"activities/steps.go", "internal/engine/page.go", "internal/engine/setup.go"}, callersOf(t, "steprun", "Run"))
	assert.Equal(t, []string{"activities/runhook.go", "internal/engine/page.go", "internal/engine/setup.go"}, callersOf(t, "steprun", "Classify"))
}

// callersOf lists the non-test Go files of the module that use pkg.name
// for any of names, once per use, in walk order.
func callersOf(t *testing.T, pkg string, names ...string) []string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	var callers []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg && slices.Contains(names, sel.Sel.Name) {
				rel, _ := filepath.Rel(root, path)
				callers = append(callers, rel)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return callers
}

// TestAttemptStatusForTheMetrics: the status label of a finished attempt
// is its final status, transient when it is retried, error when it could
// not run.
func TestAttemptStatusForTheMetrics(t *testing.T) {
	assert.Equal(t, "succeeded", attemptStatus(procs.Result{Status: model.StatusSucceeded}, nil))
	assert.Equal(t, "skipped", attemptStatus(procs.Result{Status: model.StatusSkipped}, nil))
	assert.Equal(t, metrics.HookTransient, attemptStatus(procs.Result{Transient: true}, nil))
	assert.Equal(t, metrics.HookError, attemptStatus(procs.Result{}, errors.New("no such file")))
	assert.Equal(t, metrics.HookError, attemptStatus(procs.Result{}, nil))
}

// A hook whose plugin is in maintenance on this host is not started: its
// attempt is skipped, the output naming the maintenance (which the fleet's
// health reads as saying nothing about the plugin); other plugins run.
func TestAPluginInMaintenanceIsSkipped(t *testing.T) {
	plugins := t.TempDir()
	writeHook(t, filepath.Join(plugins, "probe", "on_Snapshot__10_probe.sh"), "touch ran\n"+`echo '{"type":"ArchiveResult","status":"succeeded"}'`+"\n")
	writeHook(t, filepath.Join(plugins, "other", "on_Snapshot__11_other.sh"), "touch ran\n"+`echo '{"type":"ArchiveResult","status":"succeeded"}'`+"\n")
	var asked []string
	e := pageEngine(t, plugins, func(c *Config) {
		c.Maintenance = func(_ context.Context, plugin string) string {
			asked = append(asked, plugin)
			if plugin == "probe" {
				return "unscheduled maintenance of host-a:probe until 2026-11-26T23:00:00Z: reinstalling"
			}
			return ""
		}
	})
	job := activities.Job{Ident: "snap1", URL: "http://site.test/", SnapshotID: "snap1"}
	run := func(plugin, name string) activities.Outcome {
		hook := activities.HookSpec{Plugin: plugin, Name: name, Path: filepath.Join(plugins, plugin, name), Step: 1, Timeout: 20 * time.Second, Grace: time.Second, Enabled: true}
		out, err := e.Run(context.Background(), activities.RunRequest{Job: job, Hook: hook, Attempt: 1, Settings: model.Settings{Concurrency: 1}}, &nullSink{})
		require.NoError(t, err)
		return out
	}
	skipped := run("probe", "on_Snapshot__10_probe.sh")
	assert.Equal(t, model.StatusSkipped, skipped.Result.Status)
	assert.Equal(t, "in maintenance: unscheduled maintenance of host-a:probe until 2026-11-26T23:00:00Z: reinstalling", skipped.Result.OutputStr)
	assert.NoFileExists(t, filepath.Join(e.cfg.ArchiveDir, "snapshots", "snap1", "probe", "ran"), "the hook never started")
	assert.Equal(t, model.StatusSucceeded, run("other", "on_Snapshot__11_other.sh").Result.Status)
	assert.FileExists(t, filepath.Join(e.cfg.ArchiveDir, "snapshots", "snap1", "other", "ran"))
	assert.Equal(t, []string{"probe", "other"}, asked)
}
