package pools

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/diskguard"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/jobstore"
	"github.com/archiveflow/archiveflow/internal/outbox"
	"github.com/archiveflow/archiveflow/internal/pipelinelock"
	"github.com/archiveflow/archiveflow/internal/purge"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Version is reported in pipeline records.
const Version = "archiveflow/0.1"

// RedisPipeline registers a worker process in Redis as an ArchiveBot
// pipeline (pipeline:ID) with host stats of the archive dir's disk.
type RedisPipeline struct {
	store      *rkeys.Store
	archiveDir string

	mu        sync.Mutex
	p         rkeys.Pipeline
	logOutbox *outbox.Outbox
	guard     *diskguard.Guard
	lock      *pipelinelock.Watcher
	health    *fleethealth.Health // its critical checks go in the record
}

// NewRedisPipeline describes this process; nickname may be empty.
func NewRedisPipeline(store *rkeys.Store, nickname, archiveDir string) (*RedisPipeline, error) {
	return newRedisPipeline(store, nickname, archiveDir, "")
}

// newRedisPipeline is NewRedisPipeline publishing webUI as the stack's
// Web UI address.
func newRedisPipeline(store *rkeys.Store, nickname, archiveDir, webUI string) (*RedisPipeline, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return nil, fmt.Errorf("pipeline: hostname: %v", err)
	}
	pid := os.Getpid()
	if nickname == "" {
		nickname = host
	}
	return &RedisPipeline{
		store:      store,
		archiveDir: archiveDir,
		p: rkeys.Pipeline{
			ID:        rkeys.PipelineID(host, host, pid),
			Hostname:  host,
			FQDN:      host,
			PID:       pid,
			Nickname:  nickname,
			Version:   Version,
			Status:    "running",
			StartedAt: time.Now(),
			WebUI:     webUI,
		},
	}, nil
}

// ID is the pipeline id (hex).
func (r *RedisPipeline) ID() string { return r.p.ID }

// Nickname is the pipeline's nickname (worker.nickname, else the host
// name): the worker host's entity in the fleet's health.
func (r *RedisPipeline) Nickname() string { return r.p.Nickname }

func (r *RedisPipeline) snapshot() rkeys.Pipeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.p
	if st, err := rkeys.CollectHostStats(r.archiveDir); err == nil {
		p.Stats = st
	}
	if r.guard != nil {
		p.NotClaiming = r.guard.Reason()
	}
	if r.lock != nil && p.NotClaiming == "" {
		p.NotClaiming = r.lock.Reason()
	}
	if r.health != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if n, err := r.health.Critical(ctx, p.Nickname); err == nil {
			p.CriticalChecks = &n
		}
		cancel()
	}
	if r.logOutbox != nil {
		if b, err := r.logOutbox.Backlog(); err == nil {
			p.LogOutbox = &rkeys.OutboxBacklog{Pending: b.Pending, Rejected: b.Rejected}
		}
	}
	return p
}

// WatchLogOutbox makes every report include the backlog of the job-log
// outbox, so operators see undelivered and refused log batches.
func (r *RedisPipeline) WatchLogOutbox(o *outbox.Outbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logOutbox = o
}

// WatchDiskGuard makes every report say why the worker claims no work
// while the disk guard holds it (rkeys.Pipeline.NotClaiming).
func (r *RedisPipeline) WatchDiskGuard(g *diskguard.Guard) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.guard = g
}

// Register writes the record with the served task queues.
func (r *RedisPipeline) Register(ctx context.Context, queues []string) error {
	r.mu.Lock()
	r.p.TaskQueues = append([]string(nil), queues...)
	r.mu.Unlock()
	return r.store.RegisterPipeline(ctx, r.snapshot())
}

// Refresh re-reports host stats and renews the record's TTL.
func (r *RedisPipeline) Refresh(ctx context.Context) error {
	return r.store.RefreshPipeline(ctx, r.snapshot())
}

// Unregister removes the record on clean exit.
func (r *RedisPipeline) Unregister(ctx context.Context) error {
	r.mu.Lock()
	r.p.Status = "stopped"
	r.mu.Unlock()
	return r.store.UnregisterPipeline(ctx, r.snapshot())
}

// NewDeps wires a process's pools to its backends: the Redis store and
// pipeline record, and ARCHIVEFLOW_BIN pointing at this executable, which
// must dispatch `hook NAME ...` to the built-in hooks.
func NewDeps(cfg *config.Config, be *backend.Backend, log *zap.Logger) (Deps, error) {
	self, err := os.Executable()
	if err != nil {
		return Deps{}, fmt.Errorf("find own executable for ARCHIVEFLOW_BIN: %w", err)
	}
	pipe, err := newRedisPipeline(be.Store, cfg.Worker.Nickname, cfg.ArchiveDir, cfg.Temporal.UIURL)
	if err != nil {
		return Deps{}, err
	}
	store := &jobstore.RedisStore{Redis: be.Store, PipelineID: pipe.ID(), Host: pipe.Nickname()}
	var lock *pipelinelock.Watcher
	var health *fleethealth.Health
	if be.Store != nil {
		lock = pipelinelock.New(be.Store, pipe.ID(), log)
		pipe.lock = lock
		if health, err = fleethealth.FromConfig(be.Store, cfg); err != nil {
			return Deps{}, err
		}
		store.Health = health
		pipe.health = health
	}
	var crawl activities.CrawlStore // nil without Redis (Run refuses it)
	if be.Redis != nil && be.Store != nil {
		cs, err := NewCrawlStore(be, store, cfg, log)
		if err != nil {
			return Deps{}, err
		}
		crawl = cs
	}
	var purger activities.Purger
	if be.Redis != nil && be.Store != nil {
		if purger, err = purge.FromConfig(be.Redis, be.Store, cfg, log); err != nil {
			return Deps{}, err
		}
	}
	hosts, err := NewHostBudget(cfg, be, log)
	if err != nil {
		return Deps{}, err
	}
	return Deps{
		Hosts:     hosts,
		Config:    cfg,
		Client:    be.Temporal,
		Store:     store,
		Crawl:     crawl,
		Pipelines: pipe,
		Log:       log,
		Env:       append(os.Environ(), "ARCHIVEFLOW_BIN="+self),
		Purger:    purger,
		Lock:      lock,
		Health:    health,
		Nickname:  pipe.Nickname(),
	}, nil
}

// NewCrawlStore is the crawl store of a process: store's job layout and a
// frontier on the same Redis (whose claims see the host budget when cfg
// turns it on; cfg may be nil).
func NewCrawlStore(be *backend.Backend, store *jobstore.RedisStore, cfg *config.Config, log *zap.Logger) (*jobstore.CrawlStore, error) {
	f, err := frontier.New(be.Redis, be.Store.Keys(), frontierOptions(cfg, be, log))
	if err != nil {
		return nil, fmt.Errorf("crawl frontier: %w", err)
	}
	return &jobstore.CrawlStore{RedisStore: store, Frontier: f, Log: log}, nil
}
