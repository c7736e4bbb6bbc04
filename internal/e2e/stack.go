//go:build dev

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/devserver"
	"github.com/archiveflow/archiveflow/internal/diskguard"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/jobstore"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/pipelinelock"
	"github.com/archiveflow/archiveflow/internal/pools"
	"github.com/archiveflow/archiveflow/internal/purge"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/internal/tclient"
	"github.com/archiveflow/archiveflow/internal/testredis"
	"github.com/archiveflow/archiveflow/workflows"
)

// StartServer starts an in-memory Temporal dev server for a test binary.
func StartServer(ctx context.Context) (*devserver.Server, error) {
	return devserver.Start(ctx, devserver.Options{UIPort: -1, Log: zap.NewNop()})
}

var shared struct {
	once sync.Once
	srv  *devserver.Server
	err  error
}

// SharedServer starts one in-memory Temporal dev server in this process on
// first use and returns it; benchmarks share it across runs and count its
// CPU as theirs. A race-enabled test binary that runs many workflows uses
// StartServerProcess instead.
func SharedServer(tb testing.TB) *devserver.Server {
	tb.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), devserver.DefaultStartTimeout)
		defer cancel()
		shared.srv, shared.err = StartServer(ctx)
	})
	require.NoError(tb, shared.err)
	return shared.srv
}

// Stack is one test's archiveflow: its own Redis and task queue on a shared
// Temporal server.
type Stack struct {
	Config *config.Config
	Client client.Client
	Redis  *redis.Client
	Store  *rkeys.Store
	Server Temporal
	// RedisURL reaches the test's Redis server.
	RedisURL string
	// Log is the pools' logger (nil: the test's, warnings and above).
	Log *zap.Logger
	// Lookup, when set, resolves the pools' fetch host names (a test
	// resolver; nil: the system's).
	Lookup netpolicy.Lookup
	// DiskFree, when set, is the pools' reading of the archive disk's free
	// space (the disk guard; nil: the real one).
	DiskFree diskguard.FreeFunc
	// Lock is the pools' claim lock watcher (set by StartPools).
	Lock *pipelinelock.Watcher
	// WatchMaintenance makes the pools watch fleet health's maintenances
	// of their host (the pipeline's nickname, pools.Deps.Nickname), as a
	// worker process does: a host-wide one drains them.
	WatchMaintenance bool
}

var queueSeq atomic.Int64

// TestConfig returns a configuration for srv and redisURL with fast timings:
// one pool on a queue unique to this test, plugins from pluginDir.
func TestConfig(t testing.TB, srv Temporal, redisURL, pluginDir string) *config.Config {
	cfg := config.Default()
	cfg.ArchiveDir = t.TempDir()
	cfg.Temporal.HostPort = srv.HostPort()
	cfg.Temporal.Namespace = srv.Namespace()
	cfg.Redis.URL = redisURL
	cfg.Plugins.Dirs = []string{pluginDir}
	cfg.Plugins.Builtin = false // the test's fixture hooks only
	queue := fmt.Sprintf("e2e-%d-%d", os.Getpid(), queueSeq.Add(1))
	cfg.Pools = []config.Pool{{Name: "e2e", TaskQueue: queue, Slots: 8}}
	cfg.Job.TaskQueue = queue
	cfg.Purge.ScheduleID = "purge-" + queue // one per test on the shared server
	cfg.Hooks.Timeout = 20 * time.Second
	cfg.Hooks.Grace = 2 * time.Second
	cfg.Hooks.HeartbeatInterval = 500 * time.Millisecond
	cfg.Hooks.HeartbeatTimeout = 3 * time.Second
	cfg.Job.HostTimeout = 5 * time.Second
	cfg.Retry.InitialInterval = 100 * time.Millisecond
	cfg.Retry.MaximumInterval = 500 * time.Millisecond
	cfg.Worker.DrainTimeout = 2 * time.Second
	cfg.Worker.StatsInterval = time.Second
	cfg.Worker.PipelineTTL = 10 * time.Second
	// The tests' hooks read their fixtures' variables (E2E_EVENTS, ...).
	cfg.Hooks.PassEnv = []string{"E2E_*"}
	return &cfg
}

