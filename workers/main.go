// Command workers runs archiveflow worker pools: each polls its pool's
// Temporal task queue and a host-specific queue for the hooks of the snapshots
// it claimed, registers itself in Redis as an ArchiveBot pipeline, and drains
// gracefully on SIGTERM. `workers hook NAME ...` runs a built-in hook (the
// plugins/ wrappers call it through ARCHIVEFLOW_BIN).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/builtin"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/pools"
)

const usage = `Usage: workers [flags]
       workers hook NAME --url=URL --snapshot-id=ID

Runs the configured worker pools until SIGTERM or SIGINT, then stops polling,
lets running hooks finish within worker.drain_timeout and cancels the rest.

Examples:
  workers                                  # every pool in archiveflow.yaml
  workers --pool default --pool browser    # only these pools
  workers --tag big                        # also run jobs submitted with --tag big
  ARCHIVEFLOW_REDIS_URL=redis://:secret@redis:6379/0 workers --temporal-address temporal:7233

Flags:
`

func main() {
	if code, ok := builtin.Dispatch(os.Args); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run parses flags, connects and serves; it returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("workers", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	config.BindFlags(fs)
	poolNames := fs.StringSlice("pool", nil, "pool to serve (repeatable; default: worker.pools, else every pool)")
	tags := fs.StringArray("tag", nil, "a tag of every served pool, added to pools[].tags: jobs submitted with --tag T run only on pools with T (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "workers: unexpected argument %q (see --help)\n", fs.Arg(0))
		return 2
	}
	cfg, err := config.Load(config.Options{Flags: fs})
	if err != nil {
		fmt.Fprintf(stderr, "workers: %v\n", err)
		return 2
	}
	names := *poolNames
	if len(names) == 0 {
		names = cfg.Worker.Pools
	}
	for _, t := range *tags {
		if err := config.ValidateTag(t); err != nil {
			fmt.Fprintf(stderr, "workers: --tag: %v\n", err)
			return 2
		}
	}
	for i := range cfg.Pools {
		cfg.Pools[i].Tags = append(cfg.Pools[i].Tags, *tags...)
	}
	if _, err := pools.Select(cfg, names); err != nil {
		fmt.Fprintf(stderr, "workers: %v\n", err)
		return 2
	}
	// A configured plugins root that is missing stops the start here,
	// named, rather than failing every job at discovery.
	roots, err := pools.PluginRoots(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "workers: %v\n", err)
		return 2
	}
	log, err := logging.New(cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		fmt.Fprintf(stderr, "workers: %v\n", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	if err := serve(ctx, cfg, names, roots, log); err != nil {
		log.Error("workers stopped", zap.Error(err))
		return 1
	}
	return 0
}

// serve connects to the backends and runs the pools until ctx ends.
func serve(ctx context.Context, cfg *config.Config, names, pluginRoots []string, log *zap.Logger) error {
	be, err := backend.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer be.Close()
	d, err := pools.NewDeps(cfg, be, log)
	if err != nil {
		return err
	}
	d.PluginDirs = pluginRoots
	// Pools configured as ArchiveBot pipelines (pools[].archivebot) also
	// claim the jobs ArchiveBot's bot queues (pools.Serve).
	return pools.Serve(ctx, d, be, names)
}
