//go:build dev

package devtest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/devserver"
	"github.com/archiveflow/archiveflow/internal/e2e"
	"github.com/archiveflow/archiveflow/internal/engine"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

const (
	queue    = "devtest"
	deadline = 3 * time.Minute
)

// nopStore accepts every write; it keeps the finishes and counts the
// job hash writes a crawl's start page must not make.
type nopStore struct {
	mu       sync.Mutex
	finishes []activities.FinishInput
	// hashWrites counts SetJobState, SetStep and ApplySettings calls;
	// results are the RecordResult inputs.
	hashWrites int
	results    []activities.ResultInput
}

func (s *nopStore) SetJobState(context.Context, activities.JobStateInput) error { return s.hashWrite() }
func (s *nopStore) SetStep(context.Context, activities.StepInput) error         { return s.hashWrite() }
func (s *nopStore) Heartbeat(context.Context, string) error                     { return nil }
func (s *nopStore) SetArchive(context.Context, activities.ArchiveInput) error   { return nil }
func (s *nopStore) RecordResult(_ context.Context, in activities.ResultInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, in)
	return nil
}
func (s *nopStore) ApplySettings(context.Context, activities.SettingsInput) error {
	return s.hashWrite()
}

func (s *nopStore) hashWrite() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hashWrites++
	return nil
}
func (s *nopStore) AppendLog(context.Context, string, string, int, []activities.LogEntry) error {
	return nil
}
func (s *nopStore) ReopenJob(context.Context, activities.ReopenInput) error   { return nil }
func (s *nopStore) SetRetryAt(context.Context, activities.RetryAtInput) error { return nil }
func (s *nopStore) FinishJob(_ context.Context, in activities.FinishInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishes = append(s.finishes, in)
	return nil
}

type env struct {
	t       testing.TB
	c       client.Client
	plugins string
	archive string
	events  string
	queue   string
	store   *nopStore
	hosts   map[string]func() // host name → stop
	// hostSteps builds inputs with SnapshotInput.HostSteps.
	hostSteps bool
}

// server is the tests' Temporal server, started on first use in a process
// of its own (e2e.StartServerProcess: this binary is built with -race).
var (
	serverOnce sync.Once
	server     *e2e.ServerProcess
	serverErr  error
)

// TestMain stops the server and removes its binary after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if server != nil {
		if err := server.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop Temporal dev server: %v\n", err)
		}
	}
	e2e.RemoveBuilds()
	os.Exit(code)
}

func start(t testing.TB) *env {
	t.Helper()
	serverOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), devserver.DefaultStartTimeout)
		defer cancel()
		server, serverErr = e2e.StartServerProcess(ctx)
	})
	require.NoError(t, serverErr)
	c, err := client.Dial(client.Options{HostPort: server.HostPort(), Namespace: server.Namespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	root := t.TempDir()
	e := &env{t: t, c: c, plugins: filepath.Join(root, "plugins"), archive: filepath.Join(root, "archive"),
		events: filepath.Join(root, "events.log"), store: &nopStore{}, queue: queue + "-" + strings.ReplaceAll(t.Name(), "/", "-"), hosts: map[string]func(){}}
	e.addHost("host-1")
	return e
}

// addHost starts one simulated worker host: a worker on the pool's queue
// (workflows, ClaimHost, Redis writes) and one on its own host queue. The
// returned function stops both, as a host that goes away.
func (e *env) addHost(name string) (stop func()) {
	e.t.Helper()
	stop, _ = e.addHostBeating(name, 200*time.Millisecond)
	return stop
}

// addHostBeating is addHost with the hook activities' heartbeat interval;
// stopShared stops only its worker on the pool's queue.
func (e *env) addHostBeating(name string, heartbeat time.Duration) (stop, stopShared func()) {
	e.t.Helper()
	eng, err := engine.New(engine.Config{PluginDirs: []string{e.plugins}, ArchiveDir: e.archive,
		Env:     []string{"PATH=" + os.Getenv("PATH"), "EVENTS=" + e.events, "HOST_NAME=" + name},
		PassEnv: []string{"EVENTS", "HOST_NAME"},
		Timeout: time.Minute, Grace: 2 * time.Second, LineCap: 1 << 20, Log: zap.NewNop()})
	require.NoError(e.t, err)
	hq := e.queue + "@" + name
	poolActs, err := activities.NewPool(e.store, nil, eng, hq, zap.NewNop())
	require.NoError(e.t, err)
	hostActs, err := activities.NewHost(eng, eng, eng, e.store, zap.NewNop(), activities.Options{
		HeartbeatInterval: heartbeat, JobHeartbeatInterval: 5 * time.Second, SettingsPollInterval: 2 * time.Second,
		LogFlushInterval: time.Second, LogBatch: 200, LogLinesPerRun: 20000, LogLineBytes: 4096,
		ResultFieldBytes: 8 << 10, ResponsesPerRun: 1 << 20,
	})
	require.NoError(e.t, err)
	opts := worker.Options{MaxHeartbeatThrottleInterval: time.Second}
	shared := worker.New(e.c, e.queue, opts)
	workflows.Register(shared)
	shared.RegisterActivity(poolActs)
	host := worker.New(e.c, hq, opts)
	host.RegisterActivity(hostActs)
	require.NoError(e.t, shared.Start())
	require.NoError(e.t, host.Start())
	var once, onceShared sync.Once
	stopShared = func() { onceShared.Do(shared.Stop) }
	stop = func() {
		once.Do(func() {
			host.Stop()
			stopShared()
		})
	}
	e.t.Cleanup(stop)
	e.hosts[name] = stop
	return stop, stopShared
}

// hook writes an executable hook that logs start/end to $EVENTS around body.
func (e *env) hook(plugin, name, body string) {
	e.t.Helper()
	dir := filepath.Join(e.plugins, plugin)
	require.NoError(e.t, os.MkdirAll(dir, 0o755))
	script := "#!/bin/sh\necho \"start " + name + "\" >> \"$EVENTS\"\n" + body + "\nrc=$?\necho \"end " + name + "\" >> \"$EVENTS\"\nexit $rc\n"
	require.NoError(e.t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755))
}

