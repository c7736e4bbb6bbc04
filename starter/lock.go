package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/pipelinelock"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

func lockCommand() *command {
	return &command{
		name:    "lock",
		args:    "PIPELINE IDENT",
		summary: "pin a pipeline (worker process) to one job: it takes no other work until unlocked",
		details: `
PIPELINE is a pipeline's id (starter pipelines) or its nickname when exactly
one registered pipeline has it; IDENT may also be the job's URL. While
locked, the pipeline claims no other snapshot and no crawl page; what it
already holds runs on (a locked snapshot's hooks run on it to the end).
--until-finished clears the lock once the job has ended; without it the
lock stays until starter unlock. starter pipelines shows the lock.

Refused (exit 4) for a job that has ended, (exit 3) for an unknown job or
pipeline.`,
		examples: []string{
			"starter lock mybox 3mlbkdu1fpo7wt4lr2qf1mpsw --until-finished",
			"starter unlock mybox",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("until-finished", false, "clear the lock once the job has ended")
		},
		run: runLock,
	}
}

func unlockCommand() *command {
	return &command{
		name:     "unlock",
		args:     "PIPELINE",
		summary:  "clear a pipeline's lock (starter lock): it takes work again",
		examples: []string{"starter unlock mybox"},
		run:      runUnlock,
	}
}

func runLock(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) != 2 {
		return usageErr("want PIPELINE IDENT, got %d argument(s) (see: starter help lock)", len(inv.args))
	}
	id, err := parseIdent(inv.args[1])
	if err != nil {
		return err
	}
	until, _ := inv.fs.GetBool("until-finished")
	b, pipeline, err := connectPipeline(ctx, a, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	by := os.Getenv("USER")
	l := rkeys.PipelineLock{Ident: id, UntilFinished: until, By: by}
	switch err := b.Store.LockPipeline(ctx, pipeline, l); {
	case errors.Is(err, rkeys.ErrJobNotFound):
		return withCode(exitNotFound, jobNotFound{id: id})
	case errors.Is(err, rkeys.ErrJobFinal):
		return withCode(exitConflict, fmt.Errorf("job %s has ended: a pipeline is locked to a job that runs", id))
	case err != nil:
		return withCode(exitUnavailable, err)
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"pipeline": pipeline, "ident": id, "until_finished": until})
	}
	fmt.Fprintf(a.stdout, "pipeline %s %s\n", pipeline, pipelinelock.Reason(l))
	return nil
}

func runUnlock(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) != 1 {
		return usageErr("want PIPELINE, got %d argument(s) (see: starter help unlock)", len(inv.args))
	}
	b, pipeline, err := connectPipeline(ctx, a, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	cleared, err := b.Store.UnlockPipeline(ctx, pipeline, "")
	if err != nil {
		return withCode(exitUnavailable, err)
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"pipeline": pipeline, "cleared": cleared})
	}
	if cleared {
		fmt.Fprintf(a.stdout, "pipeline %s unlocked: taking work\n", pipeline)
	} else {
		fmt.Fprintf(a.stdout, "pipeline %s was not locked\n", pipeline)
	}
	return nil
}

// connectPipeline connects to Redis and resolves the command's first
// argument to a registered pipeline's id (findPipeline); the caller
// closes b.
func connectPipeline(ctx context.Context, a *app, inv *invocation) (*backend.Backend, string, error) {
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return nil, "", err
	}
	pipeline, err := findPipeline(ctx, b, inv.args[0])
	if err != nil {
		b.Close()
		return nil, "", err
	}
	return b, pipeline, nil
}

// findPipeline resolves a registered pipeline's id or nickname (the
// nickname of exactly one) to its id.
func findPipeline(ctx context.Context, b *backend.Backend, name string) (string, error) {
	views, err := b.Store.ListPipelines(ctx)
	if err != nil {
		return "", withCode(exitUnavailable, err)
	}
	var byNick, known []string
	for _, v := range views {
		if v.ID == name {
			return v.ID, nil
		}
		if v.Fields["nickname"] == name {
			byNick = append(byNick, v.ID)
		}
		known = append(known, v.ID+" ("+v.Fields["nickname"]+")")
	}
	switch len(byNick) {
	case 1:
		return byNick[0], nil
	case 0:
		return "", withCode(exitNotFound, fmt.Errorf("pipeline %q: no registered pipeline has this id or nickname (registered: %s)", name, strings.Join(known, ", ")))
	default:
		return "", withCode(exitConflict, fmt.Errorf("pipeline %q: %d pipelines have this nickname (%s): name one by its id", name, len(byNick), strings.Join(byNick, ", ")))
	}
}
