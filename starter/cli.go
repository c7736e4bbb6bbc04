package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// command is one subcommand.
type command struct {
	name     string
	args     string // argument synopsis after the flags
	summary  string
	details  string
	examples []string
	// flags registers the command's own flags (may be nil).
	flags func(fs *pflag.FlagSet)
	// run executes the command with its positional arguments.
	run func(ctx context.Context, a *app, inv *invocation) error
	// noConfig: the command does not need the configuration flags.
	noConfig bool
}

// invocation is one parsed command line.
type invocation struct {
	cmd  *command
	fs   *pflag.FlagSet
	args []string
	cfg  *config.Config
	log  *zap.Logger
	json bool
	// logsOnConsole: log records share the console (--log-level, dev's
	// -v), so nothing is redrawn in place.
	logsOnConsole bool
}

// app holds the CLI's I/O and its seams for tests.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	now            func() time.Time
	// pollInterval is how often --wait and logs -f look at a job.
	pollInterval time.Duration
	// resolve resolves host names for the fetch policy check of submitted
	// URLs (nil: the system resolver).
	resolve netpolicy.Lookup
	// terminal reports stdout's terminal size; ok is false when stdout is
	// not a terminal.
	terminal func() (width, height int, ok bool)
	commands []*command
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, now: time.Now, pollInterval: 500 * time.Millisecond}
	a.terminal = func() (int, int, bool) { return terminalSize(a.stdout) }
	a.commands = []*command{
		submitCommand(), statusCommand(), listCommand(), abortCommand(), setCommand(),
		ignoreCommand(), rulesCommand(), pagesCommand(), exportCommand(), replayCommand(), logsCommand(), pipelinesCommand(), purgeCommand(), retryCommand(), devCommand(),
		lockCommand(), unlockCommand(), unabortCommand(),
		healthCommand(), maintenanceCommand(), pluginsCommand(),
	}
	return a
}

func (a *app) lookup(name string) *command {
	for _, c := range a.commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run executes args (without the program name) and returns the exit code.
func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "--help":
		if len(args) > 1 {
			if c := a.lookup(args[1]); c != nil {
				a.commandUsage(a.stdout, c)
				return exitOK
			}
			fmt.Fprintf(a.stderr, "starter: unknown command %q\n\n", args[1])
			a.usage(a.stderr)
			return exitUsage
		}
		a.usage(a.stdout)
		return exitOK
	}
	c := a.lookup(args[0])
	if c == nil && strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(a.stderr, "starter: %q is a flag, and flags go after the command: %s\n", args[0], a.commandFirst(args))
		return exitUsage
	}
	if c == nil {
		fmt.Fprintf(a.stderr, "starter: unknown command %q (commands: %s)\n", args[0], strings.Join(a.names(), ", "))
		return exitUsage
	}
	err := a.exec(ctx, c, args[1:])
	if errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "starter %s: %v\n", c.name, err)
	}
	return exitCode(err)
}

// commandFirst is how to write args, which start with a flag: the command
// they name first, then the rest in their order; without a command in
// them, the general form and the commands.
func (a *app) commandFirst(args []string) string {
	for i, arg := range args {
		if c := a.lookup(arg); c != nil {
			rest := append(slices.Clone(args[:i]), args[i+1:]...)
			return "starter " + c.name + " " + strings.Join(rest, " ")
		}
	}
	return "starter COMMAND [flags] [args] (commands: " + strings.Join(a.names(), ", ") + ")"
}

func (a *app) names() []string {
	out := make([]string, 0, len(a.commands))
	for _, c := range a.commands {
		out = append(out, c.name)
	}
	return out
}

// exec parses the command's flags, loads the configuration and runs it.
func (a *app) exec(ctx context.Context, c *command, args []string) error {
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	if c.flags != nil {
		c.flags(fs)
	}
	fs.Bool("json", false, "machine-readable JSON output")
	if !c.noConfig {
		config.BindFlags(fs)
	}
	fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return usageErr("%v (see: starter help %s)", err, c.name)
	}
	if help, _ := fs.GetBool("help"); help {
		a.commandUsage(a.stdout, c)
		return pflag.ErrHelp
	}
	inv := &invocation{cmd: c, fs: fs, args: fs.Args()}
	inv.json, _ = fs.GetBool("json")
	inv.logsOnConsole = fs.Changed("log-level")
	if !c.noConfig {
		cfg, err := config.Load(config.Options{Flags: fs})
		if err != nil {
			return withCode(exitUsage, err)
		}
		inv.cfg = cfg
		log, err := cliLogger(cfg, fs)
		if err != nil {
			return withCode(exitUsage, err)
		}
		defer func() { _ = log.Sync() }()
		inv.log = log
	}
	return c.run(ctx, a, inv)
}

