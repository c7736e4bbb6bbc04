// Package builtin implements archiveflow's built-in hooks (the plugins/
// directory): headers, title, screenshot, pdf, dom, wget, favicon, outlinks,
// htmltotext, hashes, index and pagefetch (a crawl page's fetch into a WARC). Each plugin's hook file is a POSIX sh wrapper
// that execs `$ARCHIVEFLOW_BIN hook NAME "$@"`; the archiveflow binaries
// dispatch that sub-command to Main. A hook follows DESIGN.md §3: argv
// --url/--snapshot-id, config in the environment, cwd = SNAP_DIR/PLUGIN,
// JSONL records on stdout, human log lines on stderr.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/archiveflow/archiveflow/internal/builtin/hookio"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/hostbudget"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// Exit codes of Main besides hookio.ExitSkipped.
const (
	ExitOK        = 0 // a record was printed (or nothing to report)
	ExitTransient = 1 // transient failure: no record, the runner retries
	ExitUsage     = 2 // unknown hook name or no hook name
)

// Hook is one run of a built-in hook: its parsed invocation and its outputs.
type Hook struct {
	Inv    *hookio.Invocation
	Out    *hookio.Emitter
	Log    *zap.Logger
	Stderr io.Writer // the hook's stderr: Log's lines, and each fetch refusal's line (denied)
	// Policy is the worker's fetch policy when the hook runs inside the
	// worker (egress.WithPolicy); nil in a hook process (FETCH_DENY).
	Policy  *netpolicy.Policy
	Dir     string // the hook's working directory: SNAP_DIR/PLUGIN
	SnapDir string // SNAP_DIR, or the parent of Dir when SNAP_DIR is unset
	// inWorker: the hook runs inside the worker (RunIn with a dir).
	inWorker bool
}

type hookFunc func(ctx context.Context, h *Hook) (hookio.Result, error)

var hooks = map[string]hookFunc{
	"headers":    runHeaders,
	"screenshot": runScreenshot,
	"pdf":        runPDF,
	"dom":        runDOM,
	"title":      runTitle,
	"wget":       runWget,
	"favicon":    runFavicon,
	"outlinks":   runOutlinks,
	"pagefetch":  runPageFetch,
	"htmltotext": runHTMLToText,
	"hashes":     runHashes,
	"index":      runIndex,
}

// Names lists the built-in hooks, sorted.
func Names() []string {
	names := make([]string, 0, len(hooks))
	for n := range hooks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// skipError makes a hook report `skipped` (record + exit 10).
type skipError struct{ reason string }

func (e *skipError) Error() string { return e.reason }

func skip(format string, args ...any) error {
	return &skipError{reason: fmt.Sprintf(format, args...)}
}

// Main runs the hook named by args[0] with the rest of args as its argv,
// the process environment as its config, and SIGTERM/SIGINT as cancellation.
// It returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return Run(ctx, args, os.LookupEnv, stdout, stderr)
}

// Dispatch runs the built-in hook when args (os.Args) is the command line
// the plugins' wrappers exec (`BIN hook NAME ...`) and returns its exit
// code and true; for any other command line it returns false. A binary
// that may serve as ARCHIVEFLOW_BIN (a test binary too) calls it first.
func Dispatch(args []string) (int, bool) {
	if len(args) > 1 && args[1] == "hook" {
		return Main(args[2:], os.Stdout, os.Stderr), true
	}
	return 0, false
}

// Run is Main with an explicit context and environment; the hook works in
// the process's working directory.
func Run(ctx context.Context, args []string, env hookio.LookupEnv, stdout, stderr io.Writer) int {
	return RunIn(ctx, "", args, env, stdout, stderr)
}

// inProcess lists the hooks that start no process of their own: a worker
// may call them in its own process (RunIn) instead of executing their
// wrapper, which would start the worker's binary to call the same code.
var inProcess = map[string]bool{"pagefetch": true, "title": true, "outlinks": true, "htmltotext": true, "hashes": true}

// InProcess reports whether hook name may run inside the worker (RunIn).
func InProcess(name string) bool { return inProcess[name] }

