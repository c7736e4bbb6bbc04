package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// These tests run real hooks (shell scripts written into t.TempDir()) through
// the real runner (internal/procs) via Engine.

const eventually = 30 * time.Second

// memStore is a Store that keeps everything in memory.
type memStore struct {
	// down makes AppendLog and RecordResult fail as with Redis unreachable.
	down    atomic.Bool
	mu      sync.Mutex
	logs    []activities.LogEntry
	results []activities.ResultInput
	batches map[string]bool
	line    chan string
	archive []activities.ArchiveInput
}

var errRedisDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func newMemStore() *memStore {
	return &memStore{batches: map[string]bool{}, line: make(chan string, 1024)}
}

func (s *memStore) SetJobState(context.Context, activities.JobStateInput) error { return nil }
func (s *memStore) SetStep(context.Context, activities.StepInput) error         { return nil }
func (s *memStore) Heartbeat(context.Context, string) error                     { return nil }
func (s *memStore) SetArchive(_ context.Context, in activities.ArchiveInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.archive = append(s.archive, in)
	return nil
}
func (s *memStore) RecordResult(_ context.Context, in activities.ResultInput) error {
	if s.down.Load() {
		return errRedisDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, in)
	return nil
}
func (s *memStore) ReopenJob(context.Context, activities.ReopenInput) error       { return nil }
func (s *memStore) SetRetryAt(context.Context, activities.RetryAtInput) error     { return nil }
func (s *memStore) FinishJob(context.Context, activities.FinishInput) error       { return nil }
func (s *memStore) ApplySettings(context.Context, activities.SettingsInput) error { return nil }
func (s *memStore) AppendLog(_ context.Context, _ string, key string, seq int, entries []activities.LogEntry) error {
	if s.down.Load() {
		return errRedisDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := key + "#" + strconv.Itoa(seq)
	if s.batches[id] {
		return errors.New("batch appended twice: " + id)
	}
	s.batches[id] = true
	s.logs = append(s.logs, entries...)
	for _, e := range entries {
		if e.Kind == activities.LogStdout {
			select {
			case s.line <- e.Message:
			default:
			}
		}
	}
	return nil
}

func (s *memStore) entries() []activities.LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]activities.LogEntry(nil), s.logs...)
}

// waitLine blocks until the job log receives want.
func (s *memStore) waitLine(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(eventually)
	for {
		select {
		case got := <-s.line:
			if got == want {
				return
			}
		case <-deadline:
			require.FailNow(t, "job log never received "+want)
		}
	}
}

type fixture struct {
	t       *testing.T
	root    string
	plugins string
	archive string
	store   *memStore
	acts    *activities.HostActivities
	engine  *Engine
}

// testOptions are the hook activity options of these tests: short
// intervals so heartbeats and log flushes happen within a test.
func testOptions() activities.Options {
	return activities.Options{
		HeartbeatInterval: 20 * time.Millisecond, JobHeartbeatInterval: time.Second, SettingsPollInterval: 2 * time.Second,
		LogFlushInterval: 20 * time.Millisecond, LogBatch: 200, LogLinesPerRun: 20000, LogLineBytes: 4096,
		ResultFieldBytes: 8 << 10, ResponsesPerRun: 1 << 20,
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{t: t, root: root, plugins: filepath.Join(root, "plugins"), archive: filepath.Join(root, "archive"), store: newMemStore()}
	require.NoError(t, os.MkdirAll(f.plugins, 0o755))
	e, err := New(Config{PluginDirs: []string{f.plugins}, ArchiveDir: f.archive, Env: []string{"PATH=" + os.Getenv("PATH")},
		Timeout: 30 * time.Second, Grace: 5 * time.Second, LineCap: 1 << 20, Log: zap.NewNop()})
	require.NoError(t, err)
	f.engine = e
	f.withOptions(testOptions())
	return f
}

// withOptions rebuilds the fixture's activities with opts.
func (f *fixture) withOptions(opts activities.Options) {
	f.t.Helper()
	a, err := activities.NewHost(f.engine, f.engine, f.engine, f.store, zap.NewNop(), opts)
	require.NoError(f.t, err)
	f.acts = a
}

// hook writes an executable shell hook and returns its spec.
func (f *fixture) hook(plugin, name, body string) activities.HookSpec {
	f.t.Helper()
	dir := filepath.Join(f.plugins, plugin)
	require.NoError(f.t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name)
	require.NoError(f.t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return activities.HookSpec{Plugin: plugin, Name: name, Path: path, Step: int(name[13] - '0'), Background: strings.Contains(name, ".bg."),
		Timeout: 30 * time.Second, Grace: 5 * time.Second, Enabled: true}
}

func (f *fixture) config(plugin, doc string) {
	f.t.Helper()
	dir := filepath.Join(f.plugins, plugin)
	require.NoError(f.t, os.MkdirAll(dir, 0o755))
	require.NoError(f.t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(doc), 0o644))
}

func runInput(h activities.HookSpec) activities.RunHookInput {
	return activities.RunHookInput{
		Job:      activities.Job{Ident: "abc123", URL: "https://example.com/", SnapshotID: "abc123"},
		Hook:     h,
		Settings: model.Settings{Concurrency: 1, UserAgent: "archiveflow-test/1", Ignores: []string{`\.css$`}},
		Key:      "run-1/claim-1/step-1/" + h.Key(),
	}
}

// env returns an activity environment.
func (f *fixture) env() *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(f.acts)
	env.SetTestTimeout(time.Minute)
	env.SetWorkerOptions(workerOptions)
	return env
}

