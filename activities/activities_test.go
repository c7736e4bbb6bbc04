package activities

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/model"
)

// These tests run the activities with fakes for every dependency; hooks run
// by the real runner are tested in internal/engine, the Redis store in
// internal/jobstore.

// memStore is a Store that keeps everything in memory.
type memStore struct {
	// down makes AppendLog and RecordResult fail as with Redis unreachable.
	down     atomic.Bool
	mu       sync.Mutex
	logs     []LogEntry
	results  []ResultInput
	settings []SettingsInput
	batches  map[string]bool
}

var errRedisDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func newMemStore() *memStore { return &memStore{batches: map[string]bool{}} }

func (s *memStore) SetJobState(context.Context, JobStateInput) error { return nil }

func (s *memStore) SetArchive(context.Context, ArchiveInput) error { return nil }
func (s *memStore) SetStep(context.Context, StepInput) error       { return nil }
func (s *memStore) Heartbeat(context.Context, string) error        { return nil }
func (s *memStore) ReopenJob(context.Context, ReopenInput) error   { return nil }
func (s *memStore) SetRetryAt(context.Context, RetryAtInput) error { return nil }
func (s *memStore) FinishJob(context.Context, FinishInput) error   { return nil }

func (s *memStore) ApplySettings(_ context.Context, in SettingsInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings = append(s.settings, in)
	return nil
}

func (s *memStore) RecordResult(_ context.Context, in ResultInput) error {
	if s.down.Load() {
		return errRedisDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, in)
	return nil
}

func (s *memStore) AppendLog(_ context.Context, _ string, key string, seq int, entries []LogEntry) error {
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
	return nil
}

// testOptions are complete hook activity options with short intervals.
func testOptions() Options {
	return Options{
		HeartbeatInterval: 20 * time.Millisecond, JobHeartbeatInterval: time.Second, SettingsPollInterval: 2 * time.Second,
		LogFlushInterval: 20 * time.Millisecond, LogBatch: 200, LogLinesPerRun: 20000, LogLineBytes: 4096,
		ResultFieldBytes: 8 << 10, ResponsesPerRun: 1 << 20,
	}
}

// runnerFunc is a Runner (and a Discoverer that finds nothing, and a Sealer
// that writes nothing).
type runnerFunc func(ctx context.Context, req RunRequest, sink Sink) (Outcome, error)

func (f runnerFunc) Run(ctx context.Context, req RunRequest, sink Sink) (Outcome, error) {
	return f(ctx, req, sink)
}

func (runnerFunc) Discover(context.Context, DiscoverInput) (Plan, error) { return Plan{}, nil }

func (runnerFunc) Seal(context.Context, SealInput) (SealReport, error) { return SealReport{}, nil }

// activityEnv returns an activity environment whose activity contexts
// derive from parent: cancelling it is how the tests cancel a hook.
func activityEnv(t *testing.T, parent context.Context, acts ...any) *testsuite.TestActivityEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	for _, a := range acts {
		env.RegisterActivity(a)
	}
	env.SetTestTimeout(time.Minute)
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: parent})
	return env
}

func backgroundInput() RunHookInput {
	return RunHookInput{
		Job:      Job{Ident: "abc123", URL: "https://example.com/", SnapshotID: "abc123"},
		Hook:     HookSpec{Plugin: "wget", Name: "on_Snapshot__20_wget.bg.sh", Path: "/plugins/wget/on_Snapshot__20_wget.bg.sh", Step: 2, Background: true, Timeout: time.Minute, Grace: time.Second, Enabled: true},
		Settings: model.Settings{Concurrency: 1},
		Key:      "run-1/step-2/wget/on_Snapshot__20_wget.bg.sh",
	}
}

// sealedRun runs RunHook for a background hook with runner, cancelling
// the attempt (the seal) 50 ms in, and returns the result and the store.
func sealedRun(t *testing.T, runner runnerFunc) (RunHookResult, *memStore) {
	t.Helper()
	store := newMemStore()
	acts, err := NewHost(runner, runner, runner, store, zap.NewNop(), testOptions())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	env := activityEnv(t, ctx, acts)
	time.AfterFunc(50*time.Millisecond, cancel)
	v, err := env.ExecuteActivity(acts.RunHook, backgroundInput())
	require.NoError(t, err, "a background hook stopped by the seal ends with a result")
	var res RunHookResult
	require.NoError(t, v.Get(&res))
	return res, store
}