// RunIn is Run working in dir instead of the process's working directory
// ("" = the working directory), for a hook run inside the worker.
func RunIn(ctx context.Context, dir string, args []string, env hookio.LookupEnv, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: hook NAME --url=URL --snapshot-id=ID; NAME is one of %s\n", strings.Join(Names(), ", "))
		return ExitUsage
	}
	name := args[0]
	fn, ok := hooks[name]
	if !ok {
		fmt.Fprintf(stderr, "hook %q: unknown; must be one of %s\n", name, strings.Join(Names(), ", "))
		return ExitUsage
	}
	log := newLogger(stderr).WithLazy(logging.Hook(name)) // lazily: most runs log nothing
	defer func() { _ = log.Sync() }()
	out := hookio.NewEmitter(stdout)

	inv, err := hookio.Parse(name, args[1:], env)
	if err != nil {
		// Bad configuration does not improve with retries: a soft failure.
		log.Error("invalid invocation", zap.Error(err))
		return emit(out, log, hookio.Result{Status: model.StatusFailed, OutputStr: "invalid invocation", Error: err.Error()}, ExitOK)
	}
	enabled, err := inv.Enabled()
	if err != nil {
		log.Error("invalid configuration", zap.Error(err))
		return emit(out, log, hookio.Result{Status: model.StatusFailed, OutputStr: "invalid configuration", Error: err.Error()}, ExitOK)
	}
	if !enabled {
		reason := inv.Key("ENABLED") + " is False"
		log.Info("skipped", zap.String("reason", reason))
		return emit(out, log, hookio.Result{Status: model.StatusSkipped, OutputStr: reason}, hookio.ExitSkipped)
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			log.Error("no working directory", zap.Error(err))
			return ExitTransient
		}
		dir = wd
	}
	h := &Hook{Inv: inv, Out: out, Log: log.WithLazy(zap.String("url", inv.URL)), Stderr: stderr, Dir: dir, SnapDir: inv.SnapDir,
		inWorker: dir != ""}
	if p, ok := egress.PolicyFrom(ctx); ok {
		h.Policy = p
	}
	if h.SnapDir == "" {
		h.SnapDir = filepath.Dir(dir)
	}
	return runHook(ctx, h, fn)
}

// runHook runs fn and maps its outcome to a record and an exit code.
func runHook(ctx context.Context, h *Hook, fn hookFunc) int {
	res, err := fn(ctx, h)
	var se *skipError
	var de *deniedError
	var loop *redirectLoopError
	switch {
	case errors.As(err, &se):
		h.Log.Warn("skipped", zap.String("reason", se.reason))
		return emit(h.Out, h.Log, hookio.Result{Status: model.StatusSkipped, OutputStr: se.reason}, hookio.ExitSkipped)
	case errors.As(err, &de):
		// The policy will not change on a retry: a final failure.
		h.Log.Warn("fetch denied", zap.Error(err))
		return emit(h.Out, h.Log, hookio.Result{Status: model.StatusFailed, OutputStr: "fetch denied by the fetch policy", Error: err.Error()}, ExitOK)
	case errors.As(err, &loop):
		// The same chain on every attempt: a final failure.
		h.Log.Warn("redirect loop", zap.Error(err))
		return emit(h.Out, h.Log, hookio.Result{Status: model.StatusFailed, OutputStr: "redirect loop", Error: err.Error()}, ExitOK)
	case errors.Is(err, hostbudget.ErrPostponed):
		// Not a failure: the host budget postpones the page (its verdict
		// is the engine's); the attempt ends without a record.
		h.Log.Info("postponed by the host budget", zap.Error(err))
		if h.Stderr != nil {
			fmt.Fprintln(h.Stderr, err.Error())
		}
		return ExitTransient
	case err != nil:
		h.Log.Error("failed (transient, no record)", zap.Error(err))
		// The last stderr line is the runner's reason's detail: the error
		// alone, without the log line's decoration.
		if h.Stderr != nil {
			fmt.Fprintln(h.Stderr, err.Error())
		}
		return ExitTransient
	}
	done := h.Log.Info
	if h.inWorker {
		// Its ArchiveResult record says the same; a hook that logs
		// nothing else leaves no stderr log (procs.RunFunc).
		done = h.Log.Debug
	}
	done("done", zap.String("status", string(res.Status)), zap.String("output", res.OutputStr))
	return emit(h.Out, h.Log, res, ExitOK)
}

func emit(out *hookio.Emitter, log *zap.Logger, res hookio.Result, code int) int {
	if err := out.Result(res); err != nil {
		log.Error("cannot print ArchiveResult", zap.Error(err))
		return ExitTransient
	}
	return code
}

func newLogger(w io.Writer) *zap.Logger {
	cfg := zap.NewProductionEncoderConfig()
	cfg.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.EncodeLevel = zapcore.CapitalLevelEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(cfg), zapcore.Lock(zapcore.AddSync(w)), zapcore.InfoLevel)
	return zap.New(core)
}