// workerOptions deliver every heartbeat, as the workers do (internal/pools),
// instead of holding them back for the SDK's default 30 s: tests that wait
// for a heartbeat to report progress must not depend on the first one
// coming late enough.
var workerOptions = worker.Options{MaxHeartbeatThrottleInterval: 10 * time.Millisecond}

// envWithParent returns an activity environment whose activity contexts
// derive from parent: cancelling it is how the tests cancel a hook.
func (f *fixture) envWithParent(parent context.Context) *testsuite.TestActivityEnvironment {
	env := f.env()
	opts := workerOptions
	opts.BackgroundActivityContext = parent
	env.SetWorkerOptions(opts)
	return env
}

func (f *fixture) run(env *testsuite.TestActivityEnvironment, in activities.RunHookInput) (model.ArchiveResult, error) {
	f.t.Helper()
	v, err := env.ExecuteActivity(f.acts.RunHook, in)
	if err != nil {
		return model.ArchiveResult{}, err
	}
	var res model.ArchiveResult
	require.NoError(f.t, v.Get(&res))
	return res, nil
}

func TestRunHookStatusMapping(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantStatus model.Status
		wantOutput string
		wantErr    string // substring; error of type activities.ErrTypeTransient
	}{
		{"record wins", `echo '{"type":"ArchiveResult","status":"succeeded","output_str":"title.txt"}'`, model.StatusSucceeded, "title.txt", ""},
		{"no record exit 0 is noresults", `exit 0`, model.StatusNoResults, "", ""},
		{"no record exit 10 is skipped", `exit 10`, model.StatusSkipped, "", ""},
		{"soft failure is final", `echo '{"type":"ArchiveResult","status":"failed","error":"no title"}'; exit 0`, model.StatusFailed, "", ""},
		{"exit 1 without record is transient", `echo boom >&2; exit 1`, "", "", "exit"},
		{"exit 1 after a record is a partial success: transient, the record kept",
			`echo '{"type":"ArchiveResult","status":"succeeded","output_str":"half.txt"}'; exit 1`, "", "half.txt", "partial"},
		{"skipped record with exit 10 is final", `echo '{"type":"ArchiveResult","status":"skipped","output_str":"off"}'; exit 10`, model.StatusSkipped, "off", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			h := f.hook("title", "on_Snapshot__10_title.sh", tt.body)

			res, err := f.run(f.env(), runInput(h))

			if tt.wantErr != "" {
				require.Error(t, err)
				var appErr *temporal.ApplicationError
				require.ErrorAs(t, err, &appErr)
				assert.Equal(t, activities.ErrTypeTransient, appErr.Type())
				assert.False(t, appErr.NonRetryable())
				assert.Contains(t, appErr.Error(), tt.wantErr)
				var last model.ArchiveResult
				require.NoError(t, appErr.Details(&last))
				assert.Equal(t, 1, last.ExitCode)
				assert.Equal(t, 1, last.Attempts)
				assert.Equal(t, model.StatusFailed, last.Status)
				assert.Equal(t, tt.wantOutput, last.OutputStr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantStatus, res.Status)
			assert.Equal(t, tt.wantOutput, res.OutputStr)
			assert.Equal(t, "title", res.Plugin)
			assert.Equal(t, h.Name, res.Hook)
			assert.Equal(t, 1, res.Step)
			assert.Equal(t, 1, res.Attempts)
		})
	}
}