// NewStack connects to srv and a fresh Redis; configure may adjust the
// configuration before anything starts. Pools are not started: call
// StartPools, or run worker processes.
func NewStack(t testing.TB, srv Temporal, pluginDir string, configure func(*config.Config)) *Stack {
	t.Helper()
	rs := testredis.Start(t)
	cfg := TestConfig(t, srv, rs.URL, pluginDir)
	if configure != nil {
		configure(cfg)
	}
	require.NoError(t, cfg.Validate())
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb, store, err := backend.OpenRedis(ctx, cfg, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	tc, err := tclient.Dial(ctx, cfg.Temporal, log)
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	return &Stack{Config: cfg, Client: tc, Redis: rdb, Store: store, Server: srv, RedisURL: rs.URL}
}

// StartPools runs the stack's worker pools in this process until the test
// ends; env is the hooks' environment (nil = this process's).
func (s *Stack) StartPools(t testing.TB, env []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	pipe, err := pools.NewRedisPipeline(s.Store, "e2e", s.Config.ArchiveDir)
	require.NoError(t, err)
	purger, err := purge.FromConfig(s.Redis, s.Store, s.Config, zap.NewNop())
	require.NoError(t, err)
	log := s.Log
	if log == nil {
		log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	// Fleet health as a worker process wires it (pools.NewDeps): every final
	// outcome updates its checks, under the pipeline's nickname.
	health, err := fleethealth.FromConfig(s.Store, s.Config)
	require.NoError(t, err)
	store := &jobstore.RedisStore{Redis: s.Store, PipelineID: pipe.ID(), Host: pipe.Nickname(), Health: health}
	be := &backend.Backend{Redis: s.Redis, Store: s.Store}
	crawl, err := pools.NewCrawlStore(be, store, s.Config, nil)
	require.NoError(t, err)
	hosts, err := pools.NewHostBudget(s.Config, be, log)
	require.NoError(t, err)
	s.Lock = pipelinelock.New(s.Store, pipe.ID(), log)
	deps := pools.Deps{
		Config:    s.Config,
		Client:    s.Client,
		Store:     store,
		Crawl:     crawl,
		Pipelines: pipe,
		Log:       log,
		Env:       env,
		Purger:    purger,
		Lookup:    s.Lookup,
		DiskFree:  s.DiskFree,
		Hosts:     hosts,
		Health:    health,
		Lock:      s.Lock,
	}
	if s.WatchMaintenance {
		deps.Nickname = pipe.Nickname()
	}
	go func() { done <- pools.Run(ctx, deps, nil) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("pools.Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("pools did not stop within 60s")
		}
	})
}

// Job is a submitted job.
type Job struct {
	Ident string
	URL   string
	Run   client.WorkflowRun
}

// Submit creates the Redis job and starts its workflow, as the starter does,
// with no starter involved. adjust may change the workflow input.
func (s *Stack) Submit(t testing.TB, rawURL string, adjust func(*workflows.SnapshotInput)) Job {
	t.Helper()
	id, norm, err := ident.FromURL(rawURL)
	require.NoError(t, err)
	cfg := s.Config
	req := submit.Request{
		Ident: id, URL: norm, FetchDepth: cfg.Job.FetchDepth, Pool: cfg.Pools[0],
		Settings:  model.Settings{Concurrency: cfg.Job.Concurrency},
		StartedBy: "e2e", StartedIn: "test", CreateOp: id + "/e2e",
	}
	in := submit.Input(cfg, req)
	if adjust != nil {
		adjust(&in)
	}
	require.NoError(t, in.Validate())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Store.CreateJob(ctx, submit.Job(req)))
	run, err := s.Client.ExecuteWorkflow(ctx, submit.StartOptions(req), workflows.SnapshotWorkflow, in)
	require.NoError(t, err)
	return Job{Ident: id, URL: norm, Run: run}
}

// SubmitCrawl creates the Redis job and starts a crawl of rawURL, depth
// links deep (-1: no limit), as the starter does; adjust may change the
// request (settings, rules) before the input is built.
func (s *Stack) SubmitCrawl(t testing.TB, rawURL string, depth int, adjust func(*submit.Request)) Job {
	t.Helper()
	id, norm, err := ident.FromURL(rawURL)
	require.NoError(t, err)
	cfg := s.Config
	req := submit.Request{
		Ident: id, URL: norm, FetchDepth: model.FetchInf, CrawlDepth: depth, Pool: cfg.Pools[0],
		Settings:  model.Settings{Concurrency: cfg.Job.Concurrency},
		StartedBy: "e2e", StartedIn: "test", CreateOp: id + "/e2e",
	}
	if adjust != nil {
		adjust(&req)
	}
	in := submit.CrawlInput(cfg, req)
	require.NoError(t, in.Validate())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Store.CreateJob(ctx, submit.Job(req)))
	run, err := s.Client.ExecuteWorkflow(ctx, submit.StartOptions(req), workflows.CrawlWorkflow, in)
	require.NoError(t, err)
	return Job{Ident: id, URL: norm, Run: run}
}

// Wait waits for the job's workflow to finish and returns its error.
func (s *Stack) Wait(t testing.TB, j Job, timeout time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := j.Run.Get(ctx, nil)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("job %s did not finish within %s", j.Ident, timeout)
	}
	return err
}

// SnapDir is the job's snapshot directory under the stack's archive dir.
func (s *Stack) SnapDir(j Job) string {
	return archivedir.Snapshot(s.Config.ArchiveDir, j.Ident)
}
