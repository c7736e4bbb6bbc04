// Command benchworker is the worker process of bench/throughput. It runs in
// one of two modes, chosen by BENCHWORKER_MODE, and is configured like the
// workers binary (ARCHIVEFLOW_* env vars, --log-format):
//
//   - "archiveflow" (default) serves the configured pools exactly as
//     `workers` does (pools.Run), and counts the round trips of its Redis
//     client;
//   - "bare" is the platform ceiling: the same Temporal client and worker
//     options on the first pool's shared task queue, running BareSnapshot, a
//     trivial workflow of a snapshot's shape (steps of no-op activities, a
//     bounded number at a time) with no Redis and no hook processes.
//
// On SIGUSR1 it writes its Redis round trips so far to BENCHWORKER_COUNTS
// (when set), atomically, as one decimal line. With BENCHWORKER_CPUPROFILE
// set it writes a CPU profile of its whole life there when it stops.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/pools"
	"github.com/archiveflow/archiveflow/internal/tclient"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "benchworker: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load(config.Options{})
	if err != nil {
		return err
	}
	if path := os.Getenv("BENCHWORKER_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	log, err := logging.New(cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	rt := &benchkit.RoundTrips{}
	go reportCounts(ctx, rt, os.Getenv("BENCHWORKER_COUNTS"), log)
	switch mode := os.Getenv("BENCHWORKER_MODE"); mode {
	case "", "archiveflow":
		be, err := backend.Open(ctx, cfg, log)
		if err != nil {
			return err
		}
		defer be.Close()
		be.Redis.AddHook(rt)
		d, err := pools.NewDeps(cfg, be, log)
		if err != nil {
			return err
		}
		return pools.Run(ctx, d, nil)
	case "bare":
		return runBare(ctx, cfg, log)
	default:
		return fmt.Errorf("BENCHWORKER_MODE %q: must be archiveflow or bare", mode)
	}
}

// runBare serves BareSnapshot and Noop on the first pool's shared queue with
// the worker options internal/pools gives a pool, until ctx ends.
func runBare(ctx context.Context, cfg *config.Config, log *zap.Logger) error {
	if len(cfg.Pools) == 0 {
		return fmt.Errorf("bare mode: no pool configured")
	}
	p := cfg.Pools[0]
	tc, err := tclient.Dial(ctx, cfg.Temporal, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	w := worker.New(tc, p.TaskQueue, pools.WorkerOptions(cfg, p))
	w.RegisterWorkflowWithOptions(BareSnapshot, workflow.RegisterOptions{Name: BareWorkflowName})
	w.RegisterActivity(Noop)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start bare worker on %s: %w", p.TaskQueue, err)
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

// reportCounts writes rt to path on every SIGUSR1 until ctx ends.
func reportCounts(ctx context.Context, rt *benchkit.RoundTrips, path string, log *zap.Logger) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-usr1:
			if path == "" {
				continue
			}
			tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
			err := os.WriteFile(tmp, []byte(strconv.FormatInt(rt.Load(), 10)+"\n"), 0o644)
			if err == nil {
				err = os.Rename(tmp, path)
			}
			if err != nil {
				log.Error("write round-trip count", zap.Error(err))
			}
		}
	}
}