// A plugin's limit key (here from the worker's environment) overrides the
// worker's default limits; a hook that runs into its limit fails for good,
// with the limit named, and is not retried.
func TestRunHookResourceLimit(t *testing.T) {
	f := newFixture(t)
	f.engine.cfg.Limits = procs.Limits{Memory: 1 << 30}
	f.engine.cfg.Env = append(f.engine.cfg.Env, "HOG_MAX_MEMORY=64MiB")
	h := f.hook("hog", "on_Snapshot__10_hog.sh", `head -c 536870912 /dev/zero | tail > /dev/null`)

	res, err := f.run(f.env(), runInput(h))

	require.NoError(t, err, "a limit is a final failure, not a retryable error")
	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Equal(t, procs.LimitMemory, res.Limit)
	assert.Contains(t, res.Error, "memory limit 64 MiB")
	assert.Equal(t, 1, res.Attempts)
}

func TestRunHookInvocationContract(t *testing.T) {
	f := newFixture(t)
	h := f.hook("probe", "on_Snapshot__10_probe.sh", `
printf '%s\n' "$@" > args.txt
pwd > cwd.txt
env > env.txt
echo '{"type":"ArchiveResult","status":"succeeded"}'`)

	res, err := f.run(f.env(), runInput(h))
	require.NoError(t, err)
	require.Equal(t, model.StatusSucceeded, res.Status)

	dir := filepath.Join(f.archive, "snapshots", "abc123", "probe")
	args, err := os.ReadFile(filepath.Join(dir, "args.txt"))
	require.NoError(t, err)
	assert.Equal(t, "--url=https://example.com/\n--snapshot-id=abc123\n", string(args))
	cwd, err := os.ReadFile(filepath.Join(dir, "cwd.txt"))
	require.NoError(t, err)
	assert.Equal(t, dir, strings.TrimSpace(string(cwd)))
	envText, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(string(envText), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	assert.Equal(t, filepath.Join(f.archive, "snapshots", "abc123"), env["SNAP_DIR"])
	assert.Equal(t, f.archive, env["ARCHIVE_DIR"])
	assert.Equal(t, "30", env["TIMEOUT"])
	assert.Equal(t, "30", env["PROBE_TIMEOUT"])
	assert.Equal(t, "archiveflow-test/1", env["USER_AGENT"])
	assert.Equal(t, `["\\.css$"]`, env["IGNORE_PATTERNS"])
	var extra map[string]any
	require.NoError(t, json.Unmarshal([]byte(env["EXTRA_CONTEXT"]), &extra))
	assert.Equal(t, map[string]any{"snapshot_id": "abc123", "ident": "abc123", "plugin": "probe", "hook_name": h.Name, "attempt": float64(1)}, extra)
	assert.Contains(t, res.Outputs, model.OutputFile{Path: "args.txt", Size: int64(len(args))}, "output files are listed, runner files are not")
}

func TestRunHookStreamsStderrAndResponsesToTheJobLog(t *testing.T) {
	f := newFixture(t)
	h := f.hook("wget", "on_Snapshot__10_wget.sh", `
echo 'fetching https://example.com/' >&2
echo '{"type":"Response","url":"https://example.com/","status":200,"bytes":1234}'
echo '{"type":"Response","url":"https://example.com/missing","status":404,"bytes":10}'
while [ ! -f heartbeat-seen ]; do sleep 0.01; done
echo 'done' >&2
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"index.html"}'`)
	// The test environment of SDK v1.50 does not pass the worker options'
	// MaxHeartbeatThrottleInterval to its activity handler: it sends the
	// first heartbeat at once and holds the next ones back for 30 s. So the
	// first heartbeat must come after the runner has read the hook's
	// output; the runner follows output from 5 ms into the hook, and under
	// load that read can come later than the 20 ms tick of testOptions.
	opts := testOptions()
	opts.HeartbeatInterval = 500 * time.Millisecond
	f.withOptions(opts)
	env := f.env()
	var mu sync.Mutex
	var beats []activities.Progress
	// The hook waits until a heartbeat reports its first stderr line and
	// both responses: heartbeats carry live progress.
	seen := filepath.Join(f.archive, "snapshots", "abc123", "wget", "heartbeat-seen")
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p activities.Progress
		if details.Get(&p) != nil {
			return
		}
		mu.Lock()
		beats = append(beats, p)
		mu.Unlock()
		if p.StderrLines >= 1 && p.Responses == 2 {
			_ = os.WriteFile(seen, nil, 0o644)
		}
	})

	res, err := f.run(env, runInput(h))

	require.NoError(t, err)
	assert.Equal(t, model.StatusSucceeded, res.Status)
	var lines []string
	var responses []model.Response
	for _, e := range f.store.entries() {
		assert.Equal(t, h.Key(), e.Hook)
		switch e.Kind {
		case activities.LogStdout:
			lines = append(lines, e.Message)
		case activities.LogDownload:
			require.NotNil(t, e.Response)
			responses = append(responses, *e.Response)
		}
	}
	assert.Equal(t, []string{"fetching https://example.com/", "done"}, lines)
	assert.Equal(t, []model.Response{{URL: "https://example.com/", Status: 200, Bytes: 1234}, {URL: "https://example.com/missing", Status: 404, Bytes: 10}}, responses)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, beats)
	assert.Contains(t, beats, activities.Progress{Attempt: 1, StderrLines: 1, Records: 2, Responses: 2}, "a heartbeat reported what the hook had printed and its attempt")
	require.Len(t, f.store.results, 1, "the final result is recorded with its responses")
	rec := f.store.results[0]
	assert.Equal(t, runInput(h).Key, rec.Key)
	assert.Equal(t, model.StatusSucceeded, rec.Result.Status)
	assert.Equal(t, []model.Response{{Status: 200, Bytes: 1234}, {Status: 404, Bytes: 10}}, rec.Responses)
}

