package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/submit"
)

func retryCommand() *command {
	return &command{
		name:    "retry",
		args:    "IDENT",
		summary: "run a finished job's failed hooks (or crawl pages) again, or continue a crawl, as a new run of the same job",
		details: `
IDENT may also be the job's URL. Starts a new run of the job's workflow (the
same workflow ID) that runs only what failed and keeps everything else as
it was. In Redis the job goes back to pending/active without its
retention, and is counted once in jobs_completed/jobs_failed when the
retry ends.

One page: the hooks whose final status was failed run again; a failed hook
that now succeeds moves from hooks_failed to hooks_succeeded, counted once.

A crawl: the pages whose final status is failed (attempts used up on a
5xx, a network error or a hook failure) are queued again at their depth
with fresh attempts, and the crawl goes on from there: the pages they
discover are crawled as usual, no other page is fetched again. The
retry's responses are added to items_downloaded, r1xx..r5xx, error_count
and bytes_downloaded once each; the failed attempts' responses stay
counted (ArchiveBot's counters count responses, not pages). The first
pages retried are listed (--json lists every one).

--continue goes on with a crawl that ended with pages left to fetch (one
finished at a limit: "finished (crawl): page limit 100 reached" in
starter status): the pages it left READY are crawled, with what they
discover; nothing is requeued, so no page is fetched twice. Its limits are lifted,
or replaced by --max-pages, --max-bytes, --max-duration given here (a page
limit counts every page the crawl fetched so far: --max-pages 200 after a
stop at 100 fetches 100 more; a byte limit the job's bytes_downloaded so
far; a duration counts from the continue).

Refused (exit 4) while the job runs, for an aborted job (starter unabort
goes on with it, or submit it again with --force), when nothing failed (--continue: when no page is left).`,
		examples: []string{
			"starter retry 3mlbkdu1fpo7wt4lr2qf1mpsw",
			"starter retry https://example.com/ --wait",
			"starter retry 3mlbkdu1fpo7wt4lr2qf1mpsw --continue --max-pages 5000",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("wait", false, "follow the retry as submit --wait follows a job (live view on a terminal); exit 1 if the job ends failed")
			fs.Bool("continue", false, "a crawl: go on with the pages it left (after a limit), fetching none twice")
			addLimitFlags(fs)
		},
		run: runRetry,
	}
}

// retryJSON is the --json form of a retry.
type retryJSON struct {
	Ident         string   `json:"ident"`
	URL           string   `json:"url"`
	RunID         string   `json:"run_id"`
	PreviousRunID string   `json:"previous_run_id"`
	Hooks         []string `json:"hooks"`
	// Pages are a crawl's failed pages that run again (their URLs).
	Pages []string       `json:"pages,omitempty"`
	State model.JobState `json:"state,omitempty"` // with --wait
	UI    string         `json:"ui,omitempty"`
	// Outcome is how the rerun ended (with --wait), as submit --wait
	// --json gives it.
	Outcome *outcome `json:"outcome,omitempty"`
}

// retryShownPages is how many retried page URLs the text output shows.
const retryShownPages = 5

func unabortCommand() *command {
	return &command{
		name:    "unabort",
		args:    "IDENT",
		summary: "go on with an aborted job, as a new run of the same job (within its retention)",
		details: `
IDENT may also be the job's URL. Starts a new run of the aborted job's
workflow the way retry does (mnbot's un-abort): a crawl goes on from the
pages its abort left (the pages it stopped are READY again), with its
settings, rules and limits as they were; no page is fetched twice. A
single page runs the hooks that failed or never ran, keeping the other
results. In Redis the job goes back to pending/active, its jobs_aborted
count is taken back and it is counted once when the new run ends.

An aborted job is kept for redis.retain_aborted (5 s by default, as
ArchiveBot's reaper expects); after that it is gone (exit 3). Refused
(exit 4) for a job that was not aborted (retry runs its failures), or a
crawl with no page left.`,
		examples: []string{
			"starter unabort 3mlbkdu1fpo7wt4lr2qf1mpsw --wait",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.Bool("wait", false, "follow the new run as submit --wait follows a job (live view on a terminal); exit 1 if the job ends failed")
		},
		run: runUnabort,
	}
}

func runRetry(ctx context.Context, a *app, inv *invocation) error {
	return runRerun(ctx, a, inv, false)
}

func runUnabort(ctx context.Context, a *app, inv *invocation) error {
	return runRerun(ctx, a, inv, true)
}

