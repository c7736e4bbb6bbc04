package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/searchattr"
	"github.com/archiveflow/archiveflow/internal/tclient"
	"github.com/archiveflow/archiveflow/workflows"
)

// sourceTemporal is jobJSON.Source when Redis no longer has the job and
// the status is Temporal's record of its workflow.
const sourceTemporal = "temporal"

// statusFromTemporal is `status` of a job Redis no longer has (its hash
// expired after redis.retain_*, 5 s for an aborted one as in ArchiveBot,
// or was purged): while Temporal retains the job's workflow (the
// namespace's retention), that workflow says how the job ended. notFound
// is the error to return when Temporal has no record either.
func (a *app) statusFromTemporal(ctx context.Context, inv *invocation, id string, notFound error) error {
	tc, j, err := temporalRecord(ctx, inv, id, notFound)
	if err != nil {
		return err
	}
	defer tc.Close()
	a.recordStatus(ctx, tc, &j)
	if inv.json {
		return writeJSON(a.stdout, j)
	}
	printRecord(a.stdout, j)
	a.printStatusHooks(j.hooksView)
	return nil
}

// temporalRecord is Temporal's description of job id's workflow as the
// job's record (recordJSON), with the client to ask it more (the caller
// closes it). Without one, its error says why, after notFound (Redis has
// no job id): Temporal unreachable or retaining no such job (exit 3), or
// failing to answer (exit 5).
func temporalRecord(ctx context.Context, inv *invocation, id string, notFound error) (client.Client, jobJSON, error) {
	dctx, cancel := context.WithTimeout(ctx, statusDialTimeout)
	defer cancel()
	tc, err := tclient.Dial(dctx, inv.cfg.Temporal, inv.log)
	if err != nil {
		return nil, jobJSON{}, withCode(exitNotFound, fmt.Errorf("%w; Temporal, which may still retain its workflow, is unreachable: %w", notFound, err))
	}
	qctx, qcancel := context.WithTimeout(ctx, statusQueryTimeout)
	defer qcancel()
	desc, err := tc.DescribeWorkflowExecution(qctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		err = withCode(exitNotFound, fmt.Errorf("%w; Temporal retains no workflow %s either", notFound, id))
	case err != nil:
		err = withCode(exitUnavailable, fmt.Errorf("%w; describe its workflow in Temporal: %w", notFound, err))
	default:
		if why := notAJob(qctx, tc, desc); why != "" {
			err = withCode(exitNotFound, fmt.Errorf("%w; %s", notFound, why))
		}
	}
	if err != nil {
		tc.Close()
		return nil, jobJSON{}, err
	}
	return tc, recordJSON(inv, id, desc), nil
}

// notInRedis is the error of a command that needs a job's Redis record
// when Redis has none (err is rkeys.ErrJobNotFound). While Temporal
// retains the ended job's workflow, it says how and when the job ended,
// which retention expired its record, and then todo (what the user can do
// instead; "" for nothing). Otherwise, or when Temporal cannot say, it is
// err unchanged. Either way the exit code is 3 (exitNotFound).
func (a *app) notInRedis(ctx context.Context, inv *invocation, id string, err error, todo string) error {
	if !errors.Is(err, rkeys.ErrJobNotFound) {
		return err
	}
	tc, j, rerr := temporalRecord(ctx, inv, id, err)
	if rerr != nil {
		return err
	}
	tc.Close()
	if j.FinishedAt.IsZero() || !j.State.Final() {
		return err
	}
	key, keep := retentionOf(inv.cfg, j.State)
	why := fmt.Sprintf("job %s (%s) ended %s at %s, and its Redis record is gone: %s keeps it %s after the end (or starter purge removed it); starter status %s shows Temporal's record of the job",
		id, j.URL, j.State, j.FinishedAt.UTC().Format(time.RFC3339), key, keep, id)
	if todo != "" {
		why += "; " + todo
	}
	return withCode(exitNotFound, jobNotFound{id: id, why: why})
}

// retentionOf is the configuration key and value that keep a job ended in
// state in Redis (rkeys.Retention.Of).
func retentionOf(cfg *config.Config, state model.JobState) (string, time.Duration) {
	keep := backend.StoreOptions(cfg).Retention.Of(state)
	switch state {
	case model.StateAborted:
		return "redis.retain_aborted", keep
	case model.StateFailed:
		return "redis.retain_failed", keep
	default:
		return "redis.retain_completed", keep
	}
}

// notAJob says why the workflow desc describes is no job's record ("" when
// it is one): a workflow of another type under the ident, or the
// terminated workflow of a submission that was withdrawn (undo).
func notAJob(ctx context.Context, tc client.Client, desc *workflowservice.DescribeWorkflowExecutionResponse) string {
	info := desc.GetWorkflowExecutionInfo()
	id, runID := info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId()
	switch typ := info.GetType().GetName(); {
	case typ != workflows.SnapshotWorkflowName && typ != workflows.CrawlWorkflowName:
		return fmt.Sprintf("Temporal's workflow %s is a %s, not an archiveflow job", id, typ)
	case info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return ""
	}
	it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	if !it.HasNext() {
		return ""
	}
	ev, err := it.Next()
	if err == nil && ev.GetWorkflowExecutionTerminatedEventAttributes().GetReason() == withdrawnReason {
		return "its submission was withdrawn (" + withdrawnReason + "); Temporal keeps the terminated workflow " + id
	}
	return ""
}