func (e *env) lines() []string {
	data, err := os.ReadFile(e.events)
	require.NoError(e.t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func pos(lines []string, line string) int {
	for i, l := range lines {
		if l == line {
			return i
		}
	}
	return -1
}

func (e *env) input(ident string, concurrency int) workflows.SnapshotInput {
	return workflows.SnapshotInput{
		Version:         workflows.InputVersion,
		Job:             activities.Job{Ident: ident, URL: "https://example.com/" + ident, SnapshotID: ident},
		Pool:            "devtest",
		TaskQueue:       e.queue,
		Settings:        model.Settings{Concurrency: concurrency},
		SequentialSteps: []int{5},
		Retry: workflows.RetryPolicies{Default: workflows.Retry{
			InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1, MaximumInterval: 100 * time.Millisecond, MaximumAttempts: 3,
		}},
		Timing: workflows.Timing{HeartbeatTimeout: 5 * time.Second, StartMargin: 30 * time.Second, ReadyMargin: 30 * time.Second, HostScheduleToStart: 30 * time.Second,
			BackgroundMaxRun: 24 * time.Hour, MaxClaims: 3},
		HostSteps: e.hostSteps,
	}
}

func (e *env) execute(in workflows.SnapshotInput, during func(client.WorkflowRun)) workflows.Status {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.Job.Ident, TaskQueue: e.queue, StaticSummary: in.Job.URL}, workflows.SnapshotWorkflow, in)
	require.NoError(e.t, err)
	if during != nil {
		during(run)
	}
	var st workflows.Status
	if err := run.Get(ctx, &st); err != nil {
		// A job that failed or was aborted ends its workflow so, with its
		// Status as the error's details.
		var ok bool
		st, ok = workflows.EndStatus(err)
		require.True(e.t, ok, "workflow error without a Status: %v", err)
	}
	e.record(ctx, run)
	return st
}

// record replays the run's history and, when asked, stores it as testdata.
func (e *env) record(ctx context.Context, run client.WorkflowRun) {
	e.t.Helper()
	it := e.c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, 0)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		h.Events = append(h.Events, ev)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflows.SnapshotWorkflow)
	r.RegisterWorkflow(workflows.BackgroundHookWorkflow)
	require.NoError(e.t, r.ReplayWorkflowHistory(nil, h), "replay of the run just recorded")
	if os.Getenv("ARCHIVEFLOW_RECORD_HISTORIES") != "1" || !strings.HasPrefix(e.t.Name(), "Test") {
		return
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(e.t, err)
	// Histories are named after the input version that recorded them, so
	// re-recording never replaces those of earlier versions: they keep
	// proving that old runs replay.
	name := fmt.Sprintf("%s.v%d.json", strings.ReplaceAll(e.t.Name(), "/", "_"), workflows.InputVersion)
	require.NoError(e.t, os.WriteFile(filepath.Join("..", "testdata", name), data, 0o644))
}