func TestRunHookCapsTheJobLogPerAttempt(t *testing.T) {
	f := newFixture(t)
	opts := testOptions()
	opts.LogLinesPerRun = 5
	f.withOptions(opts)
	h := f.hook("noisy", "on_Snapshot__10_noisy.sh", `i=0; while [ $i -lt 50 ]; do echo "line $i" >&2; i=$((i+1)); done`)

	_, err := f.run(f.env(), runInput(h))

	require.NoError(t, err)
	entries := f.store.entries()
	require.Len(t, entries, 6, "5 lines and one notice")
	assert.Equal(t, "line 4", entries[4].Message)
	assert.Contains(t, entries[5].Message, "capped at 5 entries")
}

// pidOf reads the pid a hook script wrote into its dir.
func pidOf(t *testing.T, f *fixture, plugin string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.archive, "snapshots", "abc123", plugin, "hook.pid.txt"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	return pid
}

func assertGone(t *testing.T, pid int) {
	t.Helper()
	err := syscall.Kill(pid, 0)
	assert.ErrorIs(t, err, syscall.ESRCH, "process %d still exists", pid)
}

func TestRunHookCancellation(t *testing.T) {
	// Each hook records its pid, says it is ready, and waits for SIGTERM.
	const wait = `echo $$ > hook.pid.txt; echo ready >&2; while :; do sleep 0.05; done`
	tests := []struct {
		name       string
		hookName   string
		body       string
		wantStatus model.Status // "" = cancelled error
		wantErr    string
	}{
		{"foreground hook is cancelled", "on_Snapshot__10_fg.sh", `trap 'exit 143' TERM; ` + wait, "", ""},
		{"background hook stopped by SIGTERM succeeds", "on_Snapshot__20_bg.bg.sh", `trap 'exit 0' TERM; ` + wait, model.StatusSucceeded, ""},
		{"background hook's own record wins", "on_Snapshot__20_bg.bg.sh",
			`trap 'echo "{\"type\":\"ArchiveResult\",\"status\":\"noresults\"}"; exit 0' TERM; ` + wait, model.StatusNoResults, ""},
		{"background hook that needs SIGKILL fails", "on_Snapshot__20_bg.bg.sh", `trap '' TERM; ` + wait, model.StatusFailed, "stopped by the seal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			h := f.hook("x", tt.hookName, tt.body)
			h.Grace = 300 * time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			env := f.envWithParent(ctx)
			go func() {
				f.store.waitLine(t, "ready")
				cancel()
			}()

			res, err := f.run(env, runInput(h))

			if tt.wantStatus == "" {
				require.Error(t, err)
				assert.True(t, temporal.IsCanceledError(err), "got %v", err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.wantStatus, res.Status, res.Error)
				assert.Contains(t, res.Error, tt.wantErr)
			}
			assertGone(t, pidOf(t, f, "x"))
		})
	}
}

