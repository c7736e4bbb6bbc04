package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/workflows"
)

// progress is one job's progress as --wait shows it.
type progress struct {
	State     model.JobState `json:"state"`
	Step      int            `json:"current_step"`
	HooksDone int64          `json:"hooks_done"`
	Hooks     int64          `json:"hooks_total"`
	Bytes     int64          `json:"bytes_downloaded"`
}

func progressOf(v rkeys.JobView) progress {
	return progress{
		State: v.State, Step: v.CurrentStep, Hooks: v.HooksTotal, Bytes: v.BytesDownloaded,
		HooksDone: v.HooksDone(),
	}
}

// outcome is how a waited-for job ended.
type outcome struct {
	submitted
	State     model.JobState     `json:"state"`
	Error     string             `json:"error,omitempty"`
	Hooks     []hookOutcome      `json:"hooks,omitempty"`
	Counters  *workflowsCounters `json:"counters,omitempty"`
	Elapsed   time.Duration      `json:"elapsed_ns"`
	OutputDir string             `json:"output_dir"`
	status    *workflows.Status
}

// workflowsCounters aliases the workflow's counters for JSON output.
type workflowsCounters = struct {
	Total     int   `json:"hooks_total"`
	Succeeded int   `json:"hooks_succeeded"`
	Failed    int   `json:"hooks_failed"`
	Skipped   int   `json:"hooks_skipped"`
	NoResults int   `json:"hooks_noresults"`
	Bytes     int64 `json:"output_bytes"`
}

type hookOutcome struct {
	Hook   string       `json:"hook"`
	Status model.Status `json:"status"`
	Error  string       `json:"error,omitempty"`
}

type result struct {
	idx int
	st  workflows.Status
	err error
}

// waitJobs follows the jobs until each ends, printing progress as it
// changes, and returns exit 1 when any did not finish successfully.
func (a *app) waitJobs(ctx context.Context, inv *invocation, b *backend.Backend, jobs []submitted) error {
	start := a.now()
	results := make(chan result, len(jobs))
	for i, j := range jobs {
		go func() {
			var st workflows.Status
			err := b.Temporal.GetWorkflow(ctx, j.WorkflowID, j.RunID).Get(ctx, &st)
			if end, ok := workflows.EndStatus(err); ok {
				// A failed or aborted job ends its workflow so, its Status
				// in the error's details.
				st, err = end, nil
			}
			results <- result{idx: i, st: st, err: err}
		}()
	}
	last := make([]progress, len(jobs))
	outcomes := make([]*outcome, len(jobs))
	tick := time.NewTicker(a.pollInterval)
	defer tick.Stop()
	for remaining := len(jobs); remaining > 0; {
		select {
		case <-ctx.Done():
			return withCode(exitJobFailed, fmt.Errorf("stopped waiting (%v); the jobs keep running: follow them with starter status IDENT", ctx.Err()))
		case r := <-results:
			remaining--
			o := a.outcomeOf(inv, jobs[r.idx], r, a.now().Sub(start))
			outcomes[r.idx] = o
			if !inv.json {
				a.printOutcome(o)
			}
		case <-tick.C:
			a.showProgress(ctx, inv, b, jobs, outcomes, last, a.now().Sub(start))
		}
	}
	failed := 0
	for _, o := range outcomes {
		if o.State != model.StateFinished {
			failed++
		}
	}
	if inv.json {
		if err := writeJSON(a.stdout, map[string]any{"jobs": outcomes}); err != nil {
			return err
		}
	}
	if failed > 0 {
		return withCode(exitJobFailed, fmt.Errorf("%d of %d job(s) did not finish successfully", failed, len(jobs)))
	}
	return nil
}

// showProgress prints a line for every running job whose progress changed.
func (a *app) showProgress(ctx context.Context, inv *invocation, b *backend.Backend, jobs []submitted, outcomes []*outcome, last []progress, elapsed time.Duration) {
	if inv.json {
		return
	}
	for i, j := range jobs {
		if outcomes[i] != nil {
			continue
		}
		v, err := b.Store.GetJob(ctx, j.Ident)
		if err != nil {
			continue // transient: the next tick tries again
		}
		p := progressOf(v)
		if p == last[i] {
			continue
		}
		last[i] = p
		fmt.Fprintf(a.stdout, "%s  %-8s step %d/9  hooks %d/%d  %s  %s\n",
			j.Ident, p.State, p.Step, p.HooksDone, p.Hooks, humanBytes(p.Bytes), elapsed.Round(100*time.Millisecond))
	}
}

// outcomeOf turns a workflow result into an outcome.
func (a *app) outcomeOf(inv *invocation, j submitted, r result, elapsed time.Duration) *outcome {
	dir, err := filepath.Abs(filepath.Join(inv.cfg.ArchiveDir, "snapshots", j.Ident))
	if err != nil {
		dir = filepath.Join(inv.cfg.ArchiveDir, "snapshots", j.Ident)
	}
	o := &outcome{submitted: j, Elapsed: elapsed, OutputDir: dir}
	if r.err != nil {
		o.State = model.StateFailed
		var canceled *temporal.CanceledError
		var terminated *temporal.TerminatedError
		if errors.As(r.err, &canceled) || errors.As(r.err, &terminated) {
			o.State = model.StateAborted
		}
		o.Error = r.err.Error()
		return o
	}
	st := r.st
	o.status = &st
	o.State, o.Error = st.State, st.Error
	o.Counters = &workflowsCounters{
		Total: st.Counters.Total, Succeeded: st.Counters.Succeeded, Failed: st.Counters.Failed,
		Skipped: st.Counters.Skipped, NoResults: st.Counters.NoResults, Bytes: st.Counters.OutputSize,
	}
	for _, h := range st.Hooks {
		ho := hookOutcome{Hook: h.Plugin + "/" + h.Hook}
		if h.Result != nil {
			ho.Status, ho.Error = h.Result.Status, h.Result.Error
		}
		o.Hooks = append(o.Hooks, ho)
	}
	return o
}

// printOutcome prints how a job ended, where its outputs are and its link.
func (a *app) printOutcome(o *outcome) {
	fmt.Fprintf(a.stdout, "%s  %s  %s in %s\n", o.Ident, strings.ToUpper(string(o.State)), o.URL, o.Elapsed.Round(100*time.Millisecond))
	if c := o.Counters; c != nil {
		fmt.Fprintf(a.stdout, "  hooks: %d total, %d succeeded, %d noresults, %d skipped, %d failed; %s of output\n",
			c.Total, c.Succeeded, c.NoResults, c.Skipped, c.Failed, humanBytes(c.Bytes))
	}
	for _, h := range o.Hooks {
		if h.Status == model.StatusFailed {
			fmt.Fprintf(a.stdout, "  failed hook %s: %s\n", h.Hook, h.Error)
		}
	}
	if o.Error != "" {
		fmt.Fprintf(a.stdout, "  error: %s\n", o.Error)
	}
	fmt.Fprintf(a.stdout, "  outputs: %s\n", o.OutputDir)
	if o.UI != "" {
		fmt.Fprintf(a.stdout, "  Web UI: %s\n", o.UI)
	}
}
