//go:build dev

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/abpipeline"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/builtin"
	"github.com/archiveflow/archiveflow/internal/devredis"
	"github.com/archiveflow/archiveflow/internal/devserver"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/pools"
)

// dispatchHook runs `starter hook NAME ...` (the built-in hooks' wrappers
// exec "$ARCHIVEFLOW_BIN hook NAME") in the dev build, which runs workers.
func dispatchHook(args []string) (int, bool) { return builtin.Dispatch(args) }

func devCommand() *command {
	return &command{
		name:    "dev",
		args:    "[URL...]",
		summary: "run the embedded stack: Temporal dev server + Web UI, Redis, every worker pool",
		details: `
Starts an in-process Temporal dev server (SQLite under DATA_DIR/temporal),
its Web UI, Redis (a real redis-server when one is on PATH or named by
--redis-server / $ARCHIVEFLOW_REDIS_SERVER, persisting under
DATA_DIR/redis; otherwise an embedded in-process Redis, said in the log),
registers the search attributes and runs every configured worker pool.

The worker pools use the built-in plugins embedded in this binary
(written to ARCHIVE_DIR/plugins/builtin-HASH/) and then plugins.dirs.
Log records go to DATA_DIR/logs/dev.log (-v or --log-level: the console).

With URLs it submits them (all submit flags apply) and follows them: a
live view on a terminal, a line per step otherwise. Each job ends with a
table of its hooks (step, status, attempts, duration, output, error or
skip reason), where its files are and its Web UI link; then the stack
stops and the command exits with the jobs' result (0 finished, 1 failed
or aborted); --keep keeps the stack running afterwards. Without URLs it
runs until Ctrl-C; submit from another terminal with the printed command.`,
		examples: []string{
			"go run -tags dev ./starter dev https://example.com/",
			"go run -tags dev ./starter dev                      # stack only; Ctrl-C stops it",
			"go run -tags dev ./starter dev https://example.com/ --keep --data-dir /tmp/af",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.String("data-dir", "./data", "directory for Temporal's SQLite database, Redis' files and (by default) the archive")
			fs.Int("port", 7233, "Temporal frontend port (0 = a free port)")
			fs.Int("ui-port", 8233, "Web UI port (0 = a free port, -1 = no UI)")
			fs.String("redis", string(devredis.ModeAuto), "Redis: auto (real redis-server when found, else embedded), real or embedded")
			fs.Int("redis-port", defaultRedisPort, "Redis port (default: 6379 when free, else a free port; 0 = a free port)")
			fs.String("redis-server", "", "redis-server executable (default: $"+devredis.EnvServer+", then PATH)")
			fs.Bool("keep", false, "with URLs: keep the stack running after they finish")
			fs.BoolP("verbose", "v", false, "log records on the console (default: DATA_DIR/logs/dev.log)")
			submitCommand().flags(fs)
		},
		run: runDev,
	}
}

// devStack is the running embedded stack.
type devStack struct {
	redis    *devredis.Server
	temporal *devserver.Server
	b        *backend.Backend
	cancel   context.CancelFunc
	poolsErr chan error
	log      *zap.Logger
}

func runDev(ctx context.Context, a *app, inv *invocation) error {
	fs := inv.fs
	dataDir, _ := fs.GetString("data-dir")
	absData, err := filepath.Abs(dataDir)
	if err != nil {
		return usageErr("--data-dir %q: %v", dataDir, err)
	}
	mode, _ := fs.GetString("redis")
	redisServer, _ := fs.GetString("redis-server")
	port, _ := fs.GetInt("port")
	uiPort, _ := fs.GetInt("ui-port")
	keep, _ := fs.GetBool("keep")
	redisPort, _ := fs.GetInt("redis-port")
	if !fs.Changed("redis-port") && !portFree(redisPort) {
		redisPort = 0
	}
	if !fs.Changed("archive-dir") && os.Getenv(config.EnvPrefix+"_ARCHIVE_DIR") == "" && inv.cfg.ArchiveDir == config.Default().ArchiveDir {
		inv.cfg.ArchiveDir = filepath.Join(absData, "archive")
	}

	// Validate the submission before anything starts.
	var sub *submission
	if len(inv.args) > 0 {
		if sub, err = parseSubmission(a, inv); err != nil {
			return err
		}
		sub.wait = true
	}
	verbose, _ := fs.GetBool("verbose")
	log, logFile, err := devLogger(inv, absData, verbose)
	if err != nil {
		return withCode(exitUsage, err)
	}
	defer func() { _ = log.Sync() }()
	inv.log = log

	st, err := startStack(ctx, inv, devredis.Options{
		Mode: devredis.Mode(mode), ServerPath: redisServer, Port: redisPort, DataDir: filepath.Join(absData, "redis"), Persist: true, Log: log,
	}, devserver.Options{
		DataDir: filepath.Join(absData, "temporal"), FrontendPort: port, UIPort: uiPort, Log: log,
		Namespace: inv.cfg.Temporal.Namespace,
	})
	if err != nil {
		return err
	}
	defer st.stop()
	switch {
	case sub != nil && inv.json:
		// stdout carries the jobs' JSON result only.
	case sub == nil || keep:
		a.printStack(inv, st, logFile)
	default:
		a.printStackLine(inv, st, logFile)
	}

	if sub != nil {
		err := a.devSubmit(ctx, inv, st.b, sub)
		if !inv.json && ctx.Err() == nil && (err == nil || exitCode(err) == exitJobFailed) {
			a.printNext(inv, keep)
		}
		if !keep || ctx.Err() != nil {
			return err
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "starter dev: %v\n", err)
		}
		fmt.Fprintln(a.stdout, "--keep: the stack keeps running; Ctrl-C stops it")
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(a.stdout, "stopping the stack…")
		return nil
	case err := <-st.poolsErr:
		return fmt.Errorf("worker pools stopped: %w", err)
	}
}

