package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/tclient"
	"github.com/archiveflow/archiveflow/workflows"
)

// hooksView is the per-hook part of `status` and of a --wait result: the
// results table's rows, the hints about skipped hooks, and where the rows
// came from (or why there are none).
type hooksView struct {
	Hooks []hookRow `json:"hooks,omitempty"`
	Hints []string  `json:"hints,omitempty"`
	// HooksSource is "temporal" when the rows are the workflow's status.
	HooksSource string `json:"hooks_source,omitempty"`
	// HooksNote says why there are no rows (the counts come from Redis).
	HooksNote string `json:"hooks_note,omitempty"`
}

func hooksViewOf(st workflows.Status) hooksView {
	rows := hookRows(st)
	return hooksView{Hooks: rows, Hints: hookHints(rows), HooksSource: "temporal"}
}

// queryStatus asks a job's workflow for its Status. Temporal answers for
// a closed workflow too, as long as it retains it.
func queryStatus(ctx context.Context, c client.Client, workflowID, runID string, timeout time.Duration) (workflows.Status, error) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	val, err := c.QueryWorkflow(qctx, workflowID, runID, workflows.QueryStatus)
	if err != nil {
		return workflows.Status{}, err
	}
	var st workflows.Status
	if err := val.Get(&st); err != nil {
		return st, fmt.Errorf("decode status of %s: %w", workflowID, err)
	}
	withSegmentProgress(qctx, c, workflowID, runID, &st)
	return st, nil
}

// withSegmentProgress shows each hook of a running host-steps segment
// (job.host_steps: one RunSteps activity for several steps) as it is: the
// workflow knows the segment's hooks only as "running" until the segment
// ends, the segment's heartbeat knows which ended (with their results),
// which run and which have not started. Best effort: without a heartbeat
// the workflow's view stays.
func withSegmentProgress(ctx context.Context, c client.Client, workflowID, runID string, st *workflows.Status) {
	if st.State.Final() || !slices.ContainsFunc(st.Hooks, func(h workflows.HookStatus) bool { return h.Phase == workflows.PhaseRunning }) {
		return
	}
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		return
	}
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetActivityType().GetName() != runStepsActivity || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var p activities.StepsProgress
		if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p); err != nil {
			continue
		}
		applySegmentProgress(st, p)
	}
}

// runStepsActivity is the activity type of a host-steps segment.
const runStepsActivity = "RunSteps"

// applySegmentProgress marks the running hooks the segment's heartbeat
// knows: ended with a final result → done with it; started → running;
// neither → pending (not started yet).
func applySegmentProgress(st *workflows.Status, p activities.StepsProgress) {
	done := map[string]activities.StepOutcome{}
	for _, o := range p.Done {
		done[o.Hook] = o
	}
	running := map[string]bool{}
	for _, k := range p.Running {
		running[k] = true
	}
	for i, h := range st.Hooks {
		if h.Phase != workflows.PhaseRunning {
			continue
		}
		key := h.Plugin + "/" + h.Hook
		o, ended := done[key]
		switch {
		case ended && o.Failure == nil:
			res := o.Result.ArchiveResult
			res.Plugin, res.Hook, res.Step, res.Background = h.Plugin, h.Hook, h.Step, h.Background
			st.Hooks[i].Phase, st.Hooks[i].Result = workflows.PhaseDone, &res
		case ended, running[key]:
			// A first attempt that failed is retried on its own: running.
		default:
			st.Hooks[i].Phase = workflows.PhasePending
		}
	}
}

// statusFromError returns the job's Status when the workflow ended with
// an error carrying it as details (a failed or aborted job).
func statusFromError(err error) (workflows.Status, bool) {
	var st workflows.Status
	var appErr *temporal.ApplicationError
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &appErr) && appErr.HasDetails():
		if appErr.Details(&st) != nil {
			return st, false
		}
	case errors.As(err, &canceled) && canceled.HasDetails():
		if canceled.Details(&st) != nil {
			return st, false
		}
	default:
		return st, false
	}
	return st, st.Ident != ""
}

// Timeouts of the optional status query of `starter status`: Redis has
// answered already, Temporal only adds the per-hook rows.
const (
	statusDialTimeout  = 5 * time.Second
	statusQueryTimeout = 10 * time.Second
)

// statusHooks asks Temporal for the job's per-hook results, and first
// runs also (when not nil) with the same client. When the workflow cannot
// be reached it says why; the caller still has Redis' counts.
func (a *app) statusHooks(ctx context.Context, inv *invocation, v rkeys.JobView, also func(client.Client)) hooksView {
	unavailable := func(why string, err error) hooksView {
		return hooksView{HooksNote: fmt.Sprintf("per-hook results unavailable: %s (%v); the counts are Redis'", why, err)}
	}
	dctx, cancel := context.WithTimeout(ctx, statusDialTimeout)
	defer cancel()
	tc, err := tclient.Dial(dctx, inv.cfg.Temporal, inv.log)
	if err != nil {
		return unavailable("Temporal is unreachable", err)
	}
	defer tc.Close()
	if also != nil {
		also(tc)
	}
	hv := a.statusHooksOf(ctx, tc, workflowID(v), v.RunID)
	if hv.HooksNote != "" {
		hv.HooksNote += "; the counts are Redis'"
	}
	return hv
}

// statusHooksOf asks the workflow workflowID (run runID, "" the latest)
// for its per-hook results, or says why there are none.
func (a *app) statusHooksOf(ctx context.Context, tc client.Client, workflowID, runID string) hooksView {
	unavailable := func(why string, err error) hooksView {
		return hooksView{HooksNote: fmt.Sprintf("per-hook results unavailable: %s (%v)", why, err)}
	}
	st, err := queryStatus(ctx, tc, workflowID, runID, statusQueryTimeout)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return unavailable("Temporal no longer retains the workflow", err)
	case errors.Is(err, context.DeadlineExceeded):
		return unavailable("no worker of the job's pool answered the status query", err)
	case err != nil:
		return unavailable("the status query failed", err)
	}
	return hooksViewOf(st)
}

// printStatusHooks prints the per-hook table of `status`, or why there
// is none.
func (a *app) printStatusHooks(hv hooksView) {
	if hv.HooksNote != "" {
		fmt.Fprintf(a.stdout, "  results:  %s\n", hv.HooksNote)
		return
	}
	width, _, _ := a.terminal()
	writeHookTable(a.stdout, hv.Hooks, hv.Hints, width)
}
