package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/engine"
	"github.com/archiveflow/archiveflow/internal/pools"
)

func pluginsCommand() *command {
	return &command{
		name:    "plugins",
		args:    "",
		summary: "the plugins a worker on this host finds: their hooks and steps, which run, the binaries they need and whether this host has them",
		details: `
Discovers the plugins exactly as a worker with this configuration does
(the built-in set, then plugins.dirs) and plans them as a job without
overrides would. For each plugin: whether it runs here, its hooks with their
event and step and whether each runs (or why not: a name that breaks the
grammar, a malformed config.json, a required binary or plugin missing,
disabled by configuration); each binary its config.json's required_binaries
or binaries.jsonl names, its {KEY} templates filled from the plugin's
configuration, found on the hooks' PATH (with its --version) or missing.
abx-plugins' on_Crawl__ install hooks are listed as not run: archiveflow
never downloads while a job runs (docs/hooks.md, "Dependencies").

The text form is one line per fact, stable for scripts:
  plugin NAME: ok | cannot run: REASON | cannot be loaded: REASON
    binary NAME: found PATH (VERSION) | missing: REASON | not checked: REASON
    hook EVENT step N FILE: runs | skipped: REASON | disabled: REASON | configuration error: REASON | not run: REASON
  missing binaries: NAME, ... (or none)
With --check the exit code is 1 when a plugin cannot run or be loaded.`,
		examples: []string{
			"starter plugins",
			"starter plugins --check",
			"starter plugins --json",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("check", false, "exit 1 when a plugin cannot run or cannot be loaded on this host")
		},
		run: runPlugins,
	}
}

func runPlugins(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) != 0 {
		return usageErr("takes no arguments, got %q (see: starter help plugins)", inv.args)
	}
	roots, err := pools.PluginRoots(inv.cfg)
	if err != nil {
		return withCode(exitUsage, err)
	}
	archiveDir, err := filepath.Abs(inv.cfg.ArchiveDir)
	if err != nil {
		return withCode(exitUsage, err)
	}
	ecfg, err := pools.EngineConfig(inv.cfg, roots, archiveDir, nil, zap.NewNop())
	if err != nil {
		return withCode(exitUsage, err)
	}
	e, err := engine.New(ecfg)
	if err != nil {
		return withCode(exitUsage, err)
	}
	report, err := e.Inventory(ctx)
	if err != nil {
		return err
	}
	if inv.json {
		if err := writeJSON(a.stdout, report); err != nil {
			return err
		}
	} else {
		printInventory(a.stdout, report)
	}
	if check, _ := inv.fs.GetBool("check"); check {
		for _, p := range report.Plugins {
			if p.Status != engine.PluginOK {
				return withCode(exitJobFailed, errors.New("a plugin cannot run on this host (see above)"))
			}
		}
	}
	return nil
}

// printInventory writes the text form documented in the command's help.
func printInventory(w io.Writer, inv engine.Inventory) {
	for _, p := range inv.Plugins {
		status := p.Status
		if p.Reason != "" {
			status += ": " + p.Reason
		}
		fmt.Fprintf(w, "plugin %s: %s\n", p.Name, status)
		for _, b := range p.Binaries {
			name := b.Name
			if b.Resolved != "" && b.Resolved != b.Name {
				name = b.Resolved + " (" + b.Name + ")"
			}
			switch {
			case b.NotChecked != "":
				fmt.Fprintf(w, "  binary %s: not checked: %s\n", name, b.NotChecked)
			case b.Path != "":
				version := b.Version
				if version == "" {
					version = "version unknown"
				}
				fmt.Fprintf(w, "  binary %s: found %s (%s)\n", name, b.Path, version)
			default:
				fmt.Fprintf(w, "  binary %s: missing: %s\n", name, b.Missing)
			}
		}
		for _, h := range p.Hooks {
			status := h.Status
			if h.Reason != "" {
				status += ": " + h.Reason
			}
			if h.Warning != "" {
				status += " (warning: " + h.Warning + ")"
			}
			fmt.Fprintf(w, "  hook %s step %d %s: %s\n", h.Event, h.Step, h.Name, status)
		}
	}
	missing := "none"
	if len(inv.Missing) > 0 {
		missing = strings.Join(inv.Missing, ", ")
	}
	fmt.Fprintf(w, "missing binaries: %s\n", missing)
}
