package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
)

func healthCommand() *command {
	return &command{
		name:    "health",
		args:    "[HOST PLUGIN]",
		summary: "the fleet's health: each host × plugin check's state, failing ones first",
		details: `
Every final hook outcome updates a check of the worker host that ran it
(ENTITY the worker's pipeline nickname, CHECK the plugin), kept in Redis in
Flapjack's layout (docs/redis-layout.md): ok after flapjack.ok_after ok
outcomes in a row, critical after flapjack.critical_after hard failures in a
row, warning otherwise. Without arguments: the matrix, critical then warning
then ok, with the time of the last change, how long it has failed, why it
left ok (the summary of its last change) and any maintenance in force.
With HOST PLUGIN: that check's recent state changes and their summaries,
the newest first.`,
		examples: []string{
			"starter health",
			"starter health worker-3 wget",
			"starter health --json",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.Int("changes", 20, "with HOST PLUGIN: how many state changes to show")
		},
		run: runHealth,
	}
}

// openHealth connects to Redis and opens the fleet's health.
func (a *app) openHealth(ctx context.Context, inv *invocation) (*backend.Backend, *fleethealth.Health, error) {
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return nil, nil, err
	}
	h, err := healthOf(b, inv)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return b, h, nil
}

// healthOf is the fleet health on b's Redis: reading it and maintenances
// work with flapjack.enabled off (the workers' writer) too.
func healthOf(b *backend.Backend, inv *invocation) (*fleethealth.Health, error) {
	cfg := *inv.cfg
	cfg.Flapjack.Enabled = true
	return fleethealth.FromConfig(b.Store, &cfg)
}

func runHealth(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) != 0 && len(inv.args) != 2 {
		return usageErr("takes no arguments or HOST PLUGIN, got %q (see: starter help health)", inv.args)
	}
	b, h, err := a.openHealth(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	if len(inv.args) == 2 {
		n, _ := inv.fs.GetInt("changes")
		if n < 1 {
			return usageErr("--changes %d: must be >= 1", n)
		}
		c, changes, err := h.History(ctx, inv.args[0], inv.args[1], n)
		if errors.Is(err, fleethealth.ErrInvalid) {
			return withCode(exitNotFound, err)
		}
		if err != nil {
			return withCode(exitUnavailable, err)
		}
		if inv.json {
			return writeJSON(a.stdout, map[string]any{"check": c, "changes": changes})
		}
		fmt.Fprintf(a.stdout, "%s %s: %s since %s (last outcome %s)\n", c.Entity, c.Check, c.State,
			c.LastChange.UTC().Format(time.RFC3339), c.LastUpdate.UTC().Format(time.RFC3339))
		if c.Maintenance != "" {
			fmt.Fprintf(a.stdout, "  %s\n", c.Maintenance)
		}
		for _, ch := range changes {
			fmt.Fprintf(a.stdout, "%s  %-8s  %s\n", ch.Time.UTC().Format(time.RFC3339), ch.State, ch.Summary)
		}
		return nil
	}
	checks, err := h.Matrix(ctx)
	if err != nil {
		return withCode(exitUnavailable, err)
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"checks": append([]fleethealth.Check{}, checks...)})
	}
	if len(checks) == 0 {
		fmt.Fprintln(a.stdout, "no checks yet (no worker has recorded a hook outcome)")
		return nil
	}
	const row = "%-24s  %-16s  %-8s  %-20s  %s\n"
	fmt.Fprintf(a.stdout, row, "HOST", "PLUGIN", "STATE", "SINCE", "NOTE")
	for _, c := range checks {
		note := c.Maintenance
		if note == "" {
			note = c.Summary
			if !c.FailingSince.IsZero() {
				note = "failing for " + a.now().Sub(c.FailingSince).Round(time.Second).String() + ": " + c.Summary
			}
		}
		fmt.Fprintf(a.stdout, row, c.Entity, c.Check, c.State, c.LastChange.UTC().Format(time.RFC3339), note)
	}
	return nil
}

func maintenanceCommand() *command {
	return &command{
		name:    "maintenance",
		args:    "HOST [PLUGIN]",
		summary: "put a worker host, or one plugin on it, in maintenance (acknowledges its problems)",
		details: `
Stored as Flapjack stores maintenances (docs/redis-layout.md). Without
--at it is unscheduled: it starts now, acknowledges the host's (or the
plugin's) failing checks with one acknowledgement notification each, and
silences their problem notifications until it ends; a second one while it
runs extends it. With --at it is scheduled for later. HOST is a worker's
pipeline nickname (starter pipelines, starter health).

A host-wide maintenance (no PLUGIN) drains that host's workers: they stop
claiming new work within flapjack.maintenance_poll and resume by themselves
when it ends; work they hold runs on. A plugin's maintenance skips that
plugin's hooks on the host, each with a skipped result naming the
maintenance.`,
		examples: []string{
			`starter maintenance worker-3 --for 4h --summary "kernel upgrade"`,
			`starter maintenance worker-3 wget --for 30m --summary "wget missing, reinstalling"`,
			`starter maintenance worker-3 --at 2026-12-01T02:00:00Z --for 1h --summary "disk swap"`,
		},
		flags: func(fs *pflag.FlagSet) {
			fs.Duration("for", 0, "how long (e.g. 4h); required, > 0")
			fs.String("summary", "", "why (required)")
			fs.String("at", "", "start later, at this RFC 3339 time (a scheduled maintenance)")
		},
		run: runMaintenance,
	}
}

func runMaintenance(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) != 1 && len(inv.args) != 2 {
		return usageErr("takes HOST [PLUGIN], got %q (see: starter help maintenance)", inv.args)
	}
	dur, _ := inv.fs.GetDuration("for")
	summary, _ := inv.fs.GetString("summary")
	at, _ := inv.fs.GetString("at")
	if dur <= 0 {
		return usageErr("--for %s: the duration must be > 0 (e.g. --for 4h)", dur)
	}
	m := fleethealth.Maintenance{Host: inv.args[0], Check: fleethealth.HostWide, Summary: summary}
	if len(inv.args) == 2 {
		m.Check = inv.args[1]
	}
	start := a.now()
	if at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return usageErr("--at %q: must be an RFC 3339 time, e.g. 2026-12-01T02:00:00Z", at)
		}
		m.Scheduled, start = true, t
	}
	m.Start, m.End = start, start.Add(dur)
	b, h, err := a.openHealth(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	views, err := b.Store.ListPipelines(ctx)
	if err != nil {
		return withCode(exitUnavailable, err)
	}
	var known fleethealth.Known
	for _, v := range views {
		if n := v.Fields["nickname"]; n != "" {
			known.Hosts = append(known.Hosts, n)
		}
	}
	acked, err := h.Start(ctx, m, known)
	if errors.Is(err, fleethealth.ErrInvalid) {
		return withCode(exitUsage, err)
	}
	if err != nil {
		return withCode(exitUnavailable, err)
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"maintenance": m, "acknowledged": acked})
	}
	fmt.Fprintf(a.stdout, "%s (%d failing check(s) acknowledged)\n", m.Reason(), acked)
	return nil
}