// A background hook the seal reaches before it started is recorded
// skipped with its reason, never succeeded: the runner returns an error
// (it could not start the hook under cancellation), so there is no exit
// code to read, and the zero value must not read as "exited 0".
func TestRunHookBackgroundNotStartedBeforeTheSealIsSkipped(t *testing.T) {
	res, store := sealedRun(t, func(ctx context.Context, _ RunRequest, _ Sink) (Outcome, error) {
		<-ctx.Done()
		return Outcome{}, errors.New("start hook: " + ctx.Err().Error())
	})

	assert.Equal(t, model.StatusSkipped, res.Status)
	assert.Equal(t, NotStartedBeforeSeal, res.OutputStr)
	assert.Empty(t, res.Error)
	require.Len(t, store.results, 1, "the final result is recorded")
	assert.Equal(t, model.StatusSkipped, store.results[0].Result.Status)
	assert.True(t, res.Recorded, "the workflow need not write it again")
}

// A runner that reports a background hook's stop at the seal as transient
// (it cannot be retried after the seal) makes it failed, whatever its exit
// code: exit codes are the runner's to map.
func TestRunHookBackgroundTransientAtTheSealFails(t *testing.T) {
	res, _ := sealedRun(t, func(ctx context.Context, _ RunRequest, _ Sink) (Outcome, error) {
		<-ctx.Done()
		return Outcome{Transient: true, Error: "terminated", Result: model.ArchiveResult{ExitCode: 143}}, nil
	})

	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Equal(t, "stopped at seal: terminated", res.Error)
}

func TestNewHostRequiresEveryOption(t *testing.T) {
	runner := runnerFunc(nil)
	_, err := NewHost(runner, runner, runner, newMemStore(), nil, Options{HeartbeatInterval: time.Second})
	require.ErrorContains(t, err, "job heartbeat interval 0s: must be > 0")
	opts := testOptions()
	opts.ResponsesPerRun = 0
	_, err = NewHost(runner, runner, runner, newMemStore(), nil, opts)
	require.ErrorContains(t, err, "responses per attempt 0: must be > 0")
	_, err = NewHost(nil, runner, runner, newMemStore(), nil, testOptions())
	require.ErrorContains(t, err, "discoverer must not be nil")
	_, err = NewHost(runner, runner, nil, newMemStore(), nil, testOptions())
	require.ErrorContains(t, err, "sealer must not be nil")
}

// registry is a HostRegistry answering from a set of live queues (each
// with registryLease left), or failing as with Redis down.
type registry struct {
	live map[string]bool
	err  error
}

const registryLease = 17 * time.Second

func (r registry) QueueLease(_ context.Context, q string) (time.Duration, error) {
	if r.err != nil || !r.live[q] {
		return 0, r.err
	}
	return registryLease, nil
}

func TestHostLivenessCarriesTheLease(t *testing.T) {
	ctx := context.Background()
	a, err := NewPool(newMemStore(), registry{live: map[string]bool{"q@h1": true}}, nil, "q@self", zap.NewNop())
	require.NoError(t, err)
	l, err := a.HostLiveness(ctx, "q@h1")
	require.NoError(t, err)
	assert.Equal(t, Liveness{Alive: true, Lease: registryLease}, l)
	l, err = a.HostLiveness(ctx, "q@h2")
	require.NoError(t, err)
	assert.Equal(t, Liveness{}, l)
	a, err = NewPool(newMemStore(), registry{err: errRedisDown}, nil, "q@self", zap.NewNop())
	require.NoError(t, err)
	_, err = a.HostLiveness(ctx, "q@h1")
	assert.ErrorContains(t, err, "host alive q@h1: dial tcp")
}