// cliLogger logs to stderr. Short-lived commands log warnings and errors
// only unless --log-level or the config asks for more: their answer is
// on stdout.
func cliLogger(cfg *config.Config, fs *pflag.FlagSet) (*zap.Logger, error) {
	lc := cfg.Log
	if !fs.Changed("log-level") && lc.Level == config.Default().Log.Level {
		lc.Level = "warn"
	}
	return logging.New(lc.Level, lc.Format)
}

// usage prints the command list.
func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `starter — submit and steer archiveflow jobs

Usage:
  starter COMMAND [flags] [args]
  starter help COMMAND

Commands:
`)
	width := 0
	for _, c := range a.commands {
		width = max(width, len(c.name))
	}
	for _, c := range a.commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprint(w, `
Every command takes --json for machine-readable output and the
configuration flags (--config, --temporal-address, --redis-url, ...);
configuration also comes from archiveflow.yaml and ARCHIVEFLOW_* variables.

Exit codes:
  0  success
  1  a job failed or was aborted (submit --wait), or an unexpected error
  2  bad command line or bad input: nothing was started or changed
  3  job not found (never submitted, or expired from Redis)
  4  conflict: the job is already running, or already final
  5  Temporal or Redis unreachable
  6  submit --wait was interrupted before the jobs ended: they keep running

Examples:
  starter submit https://example.com/ --wait
  starter submit -i urls.txt --queue archiveflow --nice 5
  starter submit https://example.com/ --depth inf --concurrency 8
  starter pages 3mlbkdu1fpo7wt4lr2qf1mpsw --state done --depth 2
  starter status 3mlbkdu1fpo7wt4lr2qf1mpsw
  starter logs -f 3mlbkdu1fpo7wt4lr2qf1mpsw
`)
}

// commandUsage prints one command's help with its examples.
func (a *app) commandUsage(w io.Writer, c *command) {
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.SortFlags = false
	if c.flags != nil {
		c.flags(fs)
	}
	fs.Bool("json", false, "machine-readable JSON output")
	fmt.Fprintf(w, "starter %s — %s\n\nUsage:\n  starter %s [flags] %s\n", c.name, c.summary, c.name, c.args)
	if c.details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.details))
	}
	fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsages())
	if !c.noConfig {
		cfs := pflag.NewFlagSet("config", pflag.ContinueOnError)
		config.BindFlags(cfs)
		fmt.Fprintf(w, "\nConfiguration flags:\n%s", cfs.FlagUsages())
	}
	if len(c.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// connectTimeout bounds connecting to the backends.
const connectTimeout = 15 * time.Second

// connect opens Temporal and Redis; failure is exit 5.
func (a *app) connect(ctx context.Context, inv *invocation) (*backend.Backend, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	b, err := backend.Open(cctx, inv.cfg, inv.log)
	if err != nil {
		return nil, withCode(exitUnavailable, err)
	}
	a.useStackWebUI(cctx, inv, b)
	return b, nil
}

// useStackWebUI points the Web UI links this command prints at the UI of
// the stack it talks to: temporal.ui_url when the operator set it to
// anything but the default, else the address the stack's workers publish
// in its Redis (a `starter dev` stack on other ports), else the default.
func (a *app) useStackWebUI(ctx context.Context, inv *invocation, b *backend.Backend) {
	if inv.cfg.Temporal.UIURL != config.Default().Temporal.UIURL {
		return
	}
	ui, err := b.Store.WebUI(ctx)
	if err != nil {
		inv.log.Debug("the stack's web ui address is not readable; links use temporal.ui_url", zap.Error(err))
		return
	}
	if ui != "" {
		inv.cfg.Temporal.UIURL = ui
	}
}

// connectRedis opens Redis only (read-only commands); failure is exit 5.
func (a *app) connectRedis(ctx context.Context, inv *invocation) (*backend.Backend, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	rdb, store, err := backend.OpenRedis(cctx, inv.cfg, inv.log)
	if err != nil {
		return nil, withCode(exitUnavailable, err)
	}
	b := &backend.Backend{Redis: rdb, Store: store}
	a.useStackWebUI(cctx, inv, b)
	return b, nil
}