// runRerun is retry and unabort: a new run of an ended job.
func runRerun(ctx context.Context, a *app, inv *invocation, unabort bool) error {
	id, err := oneIdent(inv)
	if err != nil {
		return err
	}
	wait, _ := inv.fs.GetBool("wait")
	var cont bool
	if !unabort {
		cont, _ = inv.fs.GetBool("continue")
	}
	var limits model.Settings
	if anyLimitFlag(inv.fs) && !cont {
		return usageErr("--max-pages, --max-bytes, --max-duration: only with --continue (a retry keeps the crawl's limits)")
	}
	if err := errors.Join(applyLimitFlags(inv.fs, &limits)...); err != nil {
		return withCode(exitUsage, err)
	}
	b, err := a.connect(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	v, err := getJob(ctx, b, id)
	if err != nil {
		todo := "a retry needs that record: submit the URL again with --force to archive it afresh"
		if unabort {
			todo = "un-abort needs that record: raise redis.retain_aborted to un-abort later, or submit the URL again with --force"
		}
		return a.notInRedis(ctx, inv, id, err, todo)
	}
	switch v.State {
	case model.StateAborted:
		if !unabort {
			return withCode(exitConflict, fmt.Errorf("job %s (%s) was aborted: retry runs failed hooks of a job that ended; starter unabort goes on with it (within redis.retain_aborted), or submit it again with --force", id, v.URL))
		}
	case model.StateFinished, model.StateFailed:
		if unabort {
			return withCode(exitConflict, fmt.Errorf("job %s (%s) ended %s, it was not aborted: starter retry runs what failed", id, v.URL, v.State))
		}
	default:
		return withCode(exitConflict, fmt.Errorf("job %s (%s) is still %s: wait for it to end (or abort it) before retrying", id, v.URL, v.State))
	}
	cctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	rerunFn := submit.Rerun
	if unabort {
		rerunFn = submit.Unabort
	}
	if cont {
		rerunFn = func(ctx context.Context, c client.Client, f *frontier.Frontier, id string) (client.WorkflowRun, submit.Retried, error) {
			return submit.Continue(ctx, c, f, id, limits)
		}
	}
	run, rerun, err := rerunFn(cctx, b.Temporal, newFrontier(b), workflowID(v))
	switch {
	case errors.Is(err, submit.ErrStillRunning), errors.Is(err, submit.ErrNothingFailed), errors.Is(err, submit.ErrAborted),
		errors.Is(err, submit.ErrNothingLeft), errors.Is(err, submit.ErrNotACrawl), errors.Is(err, submit.ErrNotAborted):
		return withCode(exitConflict, err)
	case errors.Is(err, frontier.ErrNoFrontier):
		return withCode(exitNotFound, fmt.Errorf("%w (the crawl's pages expired with its retention)", err))
	case err != nil:
		return temporalErr(id, "retry", err)
	}
	out := retryJSON{Ident: id, URL: v.URL, RunID: run.GetRunID(), PreviousRunID: rerun.PreviousRunID,
		Hooks: rerun.Hooks, UI: uiLink(inv.cfg.Temporal, id)}
	for _, p := range rerun.Pages {
		out.Pages = append(out.Pages, p.URL)
	}
	if !inv.json {
		printRetry(a, id, v.URL, rerun)
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
	// The rerun is followed as submit --wait follows a job.
	outcomes, err := a.followJobs(ctx, inv, b, []submitted{{Ident: id, URL: v.URL, WorkflowID: run.GetID(), RunID: run.GetRunID(),
		TaskQueue: v.TaskQueue, UI: out.UI}})
	if outcomes == nil {
		return err
	}
	if inv.json {
		out.State, out.Outcome = outcomes[0].State, outcomes[0]
		if werr := writeJSON(a.stdout, out); werr != nil {
			return werr
		}
	}
	return err
}

// printRetry says what the retry runs again.
func printRetry(a *app, id, url string, r submit.Retried) {
	if !r.Crawl {
		fmt.Fprintf(a.stdout, "retrying %d failed hook(s) of %s (%s): %s\n", len(r.Hooks), id, url, strings.Join(r.Hooks, ", "))
		return
	}
	if r.ListPartial {
		fmt.Fprintf(a.stdout, "crawl %s (%s): its URL list was cut short while it was seeded: the rest of the list is seeded first\n", id, url)
	}
	if r.Continue {
		fmt.Fprintf(a.stdout, "continuing crawl %s (%s): %d page(s) left to fetch\n", id, url, r.PageCount)
		return
	}
	if r.PageCount == 0 {
		return // a cut-short list, and no failed page
	}
	fmt.Fprintf(a.stdout, "retrying %d failed page(s) of crawl %s (%s):\n", r.PageCount, id, url)
	for _, p := range r.Pages[:min(len(r.Pages), retryShownPages)] {
		fmt.Fprintf(a.stdout, "  %s (depth %d): %s\n", p.URL, p.Depth, oneLine(p.Note))
	}
	if more := r.PageCount - int64(min(len(r.Pages), retryShownPages)); more > 0 {
		fmt.Fprintf(a.stdout, "  … and %d more (--json lists them)\n", more)
	}
}