// awaitPlan waits until the run's status lists hooks hooks (its plan).
func (e *env) awaitPlan(ctx context.Context, run client.WorkflowRun, hooks int) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		v, err := e.c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.QueryStatus)
		if err != nil {
			return false
		}
		var st workflows.Status
		return v.Get(&st) == nil && len(st.Hooks) == hooks
	}, deadline, 50*time.Millisecond, "the run's status lists its %d hooks", hooks)
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestSnapshotOnDevServer(t *testing.T) { testSnapshot(t, false) }

// TestSnapshotHostStepsOnDevServer runs it with host steps (SnapshotInput.HostSteps).
func TestSnapshotHostStepsOnDevServer(t *testing.T) { testSnapshot(t, true) }

func testSnapshot(t *testing.T, hostSteps bool) {
	e := start(t)
	e.hostSteps = hostSteps
	e.hook("a", "on_Snapshot__00_a.sh", `true`)
	e.hook("b", "on_Snapshot__10_b.sh", `sleep 0.3`)
	e.hook("c", "on_Snapshot__11_c.sh", `sleep 0.3`)
	e.hook("watch", "on_Snapshot__20_watch.bg.sh", `echo $$ > pid; trap 'echo TERM >> "$EVENTS"; exit 0' TERM; echo watching; while :; do sleep 0.05; done`)
	e.hook("flaky", "on_Snapshot__30_flaky.sh", `n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; [ $n -ge 3 ] || exit 1; echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	e.hook("always", "on_Snapshot__31_always.sh", `exit 1`)
	e.hook("soft", "on_Snapshot__32_soft.sh", `echo '{"type":"ArchiveResult","status":"failed","error":"no title"}'`)
	e.hook("d", "on_Snapshot__60_d.sh", `true`)
	e.hook("z", "on_Snapshot__90_z.sh", `true`)

	st := e.execute(e.input("devtestsnapshot", 4), nil)

	assert.Equal(t, model.StateFinished, st.State)
	res := map[string]model.ArchiveResult{}
	for _, h := range st.Hooks {
		require.NotNil(t, h.Result, h.Hook)
		res[h.Plugin] = *h.Result
	}
	assert.Equal(t, model.StatusSucceeded, res["flaky"].Status)
	assert.Equal(t, 3, res["flaky"].Attempts)
	assert.Equal(t, model.StatusFailed, res["always"].Status)
	assert.Equal(t, 3, res["always"].Attempts)
	assert.Equal(t, model.StatusFailed, res["soft"].Status)
	assert.Equal(t, 1, res["soft"].Attempts)
	assert.Equal(t, model.StatusSucceeded, res["watch"].Status, "stopped by the seal's SIGTERM, exit 0: %s", res["watch"].Error)

	l := e.lines()
	assert.Less(t, pos(l, "start on_Snapshot__10_b.sh"), pos(l, "end on_Snapshot__11_c.sh"), "b and c overlap")
	assert.Less(t, pos(l, "start on_Snapshot__11_c.sh"), pos(l, "end on_Snapshot__10_b.sh"), "b and c overlap")
	assert.Less(t, pos(l, "end on_Snapshot__11_c.sh"), pos(l, "start on_Snapshot__30_flaky.sh"))
	assert.Less(t, pos(l, "start on_Snapshot__20_watch.bg.sh"), pos(l, "start on_Snapshot__60_d.sh"))
	assert.Less(t, pos(l, "end on_Snapshot__90_z.sh"), pos(l, "TERM"), "background hook is stopped at the seal")
	pid, err := os.ReadFile(filepath.Join(e.archive, "snapshots", "devtestsnapshot", "watch", "pid"))
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(pid)))
	require.NoError(t, err)
	assert.False(t, alive(n), "no hook process survives the snapshot")

	// The seal wrote the index with every final result, the background
	// hook's (stopped at the seal) among them.
	index, err := os.ReadFile(filepath.Join(e.archive, "snapshots", "devtestsnapshot", "index.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(index)), "\n")
	require.Len(t, lines, 1+len(st.Hooks), "the Snapshot, then one ArchiveResult per hook")
	indexed := map[string]map[string]any{}
	for _, l := range lines[1:] {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		indexed[rec["plugin"].(string)] = rec
	}
	assert.Equal(t, "succeeded", indexed["watch"]["status"], "the background hook's final status")
	assert.Equal(t, 3.0, indexed["flaky"]["attempts"])
}

func TestAbortOnDevServer(t *testing.T) { testAbort(t, false) }

// TestAbortHostStepsOnDevServer runs it with host steps (SnapshotInput.HostSteps).
func TestAbortHostStepsOnDevServer(t *testing.T) { testAbort(t, true) }

func testAbort(t *testing.T, hostSteps bool) {
	e := start(t)
	e.hostSteps = hostSteps
	e.hook("slow", "on_Snapshot__10_slow.sh", `echo $$ > pid; trap 'echo TERM >> "$EVENTS"; exit 143' TERM; while :; do sleep 0.05; done`)
	e.hook("next", "on_Snapshot__20_next.sh", `true`)

	st := e.execute(e.input("devtestabort", 2), func(run client.WorkflowRun) {
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(e.archive, "snapshots", "devtestabort", "slow", "pid"))
			return err == nil
		}, deadline, 20*time.Millisecond)
		require.NoError(t, e.c.SignalWorkflow(context.Background(), run.GetID(), run.GetRunID(), workflows.SignalAbort, workflows.AbortRequest{Reason: "test"}))
	})

	assert.Equal(t, model.StateAborted, st.State)
	assert.Contains(t, e.lines(), "TERM", "the running hook got SIGTERM")
	assert.NotContains(t, e.lines(), "start on_Snapshot__20_next.sh")
	e.store.mu.Lock()
	defer e.store.mu.Unlock()
	require.Len(t, e.store.finishes, 1)
	assert.Equal(t, model.StateAborted, e.store.finishes[0].State)
}

func TestPauseAndSettingsOnDevServer(t *testing.T) { testPauseAndSettings(t, false) }

// TestPauseAndSettingsHostStepsOnDevServer runs it with host steps (SnapshotInput.HostSteps).
func TestPauseAndSettingsHostStepsOnDevServer(t *testing.T) { testPauseAndSettings(t, true) }

func testPauseAndSettings(t *testing.T, hostSteps bool) {
	e := start(t)
	e.hostSteps = hostSteps
	e.hook("a", "on_Snapshot__10_a.sh", `true`)

	st := e.execute(e.input("devtestpause", 0), func(run client.WorkflowRun) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		e.awaitPlan(ctx, run, 1)
		h, err := e.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: run.GetID(), RunID: run.GetRunID(),
			UpdateName: workflows.UpdateSetSettings, Args: []any{model.Settings{Concurrency: 1}}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		var version int
		require.NoError(t, h.Get(ctx, &version))
		assert.Equal(t, 1, version)
	})

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 1, st.Settings.Concurrency)
}

// BenchmarkSnapshot20NoopHooks measures a snapshot of 20 no-op hooks over 10
// steps (two per step, concurrency 1 so it is comparable with a shell loop)
// against running the same executables one after another directly: the
// design target is a ratio <= 1.2 (DESIGN.md §7).
func BenchmarkSnapshot20NoopHooks(b *testing.B) {
	e := start(b)
	var paths []string
	for step := range 10 {
		for i := range 2 {
			name := "on_Snapshot__" + strconv.Itoa(step) + strconv.Itoa(i) + "_noop.sh"
			plugin := "p" + strconv.Itoa(step) + strconv.Itoa(i)
			dir := filepath.Join(e.plugins, plugin)
			require.NoError(b, os.MkdirAll(dir, 0o755))
			path := filepath.Join(dir, name)
			require.NoError(b, os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755))
			paths = append(paths, path)
		}
	}
	// Warm up: the first run pays for worker pollers and caches.
	e.execute(e.input("benchwarm", 1), nil)

	b.ResetTimer()
	var workflowTime time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		st := e.execute(e.input("bench"+strconv.Itoa(i), 1), nil)
		workflowTime += time.Since(t0)
		require.Equal(b, model.StateFinished, st.State)
	}
	b.StopTimer()
	var direct time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		for _, p := range paths {
			require.NoError(b, exec.Command(p, "--url=https://example.com/").Run())
		}
		direct += time.Since(t0)
	}
	perSnapshot := workflowTime / time.Duration(b.N)
	perDirect := direct / time.Duration(b.N)
	b.ReportMetric(float64(perSnapshot.Milliseconds()), "ms/snapshot")
	b.ReportMetric(float64(perDirect.Milliseconds()), "ms/direct")
	b.ReportMetric(float64(perSnapshot-perDirect)/float64(time.Millisecond)/20, "ms-overhead/hook")
	b.ReportMetric(float64(perSnapshot)/float64(perDirect), "ratio")
}

func TestHostLossOnDevServer(t *testing.T) {
	e := start(t)
	release := filepath.Join(e.archive, "release")
	e.hook("a", "on_Snapshot__00_a.sh", `echo "ran on $HOST_NAME" >> "$EVENTS"`)
	e.hook("slow", "on_Snapshot__10_slow.sh", `echo "slow on $HOST_NAME" >> "$EVENTS"; while [ ! -f "`+release+`" ]; do sleep 0.05; done`)
	in := e.input("devtesthostloss", 1)
	in.Timing.HostScheduleToStart = 3 * time.Second
	// Only host-1 runs until the slow hook started there; then host-1 goes
	// away and host-2 comes up: the snapshot must be re-claimed by host-2.
	st := e.execute(in, func(client.WorkflowRun) {
		require.Eventually(t, func() bool {
			data, err := os.ReadFile(e.events)
			return err == nil && strings.Contains(string(data), "slow on host-1")
		}, deadline, 20*time.Millisecond)
		e.hosts["host-1"]()
		require.NoError(t, os.WriteFile(release, nil, 0o644))
		e.addHost("host-2")
	})

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 2, st.Claims)
	assert.Equal(t, in.TaskQueue+"@host-2", st.HostQueue)
	l := e.lines()
	assert.Contains(t, l, "ran on host-2", "step 0 runs again on the new host")
	assert.Contains(t, l, "slow on host-2")
	for _, h := range st.Hooks {
		require.NotNil(t, h.Result, h.Hook)
		assert.NotEqual(t, model.StatusFailed, h.Result.Status, "%s: %s", h.Hook, h.Result.Error)
	}
}

// A job that failed ends its workflow Failed, so list queries and the Web
// UI see it; the Status still comes with it.
func TestFailedJobOnDevServer(t *testing.T) {
	e := start(t)
	e.hook("soft", "on_Snapshot__10_soft.sh", `echo '{"type":"ArchiveResult","status":"failed","error":"no title"}'`)

	var run client.WorkflowRun
	st := e.execute(e.input("devtestfailed", 1), func(r client.WorkflowRun) { run = r })

	assert.Equal(t, model.StateFailed, st.State)
	assert.Equal(t, "every hook failed", st.Error)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	err := run.Get(ctx, nil)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, workflows.ErrTypeJobFailed, appErr.Type())
	require.Eventually(t, func() bool {
		resp, err := e.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`WorkflowId = %q AND ExecutionStatus = "Failed"`, run.GetID()),
		})
		return err == nil && len(resp.GetExecutions()) == 1
	}, deadline, 50*time.Millisecond, "a list query for failed workflows finds the failed job")
}

// A hook whose heartbeat times out asks at once whether its host is alive
// (InputV2); a host that cannot be vouched for (here: no host registry) is
// lost and the snapshot is re-claimed without waiting out the host timeout.
func TestHeartbeatTimeoutOnDevServer(t *testing.T) { testHeartbeatTimeout(t, false) }

// TestHeartbeatTimeoutHostStepsOnDevServer runs it with host steps (SnapshotInput.HostSteps).
func TestHeartbeatTimeoutHostStepsOnDevServer(t *testing.T) { testHeartbeatTimeout(t, true) }

func testHeartbeatTimeout(t *testing.T, hostSteps bool) {
	e := start(t)
	e.hostSteps = hostSteps
	e.hosts["host-1"]() // replaced by a host that heartbeats too rarely
	_, stopShared := e.addHostBeating("host-1", time.Minute)
	e.hook("a", "on_Snapshot__00_a.sh", `true`)
	e.hook("slow", "on_Snapshot__10_slow.sh", `echo "slow on $HOST_NAME" >> "$EVENTS"; if [ "$HOST_NAME" = host-1 ]; then sleep 30; fi`)
	in := e.input("devtestheartbeat", 1)
	in.Timing.HeartbeatTimeout = time.Second
	in.Timing.HostScheduleToStart = time.Hour // a timeout of the host queue is not what ends the claim
	st := e.execute(in, func(client.WorkflowRun) {
		require.Eventually(t, func() bool {
			data, err := os.ReadFile(e.events)
			return err == nil && strings.Contains(string(data), "slow on host-1")
		}, deadline, 20*time.Millisecond)
		stopShared() // the next claim goes to host-2
		e.addHost("host-2")
	})

	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 2, st.Claims)
	assert.Equal(t, in.TaskQueue+"@host-2", st.HostQueue)
	assert.Contains(t, e.lines(), "slow on host-2")
}

// A retry (SnapshotInput.Rerun) runs only the hook that failed; its
// history is recorded for the replay test.
func TestRerunOnDevServer(t *testing.T) {
	e := start(t)
	marker := filepath.Join(t.TempDir(), "marker")
	e.hook("ok", "on_Snapshot__10_ok.sh", `true`)
	e.hook("flaky", "on_Snapshot__20_flaky.sh", `[ -e "`+marker+`" ] || echo '{"type":"ArchiveResult","status":"failed","error":"no marker"}'`)
	in := e.input("devtestrerun", 1)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.Job.Ident, TaskQueue: e.queue}, workflows.SnapshotWorkflow, in)
	require.NoError(t, err)
	var st workflows.Status
	require.NoError(t, run.Get(ctx, &st))
	require.Equal(t, 1, st.Counters.Failed)

	require.NoError(t, os.WriteFile(marker, nil, 0o644))
	rerun, err := workflows.RerunOf(run.GetRunID(), st)
	require.NoError(t, err)
	in.Rerun = rerun
	st = e.execute(in, nil)
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, 2, st.Counters.NoResults, "both hooks exit 0 without a record")
	assert.Zero(t, st.Counters.Failed)
	assert.Equal(t, []string{"start on_Snapshot__10_ok.sh", "end on_Snapshot__10_ok.sh",
		"start on_Snapshot__20_flaky.sh", "end on_Snapshot__20_flaky.sh",
		"start on_Snapshot__20_flaky.sh", "end on_Snapshot__20_flaky.sh"}, e.lines(), "only the failed hook ran again")
}

// A title a hook set is in the finished run's memo (key "title"), which
// the Web UI shows after the run ends.
func TestTitleMemoOnDevServer(t *testing.T) {
	e := start(t)
	e.hook("title", "on_Snapshot__10_title.sh", `echo '{"type":"Snapshot","title":"Tïtle from a hook"}'; echo '{"type":"ArchiveResult","status":"succeeded"}'`)

	var run client.WorkflowRun
	st := e.execute(e.input("devtesttitle", 1), func(r client.WorkflowRun) { run = r })
	require.Equal(t, model.StateFinished, st.State, st.Error)

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	desc, err := e.c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	field := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()["title"]
	require.NotNil(t, field, "the memo has the title")
	var title string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(field, &title))
	assert.Equal(t, "Tïtle from a hook", title)
}

// A background hook that printed (so it was ready), ended its attempt
// transiently and was sealed while its retry policy waited to run it
// again is failed, saying so, not "not started before the seal"
// (sealedBetweenAttempts).
func TestBackgroundSealedBetweenAttemptsOnDevServer(t *testing.T) {
	e := start(t)
	e.hook("fetch", "on_Snapshot__60_fetch.bg.sh", `echo 'fetching'; exit 1`)
	e.hook("b", "on_Snapshot__70_b.sh", `true`)
	in := e.input("devtestsealedretry", 1)
	in.Retry.PerPlugin = map[string]workflows.Retry{"fetch": {InitialInterval: time.Hour, BackoffCoefficient: 1, MaximumInterval: time.Hour, MaximumAttempts: 3}}

	st := e.execute(in, nil)

	require.Equal(t, model.StateFinished, st.State, st.Error)
	var res *model.ArchiveResult
	for _, hs := range st.Hooks {
		if hs.Hook == "on_Snapshot__60_fetch.bg.sh" {
			res = hs.Result
		}
	}
	require.NotNil(t, res)
	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Equal(t, workflows.SealedBetweenAttempts, res.Error)
}