// devLogFile is the dev stack's log, inside the data dir.
const devLogFile = "logs/dev.log"

// devLogger writes the stack's log records (Temporal, Redis, workers,
// hooks started and finished) to DATA_DIR/logs/dev.log, so the console
// shows the jobs only; with -v or --log-level they go to the console
// instead. It returns the log file's path ("" on the console).
func devLogger(inv *invocation, dataDir string, verbose bool) (*zap.Logger, string, error) {
	cfg := inv.cfg.Log
	if verbose || inv.fs.Changed("log-level") {
		inv.logsOnConsole = true
		log, err := logging.New(cfg.Level, cfg.Format)
		return log, "", err
	}
	path := filepath.Join(dataDir, filepath.FromSlash(devLogFile))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, "", fmt.Errorf("log directory: %w", err)
	}
	log, err := logging.NewFile(path, cfg.Level, cfg.Format)
	return log, path, err
}

// startStack starts Redis, Temporal and the worker pools, pointing the
// configuration at them. On error everything started is stopped.
func startStack(ctx context.Context, inv *invocation, ro devredis.Options, to devserver.Options) (*devStack, error) {
	st := &devStack{log: inv.log, poolsErr: make(chan error, 1)}
	ok := false
	defer func() {
		if !ok {
			st.stop()
		}
	}()
	begin := time.Now()
	// A configured plugins root that is missing is refused before anything
	// starts; the built-in set is written into the archive dir.
	roots, err := pools.PluginRoots(inv.cfg)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	rs, err := devredis.Start(ctx, ro)
	if err != nil {
		return nil, withCode(exitUnavailable, err)
	}
	st.redis = rs
	inv.cfg.Redis.URL = rs.URL()

	ts, err := devserver.Start(ctx, to)
	if err != nil {
		code := exitUnavailable
		if errors.Is(err, devserver.ErrDataDirInUse) {
			code = exitConflict
		}
		return nil, withCode(code, err)
	}
	st.temporal = ts
	inv.cfg.Temporal.HostPort = ts.HostPort()
	inv.cfg.Temporal.Namespace = ts.Namespace()
	inv.cfg.Temporal.UIURL = ts.UIURL()

	b, err := backend.Open(ctx, inv.cfg, inv.log)
	if err != nil {
		return nil, withCode(exitUnavailable, err)
	}
	st.b = b
	if ui := inv.cfg.Temporal.UIURL; ui != "" {
		if err := b.Store.PublishWebUI(ctx, ui); err != nil {
			return nil, withCode(exitUnavailable, err)
		}
	}

	// The pools export this binary as ARCHIVEFLOW_BIN; dispatchHook runs
	// the built-in hooks it is called back for.
	deps, err := pools.NewDeps(inv.cfg, b, inv.log)
	if err != nil {
		return nil, err
	}
	deps.PluginDirs = roots
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st.cancel = cancel
	// What `workers` serves: every pool, and the ArchiveBot pipelines'
	// claimers of those configured as one.
	go func() { st.poolsErr <- pools.Serve(pctx, deps, b, nil) }()
	inv.log.Info("embedded stack started", zap.Duration("took", time.Since(begin)))
	ok = true
	return st, nil
}

// stop stops the pools (draining running hooks), Temporal and Redis.
func (st *devStack) stop() {
	if st.cancel != nil {
		st.cancel()
		select {
		case err := <-st.poolsErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				st.log.Warn("worker pools", zap.Error(err))
			}
		case <-time.After(time.Minute):
			st.log.Warn("worker pools did not stop within a minute")
		}
	}
	if st.b != nil {
		st.b.Close()
	}
	if st.temporal != nil {
		if err := st.temporal.Stop(); err != nil {
			st.log.Warn("stop temporal dev server", zap.Error(err))
		}
	}
	if st.redis != nil {
		if err := st.redis.Stop(); err != nil {
			st.log.Warn("stop redis", zap.Error(err))
		}
	}
}