func TestRunHookWorkerShutdownIsTransient(t *testing.T) {
	f := newFixture(t)
	h := f.hook("x", "on_Snapshot__10_fg.sh", `echo $$ > hook.pid.txt; trap 'exit 143' TERM; echo ready >&2; while :; do sleep 0.05; done`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := f.envWithParent(ctx)
	stop := make(chan struct{})
	env.SetWorkerStopChannel(stop)
	go func() {
		f.store.waitLine(t, "ready")
		close(stop)
		cancel()
	}()

	_, err := f.run(env, runInput(h))

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.ErrTypeTransient, appErr.Type())
	assert.Contains(t, appErr.Error(), "worker shut down")
	assertGone(t, pidOf(t, f, "x"))
}

func TestRunHookConfigErrorIsNotRetryable(t *testing.T) {
	f := newFixture(t)
	f.config("x", `{"type":"object","properties":{"X_DEPTH":{"type":"integer","minimum":1}}}`)
	h := f.hook("x", "on_Snapshot__10_x.sh", `exit 0`)
	in := runInput(h)
	in.Job.Overrides = map[string]string{"X_DEPTH": "zero"}

	_, err := f.run(f.env(), in)

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.ErrTypeConfig, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, appErr.Error(), "X_DEPTH")
}

func TestRunHookRejectsInvalidInput(t *testing.T) {
	f := newFixture(t)
	good := f.hook("x", "on_Snapshot__10_x.sh", `exit 0`)
	tests := []struct {
		name   string
		mutate func(*activities.RunHookInput)
		want   string
	}{
		{"no ident", func(in *activities.RunHookInput) { in.Job.Ident = "" }, "job ident must not be empty"},
		{"no url", func(in *activities.RunHookInput) { in.Job.URL = "" }, "job url must not be empty"},
		{"bad step", func(in *activities.RunHookInput) { in.Hook.Step = 12 }, "step 12: must be 0..9"},
		{"no path", func(in *activities.RunHookInput) { in.Hook.Path = "" }, "path must not be empty"},
		{"negative attempts before", func(in *activities.RunHookInput) { in.AttemptsBefore = -1 }, "attempts_before -1: must be >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := runInput(good)
			tt.mutate(&in)
			_, err := f.run(f.env(), in)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			assert.Equal(t, activities.ErrTypeInvalidInput, appErr.Type())
			assert.Contains(t, appErr.Error(), tt.want)
		})
	}
}

func TestDiscoverHooks(t *testing.T) {
	f := newFixture(t)
	f.hook("title", "on_Snapshot__50_title.sh", `exit 0`)
	f.hook("wget", "on_Snapshot__20_wget.bg.sh", `exit 0`)
	f.hook("off", "on_Snapshot__30_off.sh", `exit 0`)
	f.hook("bad", "on_Snapshot__40_bad.sh", `exit 0`)
	f.config("wget", `{"type":"object","properties":{"WGET_TIMEOUT":{"type":"integer","default":120}}}`)
	f.config("bad", `{"type":"object","properties":{"BAD_LEVEL":{"type":"integer","maximum":3}}}`)

	v, err := f.env().ExecuteActivity(f.acts.DiscoverHooks, activities.DiscoverInput{Ident: "abc123", SnapshotID: "abc123",
		Overrides: map[string]string{"OFF_ENABLED": "false", "BAD_LEVEL": "9"}})
	require.NoError(t, err)
	var p activities.Plan
	require.NoError(t, v.Get(&p))

	require.Len(t, p.Hooks, 4)
	byName := map[string]activities.HookSpec{}
	var order []string
	for _, h := range p.Hooks {
		byName[h.Plugin] = h
		order = append(order, h.Name)
	}
	assert.Equal(t, []string{"on_Snapshot__20_wget.bg.sh", "on_Snapshot__30_off.sh", "on_Snapshot__40_bad.sh", "on_Snapshot__50_title.sh"}, order)
	assert.True(t, byName["wget"].Background)
	assert.Equal(t, 120*time.Second, byName["wget"].Timeout)
	assert.Equal(t, 120*time.Second, byName["wget"].Grace, "a background hook's grace at seal is its timeout")
	assert.False(t, byName["off"].Enabled)
	assert.Contains(t, byName["bad"].ConfigError, "BAD_LEVEL")
	assert.Equal(t, 30*time.Second, byName["title"].Timeout)
	assert.Equal(t, 5*time.Second, byName["title"].Grace)
	assert.Equal(t, 5, byName["title"].Step)
}

