package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/archiveflow/archiveflow/internal/purge"
)

func purgeCommand() *command {
	return &command{
		name:    "purge",
		summary: "remove finished jobs whose retention has passed from Redis, now",
		details: `
The workers' purge Schedule (config purge.*) does this every purge.interval;
this runs it at once, from this process, against Redis. A job is due once
its retention (redis.retain_completed / retain_aborted / retain_failed)
has passed since it ended: its scheduled-purge entry, its entries in
state:*, time-index, scheduled, pending and working, and every key of it
(job hash, log, ignores, idempotency sets, a crawl's frontier) are removed,
purge.batch jobs at a time, at most purge.max_batches batches.
--dry-run lists the due jobs and their keys and removes nothing.`,
		examples: []string{
			"starter purge --dry-run",
			"starter purge",
			"starter purge --json",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("dry-run", false, "list what would be removed; change nothing")
		},
		run: runPurge,
	}
}

// purgeJSON is the --json form of a purge.
type purgeJSON struct {
	DryRun bool           `json:"dry_run"`
	Jobs   []purgeJobJSON `json:"jobs,omitempty"` // dry run
	More   bool           `json:"more"`
	Purged int            `json:"purged"`
	Keys   int            `json:"keys"`
}

type purgeJobJSON struct {
	Ident        string    `json:"ident"`
	State        string    `json:"state,omitempty"`
	Due          time.Time `json:"due"`
	Keys         []string  `json:"keys"`
	FrontierKeys int       `json:"frontier_keys"`
}

func runPurge(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) != 0 {
		return usageErr("purge takes no arguments, got %d (see: starter help purge)", len(inv.args))
	}
	dry, _ := inv.fs.GetBool("dry-run")
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	p, err := purge.FromConfig(b.Redis, b.Store, inv.cfg, inv.log)
	if err != nil {
		return err
	}
	c := inv.cfg.Purge
	out := purgeJSON{DryRun: dry}
	if dry {
		jobs, more, err := p.Due(ctx, c.Batch*c.MaxBatches)
		if err != nil {
			return withCode(exitUnavailable, err)
		}
		out.More = more
		for _, j := range jobs {
			out.Jobs = append(out.Jobs, purgeJobJSON{Ident: j.Ident, State: string(j.State), Due: j.Due,
				Keys: append([]string{}, j.Keys...), FrontierKeys: len(j.FrontierKeys)})
			out.Keys += len(j.Keys) + len(j.FrontierKeys)
		}
	} else {
		for range c.MaxBatches {
			rep, err := p.PurgeBatch(ctx, c.Batch)
			if err != nil {
				return withCode(exitUnavailable, err)
			}
			out.Purged += rep.Jobs
			out.Keys += rep.Keys
			out.More = rep.More
			if !rep.More {
				break
			}
		}
	}
	if inv.json {
		return writeJSON(a.stdout, out)
	}
	w := a.stdout
	if dry {
		for _, j := range out.Jobs {
			state := j.State
			if state == "" {
				state = "expired"
			}
			fmt.Fprintf(w, "%s  %-8s due %s  %d keys, %d frontier keys\n", j.Ident, state, j.Due.Local().Format(time.RFC3339), len(j.Keys), j.FrontierKeys)
		}
		fmt.Fprintf(w, "dry run: %d jobs due (%d keys); nothing removed\n", len(out.Jobs), out.Keys)
	} else {
		fmt.Fprintf(w, "purged %d jobs (%d keys)\n", out.Purged, out.Keys)
	}
	if out.More {
		fmt.Fprintf(w, "more jobs are due than purge.batch × purge.max_batches (%d); run it again\n", c.Batch*c.MaxBatches)
	}
	return nil
}