// printStack tells the user where everything is.
func (a *app) printStack(inv *invocation, st *devStack, logFile string) {
	cfg := inv.cfg
	archive, _ := filepath.Abs(cfg.ArchiveDir)
	fmt.Fprintf(a.stdout, `archiveflow dev stack is up
  Temporal:  %s (namespace %s)
  Web UI:    %s
  Redis:     %s (%s)
  archive:   %s
  pools:     %d: %s
`, cfg.Temporal.HostPort, cfg.Temporal.Namespace, cfg.Temporal.UIURL, cfg.Redis.URL, redisKind(st, true), archive,
		len(cfg.Pools), poolNames(cfg))
	if logFile != "" {
		fmt.Fprintf(a.stdout, "  logs:      %s (-v shows them here)\n", logFile)
	}
	fmt.Fprintf(a.stdout, "Submit from another terminal:\n  %s URL\n", submitCommandLine(cfg))
}

// printStackLine is printStack in one line, for a run with URLs: the
// jobs' results are what the user came for.
func (a *app) printStackLine(inv *invocation, st *devStack, logFile string) {
	cfg := inv.cfg
	line := fmt.Sprintf("archiveflow dev: Temporal %s, Web UI %s, Redis %s (%s)",
		cfg.Temporal.HostPort, cfg.Temporal.UIURL, cfg.Redis.URL, redisKind(st, false))
	if logFile != "" {
		line += "; logs: " + logFile
	}
	fmt.Fprintln(a.stdout, line)
	fmt.Fprintf(a.stdout, "  pools: %s\n", poolNames(cfg))
}

// redisKind says which Redis the stack runs.
func redisKind(st *devStack, long bool) string {
	switch {
	case st.redis.Real():
		return "real redis-server"
	case long:
		return "EMBEDDED in-process Redis (not persistent; install redis-server for a real one)"
	}
	return "EMBEDDED, not persistent"
}

// submitCommandLine is the submit command that reaches the stack from
// another terminal: flags only where the stack differs from the defaults.
func submitCommandLine(cfg *config.Config) string {
	d := config.Default()
	cmd := cliName(false) + " submit"
	if cfg.Temporal.HostPort != d.Temporal.HostPort {
		cmd += " --temporal-address " + cfg.Temporal.HostPort
	}
	if cfg.Redis.URL != d.Redis.URL {
		cmd += " --redis-url " + config.RedactURL(cfg.Redis.URL)
	}
	archive, _ := filepath.Abs(cfg.ArchiveDir)
	if def, _ := filepath.Abs(d.ArchiveDir); archive != def {
		cmd += " --archive-dir " + archive
	}
	return cmd
}

// printNext ends a `dev URL...` run with how to archive another URL.
func (a *app) printNext(inv *invocation, keep bool) {
	if keep {
		fmt.Fprintf(a.stdout, "Archive another URL: %s URL\n", submitCommandLine(inv.cfg))
		return
	}
	fmt.Fprintf(a.stdout, "Archive another URL: %s dev URL   (--keep keeps the stack up for starter submit)\n", cliName(true))
}

// poolNames names each pool the stack serves, its shared task queues
// (with its tags: TASKQUEUE#TAG), and
// whether it is an ArchiveBot pipeline (with the nickname its named
// queues match).
func poolNames(cfg *config.Config) string {
	s := ""
	for i, p := range cfg.Pools {
		if i > 0 {
			s += ", "
		}
		s += p.Name + "→" + strings.Join(pools.SharedQueues(p), "+")
		if p.ArchiveBot != nil {
			s += " (ArchiveBot pipeline " + abpipeline.Nickname(cfg, p) + ")"
		}
	}
	return s
}

// devSubmit submits the URLs given to `dev` and waits for them.
func (a *app) devSubmit(ctx context.Context, inv *invocation, b *backend.Backend, s *submission) error {
	sb := &submitter{app: a, inv: inv, b: b, s: s}
	done, err := sb.submitAll(ctx)
	if err != nil {
		return err
	}
	// The live view or the progress lines name each job at once.
	return a.waitJobs(ctx, inv, b, done)
}

// defaultRedisPort is Redis' standard port: the configuration's default
// redis.url reaches the dev stack's Redis from another terminal.
const defaultRedisPort = 6379

// portFree reports whether 127.0.0.1:port can be bound now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// cliName is how the user runs this CLI: `go run [-tags dev] ./starter`
// under go run, the executable's name when PATH finds it, else its path.
func cliName(dev bool) string {
	exe, err := os.Executable()
	if err != nil {
		return "starter"
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		if dev {
			return "go run -tags dev ./starter"
		}
		return "go run ./starter"
	}
	base := filepath.Base(exe)
	if p, err := exec.LookPath(base); err == nil {
		if a, err1 := os.Stat(p); err1 == nil {
			if b, err2 := os.Stat(exe); err2 == nil && os.SameFile(a, b) {
				return base
			}
		}
	}
	return exe
}