// BenchmarkEngineRunNoop is the cost of one no-op hook attempt through the
// real runner (process group, runner files, output listing), without Temporal.
func BenchmarkEngineRunNoop(b *testing.B) {
	root := b.TempDir()
	dir := filepath.Join(root, "plugins", "noop")
	require.NoError(b, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "on_Snapshot__10_noop.sh")
	require.NoError(b, os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	e, err := New(Config{PluginDirs: []string{filepath.Join(root, "plugins")}, ArchiveDir: filepath.Join(root, "archive"),
		Env: []string{"PATH=" + os.Getenv("PATH")}, Timeout: time.Minute, Grace: time.Second, LineCap: 1 << 20})
	require.NoError(b, err)
	req := activities.RunRequest{Job: activities.Job{Ident: "bench", URL: "https://example.com/", SnapshotID: "bench"},
		Hook: activities.HookSpec{Plugin: "noop", Name: "on_Snapshot__10_noop.sh", Path: path, Step: 1, Timeout: time.Minute, Grace: time.Second, Enabled: true}, Attempt: 1}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := e.Run(context.Background(), req, nopSink{})
		require.NoError(b, err)
		require.Equal(b, model.StatusNoResults, out.Result.Status)
	}
}

// nopSink discards what a hook produces.
type nopSink struct{}

func (nopSink) StderrLine(string)       {}
func (nopSink) Response(model.Response) {}
func (nopSink) Record()                 {}

// A hook scheduled again after waiting on a busy host continues its attempt
// count: the result and the hook's EXTRA_CONTEXT say attempt 3, not 1.
func TestRunHookContinuesAttemptsAfterRequeue(t *testing.T) {
	f := newFixture(t)
	h := f.hook("probe", "on_Snapshot__10_probe.sh", `
printf '%s' "$EXTRA_CONTEXT" > extra.json
echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	in := runInput(h)
	in.AttemptsBefore = 2

	res, err := f.run(f.env(), in)

	require.NoError(t, err)
	assert.Equal(t, 3, res.Attempts)
	raw, err := os.ReadFile(filepath.Join(f.archive, "snapshots", "abc123", "probe", "extra.json"))
	require.NoError(t, err)
	var extra map[string]any
	require.NoError(t, json.Unmarshal(raw, &extra))
	assert.EqualValues(t, 3, extra["attempt"])
}

// A plugins root that does not exist is a configuration error: discovery
// reports it non-retryable, naming the root, so the job is not retried
// three times for something only the operator can fix.
func TestDiscoverHooksMissingRootIsNotRetried(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.RemoveAll(f.plugins))

	_, err := f.env().ExecuteActivity(f.acts.DiscoverHooks, activities.DiscoverInput{Ident: "abc123", SnapshotID: "abc123"})

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.True(t, appErr.NonRetryable(), "a missing plugins root must not be retried")
	assert.Equal(t, activities.ErrTypeConfig, appErr.Type())
	assert.Contains(t, appErr.Error(), "plugins root "+f.plugins+" does not exist")
}

// A background hook runs under its plugin's timeout, as a foreground hook
// does: one that hangs is stopped then (and retried, a timeout being
// transient). A .daemon.bg hook holds a session later hooks use and runs
// until the seal: its timeout does not stop it.
func TestBackgroundHookTimeout(t *testing.T) {
	const cfg = `{"type":"object","properties":{"SLOW_TIMEOUT":{"type":"integer","default":1}}}`
	t.Run("a hanging .bg hook is stopped at its timeout", func(t *testing.T) {
		f := newFixture(t)
		f.config("slow", cfg)
		h := f.hook("slow", "on_Snapshot__20_slow.bg.sh", `echo $$ > hook.pid.txt; echo started; while :; do sleep 0.05; done`)
		h.Grace = 300 * time.Millisecond

		_, err := f.run(f.env(), runInput(h))

		require.Error(t, err)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		assert.Equal(t, activities.ErrTypeTransient, appErr.Type())
		assert.Contains(t, appErr.Error(), "timed out after 1s")
		assertGone(t, pidOf(t, f, "slow"))
	})
	t.Run("a .daemon.bg hook outlives its timeout", func(t *testing.T) {
		f := newFixture(t)
		f.config("slow", cfg)
		h := f.hook("slow", "on_Snapshot__20_slow.daemon.bg.sh", `echo $$ > hook.pid.txt; echo started; sleep 2; echo '{"type":"ArchiveResult","status":"succeeded"}'`)

		res, err := f.run(f.env(), runInput(h))

		require.NoError(t, err)
		assert.Equal(t, model.StatusSucceeded, res.Status, res.Error)
	})
}