func TestHostAlive(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	a, err := NewPool(store, registry{live: map[string]bool{"q@h1": true}}, nil, "q@self", zap.NewNop())
	require.NoError(t, err)
	alive, err := a.HostAlive(ctx, "q@h1")
	require.NoError(t, err)
	assert.True(t, alive)
	alive, err = a.HostAlive(ctx, "q@h2")
	require.NoError(t, err)
	assert.False(t, alive)

	tests := []struct {
		name         string
		hosts        HostRegistry
		queue        string
		want         string
		nonRetryable bool
		errType      string
	}{
		{"redis down is retryable", registry{err: errRedisDown}, "q@h", "host alive q@h: dial tcp", false, ""},
		{"no registry", nil, "q@h", "cannot tell which hosts are alive", true, ErrTypeNoHostRegistry},
		{"empty queue", registry{}, "", "host queue must not be empty", true, ErrTypeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewPool(store, tt.hosts, nil, "q@self", zap.NewNop())
			require.NoError(t, err)
			alive, err := a.HostAlive(ctx, tt.queue)
			require.Error(t, err)
			assert.False(t, alive)
			assert.Contains(t, err.Error(), tt.want)
			var appErr *temporal.ApplicationError
			if tt.nonRetryable {
				require.ErrorAs(t, err, &appErr)
				assert.True(t, appErr.NonRetryable())
				assert.Equal(t, tt.errType, appErr.Type())
			} else {
				assert.False(t, errors.As(err, &appErr) && appErr.NonRetryable(), "must be retried")
			}
		})
	}
}

func TestClaimHostHandsOutThisWorkersQueue(t *testing.T) {
	a, err := NewPool(newMemStore(), nil, nil, "q@self", nil)
	require.NoError(t, err)
	q, err := a.ClaimHost(context.Background(), "abc")
	require.NoError(t, err)
	assert.Equal(t, "q@self", q)
	_, err = NewPool(newMemStore(), nil, nil, "", nil)
	require.ErrorContains(t, err, "host queue must not be empty")
}

// Settings the store could never write (here an empty ignore pattern) are
// refused without a retry, and the store is not asked.
func TestApplySettingsRefusesInvalidSettingsForGood(t *testing.T) {
	store := newMemStore()
	a, err := NewPool(store, nil, nil, "q@self", nil)
	require.NoError(t, err)
	err = a.ApplySettings(context.Background(), SettingsInput{Ident: "abc", Settings: model.Settings{Concurrency: 1, Ignores: []string{""}}, Version: 1, Key: "k"})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, ErrTypeInvalidInput, appErr.Type())
	assert.Contains(t, appErr.Error(), `ignore pattern "": must not be empty`)
	assert.Empty(t, store.settings)
}

// A store error marked ErrNotWritable is reported non-retryable; any other
// store error is retried; no error stays none.
func TestStoreErrorsRetryOnlyWhatCanSucceed(t *testing.T) {
	require.NoError(t, storeError(nil, "set step of %s", "abc"))
	require.NoError(t, crawlStoreError(nil, "set rules of %s", "abc"))
	err := storeError(errRedisDown, "set step of %s", "abc")
	var appErr *temporal.ApplicationError
	assert.False(t, errors.As(err, &appErr), "a plain error: retried")
	err = storeError(errors.Join(ErrNotWritable, errors.New("gone")), "set step of %s", "abc")
	require.ErrorAs(t, err, &appErr)
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, ErrTypeNotWritable, appErr.Type())
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{strings.Repeat("a", 20), 15, "a…[truncated]"},
		{"ééééééééé", 16, "é…[truncated]"},
	}
	for _, tt := range tests {
		got := truncate(tt.in, tt.n)
		assert.Equal(t, tt.want, got)
		assert.LessOrEqual(t, len(got), max(tt.n, len(tt.want)))
	}
}

// sealRecorder is a Sealer that keeps what it was asked to seal.
type sealRecorder struct{ got []SealInput }

func (r *sealRecorder) Seal(_ context.Context, in SealInput) (SealReport, error) {
	r.got = append(r.got, in)
	return SealReport{Files: []string{"/a/index.json"}}, nil
}

