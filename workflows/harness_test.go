package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// The workflow tests run the real Activities with a fake discoverer, runner
// and store: what they prove is the workflow's orchestration, observed
// through the order of the fake runner's events and the fake store's writes.

const (
	testIdent     = "1a2b3c"
	testURL       = "https://example.com/"
	testPool      = "default"
	testQueue     = "archiveflow-default"
	testHostQueue = "archiveflow-default@host-1"
	// barrierWait bounds how long a fake hook waits for its peers; it is
	// generous for a loaded machine and is never reached when the
	// workflow behaves.
	barrierWait = 20 * time.Second
)

// behaviour is what a fake hook does for one attempt.
type behaviour func(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error)

type event struct {
	hook    string
	kind    string // start, end, cancelled
	attempt int
}

// fakeRunner runs behaviours and records ordered events.
type fakeRunner struct {
	mu         sync.Mutex
	behaviours map[string]behaviour
	events     []event
	running    int
	maxRunning int
	settings   map[string]model.Settings
	// silent are background hooks that never print (never ready).
	silent map[string]bool
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{behaviours: map[string]behaviour{}, settings: map[string]model.Settings{}, silent: map[string]bool{}}
}

func (f *fakeRunner) on(hook string, b behaviour) { f.behaviours[hook] = b }

func (f *fakeRunner) Run(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
	f.mu.Lock()
	b, ok := f.behaviours[req.Hook.Name]
	f.events = append(f.events, event{hook: req.Hook.Name, kind: "start", attempt: req.Attempt})
	f.settings[req.Hook.Name] = req.Settings
	if !req.Hook.Background {
		f.running++
		f.maxRunning = max(f.maxRunning, f.running)
	}
	ready := req.OnReady != nil && !f.silent[req.Hook.Name]
	f.mu.Unlock()
	if ready {
		// A background hook that prints at once is ready at once.
		req.OnReady()
	}
	if !ok {
		b = succeed
	}
	out, err := b(ctx, req, sink)
	f.mu.Lock()
	kind := "end"
	if ctx.Err() != nil {
		kind = "cancelled"
	}
	f.events = append(f.events, event{hook: req.Hook.Name, kind: kind, attempt: req.Attempt})
	if !req.Hook.Background {
		f.running--
	}
	f.mu.Unlock()
	return out, err
}

func (f *fakeRunner) snapshot() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]event(nil), f.events...)
}

// index returns the position of the first event of hook of kind, or -1.
func index(events []event, hook, kind string) int {
	for i, e := range events {
		if e.hook == hook && e.kind == kind {
			return i
		}
	}
	return -1
}

func count(events []event, hook, kind string) int {
	n := 0
	for _, e := range events {
		if e.hook == hook && e.kind == kind {
			n++
		}
	}
	return n
}

func succeed(context.Context, activities.RunRequest, activities.Sink) (activities.Outcome, error) {
	return activities.Outcome{Result: model.ArchiveResult{Status: model.StatusSucceeded, OutputStr: "ok"}}, nil
}

func transient(context.Context, activities.RunRequest, activities.Sink) (activities.Outcome, error) {
	return activities.Outcome{Transient: true, Error: "exit code 1 without a result record", Result: model.ArchiveResult{ExitCode: 1}}, nil
}

// failFirst fails transiently n times, then succeeds.
func failFirst(n int) behaviour {
	return func(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
		if req.Attempt <= n {
			return transient(ctx, req, sink)
		}
		return succeed(ctx, req, sink)
	}
}

func softFail(context.Context, activities.RunRequest, activities.Sink) (activities.Outcome, error) {
	return activities.Outcome{Result: model.ArchiveResult{Status: model.StatusFailed, Error: "no title found"}}, nil
}

// untilCancelled blocks until the attempt is cancelled, then reports what
// the runner reports for a hook stopped by SIGTERM: a foreground hook's
// stop is transient, a background hook's (the seal) succeeded.
func untilCancelled(ctx context.Context, req activities.RunRequest, _ activities.Sink) (activities.Outcome, error) {
	<-ctx.Done()
	if req.Hook.Background {
		return activities.Outcome{Result: model.ArchiveResult{Status: model.StatusSucceeded, ExitCode: 143}}, nil
	}
	return activities.Outcome{Transient: true, Error: "terminated", Result: model.ArchiveResult{ExitCode: 143}}, nil
}

// barrier lets each of n hooks proceed only once all n have started: it
// proves they overlap. It fails the hook when they do not within the wait.
type barrier struct {
	mu      sync.Mutex
	n       int
	started int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) behaviour(ctx context.Context, req activities.RunRequest, sink activities.Sink) (activities.Outcome, error) {
	b.mu.Lock()
	b.started++
	if b.started == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return succeed(ctx, req, sink)
	case <-time.After(barrierWait):
		return activities.Outcome{Result: model.ArchiveResult{Status: model.StatusFailed, Error: "peers did not start"}}, nil
	case <-ctx.Done():
		return activities.Outcome{Transient: true, Error: "cancelled"}, nil
	}
}

