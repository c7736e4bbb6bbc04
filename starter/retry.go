package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/workflows"
)

func retryCommand() *command {
	return &command{
		name:    "retry",
		args:    "IDENT",
		summary: "run a finished job's failed hooks again, as a new run of the same job",
		details: `
IDENT may also be the job's URL. Starts a new run of the job's workflow (the
same workflow ID) that runs only the hooks whose final status was failed
and keeps every other hook's result as it was. In Redis the job goes back
to pending/active without its retention; a failed hook that now succeeds
moves from hooks_failed to hooks_succeeded, counted once, and the job is
counted once in jobs_completed/jobs_failed when the retry ends. Refused
while the job runs (exit 4), for an aborted job (submit it again with
--force), and when no hook failed.`,
		examples: []string{
			"starter retry 3mlbkdu1fpo7wt4lr2qf1mpsw",
			"starter retry https://example.com/ --wait",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("wait", false, "wait for the retry and exit 1 if the job ends failed")
		},
		run: runRetry,
	}
}

// retryJSON is the --json form of a retry.
type retryJSON struct {
	Ident         string         `json:"ident"`
	URL           string         `json:"url"`
	RunID         string         `json:"run_id"`
	PreviousRunID string         `json:"previous_run_id"`
	Hooks         []string       `json:"hooks"`
	State         model.JobState `json:"state,omitempty"` // with --wait
	UI            string         `json:"ui,omitempty"`
}

func runRetry(ctx context.Context, a *app, inv *invocation) error {
	id, err := oneIdent(inv)
	if err != nil {
		return err
	}
	wait, _ := inv.fs.GetBool("wait")
	b, err := a.connect(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	v, err := getJob(ctx, b, id)
	if err != nil {
		return err
	}
	switch v.State {
	case model.StateFinished, model.StateFailed:
	case model.StateAborted:
		return withCode(exitConflict, fmt.Errorf("job %s (%s) was aborted: retry runs failed hooks of a job that ended; submit it again with --force", id, v.URL))
	default:
		return withCode(exitConflict, fmt.Errorf("job %s (%s) is still %s: wait for it to end (or abort it) before retrying", id, v.URL, v.State))
	}
	cctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	run, rerun, err := submit.Rerun(cctx, b.Temporal, workflowID(v))
	switch {
	case errors.Is(err, submit.ErrStillRunning), errors.Is(err, submit.ErrNothingFailed):
		return withCode(exitConflict, err)
	case err != nil:
		return temporalErr(id, "retry", err)
	}
	out := retryJSON{Ident: id, URL: v.URL, RunID: run.GetRunID(), PreviousRunID: rerun.PreviousRunID,
		Hooks: rerun.Hooks, UI: uiLink(inv.cfg.Temporal, id)}
	if !inv.json {
		fmt.Fprintf(a.stdout, "retrying %d failed hook(s) of %s (%s): %s\n", len(rerun.Hooks), id, v.URL, strings.Join(rerun.Hooks, ", "))
		if out.UI != "" {
			fmt.Fprintf(a.stdout, "  %s\n", out.UI)
		}
	}
	if !wait {
		if inv.json {
			return writeJSON(a.stdout, out)
		}
		return nil
	}
	var st workflows.Status
	if err := run.Get(ctx, &st); err != nil {
		s, ok := workflows.EndStatus(err)
		if !ok {
			return withCode(exitUnavailable, fmt.Errorf("retry of job %s: %w", id, err))
		}
		st = s
	}
	out.State = st.State
	if inv.json {
		if err := writeJSON(a.stdout, out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "%s %s: %d succeeded, %d failed of %d hooks\n", id, st.State,
			st.Counters.Succeeded, st.Counters.Failed, st.Counters.Total)
	}
	if st.State != model.StateFinished {
		return withCode(exitJobFailed, fmt.Errorf("job %s ended %s after the retry: %s", id, st.State, st.Error))
	}
	return nil
}