func TestSealSnapshotRefusesAnIncompleteSeal(t *testing.T) {
	runner := runnerFunc(nil)
	sealer := &sealRecorder{}
	a, err := NewHost(runner, runner, sealer, newMemStore(), nil, testOptions())
	require.NoError(t, err)
	job := Job{Ident: "abc", URL: "https://example.com/", SnapshotID: "abc"}

	rep, err := a.SealSnapshot(context.Background(), SealInput{Job: job, State: model.StateFinished})
	require.NoError(t, err)
	assert.Equal(t, []string{"/a/index.json"}, rep.Files)
	require.Len(t, sealer.got, 1)

	for _, in := range []SealInput{
		{Job: Job{Ident: "abc", URL: "https://example.com/"}, State: model.StateFinished},
		{Job: job, State: model.StateActive},
	} {
		_, err := a.SealSnapshot(context.Background(), in)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		assert.True(t, appErr.NonRetryable())
		assert.Equal(t, ErrTypeInvalidInput, appErr.Type())
	}
	assert.Len(t, sealer.got, 1, "an invalid seal never reaches the sealer")
}

// RunHook reports whether it wrote the result itself, so the workflow
// writes it only when it did not.
func TestRunHookReportsWhetherItRecordedTheResult(t *testing.T) {
	for _, down := range []bool{false, true} {
		store := newMemStore()
		store.down.Store(down)
		runner := runnerFunc(func(context.Context, RunRequest, Sink) (Outcome, error) {
			return Outcome{Result: model.ArchiveResult{Status: model.StatusSucceeded}}, nil
		})
		acts, err := NewHost(runner, runner, runner, store, zap.NewNop(), testOptions())
		require.NoError(t, err)
		env := activityEnv(t, context.Background(), acts)
		in := backgroundInput()
		in.Hook.Background = false
		v, err := env.ExecuteActivity(acts.RunHook, in)
		require.NoError(t, err)
		var res RunHookResult
		require.NoError(t, v.Get(&res))
		assert.Equal(t, model.StatusSucceeded, res.Status)
		assert.Equal(t, !down, res.Recorded, "redis down: %v", down)
		var plain model.ArchiveResult
		require.NoError(t, v.Get(&plain), "the result still reads as an ArchiveResult")
		assert.Equal(t, res.ArchiveResult, plain)
	}
}

func TestClaimAndDiscoverHandsOutThisWorkersQueueAndPlan(t *testing.T) {
	runner := runnerFunc(nil) // its Discover finds an empty plan
	a, err := NewPool(newMemStore(), nil, runner, "q@self", nil)
	require.NoError(t, err)
	c, err := a.ClaimAndDiscover(context.Background(), DiscoverInput{Ident: "abc", SnapshotID: "abc"})
	require.NoError(t, err)
	assert.Equal(t, Claim{HostQueue: "q@self", Plan: Plan{}}, c)

	a, err = NewPool(newMemStore(), nil, nil, "q@self", nil)
	require.NoError(t, err)
	_, err = a.ClaimAndDiscover(context.Background(), DiscoverInput{Ident: "abc"})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.True(t, appErr.NonRetryable(), "a worker that cannot discover never will")
}

// ErrorDetail removes exactly the hook-and-attempt words a failure message
// of that hook starts with, and nothing of anyone else's.
func TestErrorDetail(t *testing.T) {
	const key = "wget/on_Snapshot__60_wget.sh"
	for _, tc := range []struct{ msg, want string }{
		{attemptFailure(key, 3, "exit 4 (why)"), "exit 4 (why)"},
		{attemptFailure(key, 1, "ran past its limit of 1m0s"), "ran past its limit of 1m0s"},
		{"hook " + key + ": the segment's attempt ended while it ran", "the segment's attempt ended while it ran"},
		{"configuration error: x", "configuration error: x"},
		{attemptFailure("dom/on_Snapshot__53_dom.sh", 2, "exit 1"), "hook dom/on_Snapshot__53_dom.sh attempt 2: exit 1"},
		{"hook " + key + " attempt x: y", "hook " + key + " attempt x: y"},
		{"hook " + key + " attempt : y", "hook " + key + " attempt : y"},
		{"hook " + key + "x attempt 1: y", "hook " + key + "x attempt 1: y"},
	} {
		assert.Equal(t, tc.want, ErrorDetail(key, tc.msg), tc.msg)
	}
}