// fakeDiscoverer returns a fixed plan.
type fakeDiscoverer struct{ plan activities.Plan }

func (d fakeDiscoverer) Discover(context.Context, activities.DiscoverInput) (activities.Plan, error) {
	return d.plan, nil
}

// fakeSealer records every seal.
type fakeSealer struct {
	mu    sync.Mutex
	seals []activities.SealInput
}

func (f *fakeSealer) Seal(_ context.Context, in activities.SealInput) (activities.SealReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seals = append(f.seals, in)
	rep := activities.SealReport{Files: []string{"/archive/snapshots/" + in.Job.SnapshotID + "/index.jsonl"}}
	if !in.Job.CrawlPage {
		rep.WACZ, rep.WACZBytes = "/archive/snapshots/"+in.Job.SnapshotID+"/"+in.Job.Ident+".wacz", 10
	}
	return rep, nil
}

func (f *fakeSealer) all() []activities.SealInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]activities.SealInput(nil), f.seals...)
}

// fakeStore records every write.
type fakeStore struct {
	mu       sync.Mutex
	states   []model.JobState
	steps    []int
	results  map[string]activities.ResultInput
	finishes []activities.FinishInput
	settings []activities.SettingsInput
	reopens  []activities.ReopenInput
	retryAts []activities.RetryAtInput
	calls    int
	reads    int // Settings calls
	// archives are SetArchive's inputs, each with the finishes written
	// before it.
	archives []archiveWrite
	// failResults fails that many RecordResult calls first (Redis down).
	failResults int
}

func newFakeStore() *fakeStore {
	return &fakeStore{results: map[string]activities.ResultInput{}}
}

// recorded is the status of each hook result written, by hook name.
func (s *fakeStore) recorded() map[string]model.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]model.Status{}
	for _, in := range s.results {
		out[in.Result.Hook] = in.Result.Status
	}
	return out
}

func (s *fakeStore) SetJobState(_ context.Context, in activities.JobStateInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, in.State)
	return nil
}

func (s *fakeStore) SetStep(_ context.Context, in activities.StepInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, in.Step)
	return nil
}

// RecordResult is idempotent by key, as internal/rkeys is: the first
// write of a key counts, repeats change nothing.
func (s *fakeStore) RecordResult(_ context.Context, in activities.ResultInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.failResults > 0 {
		s.failResults--
		return errors.New("redis: connection refused")
	}
	if _, dup := s.results[in.Key]; dup {
		return nil
	}
	s.results[in.Key] = in
	return nil
}

func (s *fakeStore) Heartbeat(context.Context, string) error { return nil }

// archiveWrite is one SetArchive call and how many finishes came before.
type archiveWrite struct {
	in             activities.ArchiveInput
	finishedBefore int
}

func (s *fakeStore) SetArchive(_ context.Context, in activities.ArchiveInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.archives = append(s.archives, archiveWrite{in: in, finishedBefore: len(s.finishes)})
	return nil
}

func (s *fakeStore) FinishJob(_ context.Context, in activities.FinishInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishes = append(s.finishes, in)
	return nil
}

func (s *fakeStore) ReopenJob(_ context.Context, in activities.ReopenInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reopens = append(s.reopens, in)
	return nil
}

func (s *fakeStore) SetRetryAt(_ context.Context, in activities.RetryAtInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAts = append(s.retryAts, in)
	return nil
}

func (s *fakeStore) ApplySettings(_ context.Context, in activities.SettingsInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings = append(s.settings, in)
	return nil
}

// Settings is the harness's activities.SettingsReader: the settings the
// workflow last published (ApplySettings); before any, an error (RunSteps
// keeps the input's).
func (s *fakeStore) Settings(context.Context) (model.Settings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if len(s.settings) == 0 {
		return model.Settings{}, errors.New("no settings published yet")
	}
	return s.settings[len(s.settings)-1].Settings, nil
}

func (s *fakeStore) settingsReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

func (s *fakeStore) AppendLog(context.Context, string, string, int, []activities.LogEntry) error {
	return nil
}

// hook builds a plan entry from a file name like on_Snapshot__21_x.bg.sh.
func hook(name string) activities.HookSpec {
	i := strings.Index(name, "__")
	step := int(name[i+2] - '0')
	plugin := strings.TrimSuffix(strings.SplitN(name[i+5:], ".", 2)[0], "")
	return activities.HookSpec{
		Plugin:     plugin,
		Name:       name,
		Path:       "/plugins/" + plugin + "/" + name,
		Step:       step,
		Background: strings.Contains(name, ".bg."),
		Timeout:    30 * time.Second,
		Grace:      5 * time.Second,
		Enabled:    true,
	}
}