// recordJSON is what Temporal's description of the job's workflow says:
// its run, times, task queue and the search attributes the workflow keeps
// (URL, state, step).
func recordJSON(inv *invocation, id string, desc *workflowservice.DescribeWorkflowExecutionResponse) jobJSON {
	info := desc.GetWorkflowExecutionInfo()
	j := jobJSON{
		Ident: id, WorkflowID: id, RunID: info.GetExecution().GetRunId(), TaskQueue: info.GetTaskQueue(),
		UI: uiLink(inv.cfg.Temporal, id), Source: sourceTemporal,
		Note: fmt.Sprintf("Redis no longer has the job (its hash expired after its retention, or was purged): this is Temporal's record of its workflow (%s)",
			strings.ToLower(strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"))),
	}
	if t := info.GetStartTime(); t != nil {
		j.StartedAt = t.AsTime()
	}
	if t := info.GetCloseTime(); t != nil {
		j.FinishedAt = t.AsTime()
	}
	if info.GetType().GetName() == workflows.CrawlWorkflowName {
		j.FetchDepth = model.FetchInf
	}
	attrs := info.GetSearchAttributes().GetIndexedFields()
	j.URL = keyword(attrs[searchattr.NameURL])
	j.State = model.JobState(keyword(attrs[searchattr.NameState]))
	var step int64
	if p := attrs[searchattr.NameStep]; p != nil && converter.GetDefaultDataConverter().FromPayload(p, &step) == nil {
		j.CurrentStep = int(step)
	}
	return j
}

// keyword decodes a keyword search attribute ("" when absent).
func keyword(p *commonpb.Payload) string {
	var s string
	if p != nil && converter.GetDefaultDataConverter().FromPayload(p, &s) == nil {
		return s
	}
	return ""
}

// recordStatus completes j from the workflow's status query (Temporal
// answers it for a closed workflow too, a worker of its pool replaying
// it): state, error, settings, the hooks' counts and results; a crawl's
// page counts and its start page's hooks. Without an answer j keeps what
// the description said and its hooks note says why.
func (a *app) recordStatus(ctx context.Context, tc client.Client, j *jobJSON) {
	qctx, cancel := context.WithTimeout(ctx, statusQueryTimeout)
	defer cancel()
	val, err := tc.QueryWorkflow(qctx, j.WorkflowID, j.RunID, workflows.QueryStatus)
	if err != nil {
		j.hooksView = hooksView{HooksNote: fmt.Sprintf("per-hook results unavailable: the status query failed (is a worker of its pool running?): %v", err)}
		return
	}
	undecoded := func(err error) {
		j.hooksView = hooksView{HooksNote: fmt.Sprintf("per-hook results unavailable: decode the status of %s: %v", j.WorkflowID, err)}
	}
	if j.FetchDepth == model.FetchInf {
		var cs workflows.CrawlStatus
		if err := val.Get(&cs); err != nil {
			undecoded(err)
			return
		}
		j.URL, j.State, j.Error, j.Settings, j.Limit = cs.URL, cs.State, cs.Error, cs.Settings, cs.Limit
		j.Pages = &cs.Counts
		j.hooksView = a.statusHooksOf(ctx, tc, workflows.CrawlSeedID(j.WorkflowID), "")
		return
	}
	var st workflows.Status
	if err := val.Get(&st); err != nil {
		undecoded(err)
		return
	}
	withSegmentProgress(qctx, tc, j.WorkflowID, j.RunID, &st)
	j.URL, j.State, j.Error, j.Settings, j.CurrentStep = st.URL, st.State, st.Error, st.Settings, st.CurrentStep
	j.HooksTotal, j.HooksSucceeded, j.HooksFailed = int64(st.Counters.Total), int64(st.Counters.Succeeded), int64(st.Counters.Failed)
	j.HooksSkipped, j.HooksNoResults = int64(st.Counters.Skipped), int64(st.Counters.NoResults)
	j.hooksDone = j.HooksSucceeded + j.HooksFailed + j.HooksSkipped + j.HooksNoResults
	j.hooksView = hooksViewOf(st)
}

// printRecord prints Temporal's record of a job Redis no longer has.
func printRecord(w io.Writer, j jobJSON) {
	fmt.Fprintf(w, "%s  %s\n", j.Ident, j.URL)
	fmt.Fprintf(w, "  note:     %s\n", j.Note)
	kind := "snapshot"
	if j.FetchDepth == model.FetchInf {
		kind = "crawl"
	}
	fmt.Fprintf(w, "  state:    %s (%s)", j.State, kind)
	if j.Error != "" {
		fmt.Fprintf(w, ": %s", j.Error)
	}
	fmt.Fprintln(w)
	if p := j.Pages; p != nil {
		printPages(w, p.Total, frontier.StateCounts{Ready: p.Ready, Claimed: p.Claimed, Skipped: p.Skipped, Done: p.Done,
			Succeeded: p.Succeeded, Failed: p.Failed, Deferred: p.Deferred})
	} else if j.HooksTotal > 0 {
		printSnapshotHooks(w, j)
	}
	fmt.Fprintf(w, "  run:      %s on %s\n", j.RunID, j.TaskQueue)
	printTimes(w, j)
	if j.UI != "" {
		fmt.Fprintf(w, "  Web UI:   %s\n", j.UI)
	}
}