func plan(names ...string) activities.Plan {
	p := activities.Plan{}
	for _, n := range names {
		p.Hooks = append(p.Hooks, hook(n))
	}
	return p
}

type harness struct {
	testsuite.WorkflowTestSuite
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	runner *fakeRunner
	store  *fakeStore
	sealer *fakeSealer
	pool   *activities.PoolActivities
	host   *activities.HostActivities
	// endErr is the workflow's error of the last run: a failed or aborted
	// job's (InputV2), nil for a finished one.
	endErr error
}

func newHarness(t *testing.T, p activities.Plan) *harness {
	t.Helper()
	h := &harness{t: t, runner: newFakeRunner(), store: newFakeStore(), sealer: &fakeSealer{}}
	h.SetLogger(testLogger{t})
	h.env = h.NewTestWorkflowEnvironment()
	h.env.SetTestTimeout(60 * time.Second)
	// As the workers do: heartbeats (and so cancellations) are not held
	// back for 80% of the heartbeat timeout.
	h.env.SetWorkerOptions(worker.Options{MaxHeartbeatThrottleInterval: 50 * time.Millisecond})
	var err error
	h.pool, err = activities.NewPool(h.store, nil, fakeDiscoverer{plan: p}, testHostQueue, zap.NewNop())
	require.NoError(t, err)
	h.host, err = activities.NewHost(fakeDiscoverer{plan: p}, h.runner, h.sealer, h.store, zap.NewNop(), activities.Options{
		HeartbeatInterval: 20 * time.Millisecond, JobHeartbeatInterval: time.Second, SettingsPollInterval: 2 * time.Second,
		LogFlushInterval: 50 * time.Millisecond, LogBatch: 200, LogLinesPerRun: 20000, LogLineBytes: 4096,
		ResultFieldBytes: 8 << 10, ResponsesPerRun: 1 << 20, Settings: h.store, Ready: envReady{h},
	})
	require.NoError(t, err)
	h.env.RegisterWorkflow(SnapshotWorkflow)
	h.env.RegisterWorkflow(BackgroundHookWorkflow)
	h.env.RegisterActivity(h.pool)
	h.env.RegisterActivity(h.host)
	return h
}

// input is a complete input as internal/submit builds one, with the
// timings of these tests.
func input(concurrency int) SnapshotInput {
	return SnapshotInput{
		Version:         InputVersion,
		Job:             activities.Job{Ident: testIdent, URL: testURL, SnapshotID: testIdent},
		Pool:            testPool,
		TaskQueue:       testQueue,
		Settings:        model.Settings{Concurrency: concurrency, UserAgent: "ua/1"},
		SequentialSteps: []int{5},
		Retry: RetryPolicies{Default: Retry{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 3,
		}},
		Timing: Timing{HeartbeatTimeout: 10 * time.Second, StartMargin: 30 * time.Second, ReadyMargin: 30 * time.Second,
			HostScheduleToStart: 2 * time.Minute, BackgroundMaxRun: 24 * time.Hour, MaxClaims: 3},
	}
}

// run executes the workflow and returns its final Status: its result, or,
// for a job that failed or was aborted, the details of the workflow's
// error (kept in h.endErr).
func (h *harness) run(in SnapshotInput) Status {
	h.t.Helper()
	h.env.ExecuteWorkflow(SnapshotWorkflow, in)
	require.True(h.t, h.env.IsWorkflowCompleted(), "workflow did not complete")
	if h.endErr = h.env.GetWorkflowError(); h.endErr != nil {
		st, ok := EndStatus(h.endErr)
		require.True(h.t, ok, "workflow error without a Status: %v", h.endErr)
		return st
	}
	var st Status
	require.NoError(h.t, h.env.GetWorkflowResult(&st))
	return st
}

func (h *harness) query() Status {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(QueryStatus)
	require.NoError(h.t, err)
	var st Status
	require.NoError(h.t, v.Get(&st))
	return st
}

// result returns the final result of hook name in st.
func result(t *testing.T, st Status, name string) model.ArchiveResult {
	t.Helper()
	for _, hs := range st.Hooks {
		if hs.Hook == name {
			require.NotNil(t, hs.Result, "hook %s has no result (phase %s)", name, hs.Phase)
			return *hs.Result
		}
	}
	require.FailNow(t, fmt.Sprintf("hook %s not in status", name))
	return model.ArchiveResult{}
}

// testLogger discards SDK logs: activity goroutines may log after a test
// ended, where t.Log would panic.
type testLogger struct{ t *testing.T }

func (testLogger) Debug(string, ...any) {}
func (testLogger) Info(string, ...any)  {}
func (testLogger) Warn(string, ...any)  {}
func (testLogger) Error(string, ...any) {}

// envReady delivers RunHook's SignalHookReady in the test environment.
type envReady struct{ h *harness }

func (r envReady) HookReady(_ context.Context, workflowID, key string) error {
	return r.h.env.SignalWorkflowByID(workflowID, SignalHookReady, key)
}
