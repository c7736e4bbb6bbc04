package submit

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// Typed Rerun refusals callers can test with errors.Is.
var (
	// ErrStillRunning: the job's workflow has not ended.
	ErrStillRunning = errors.New("job is still running")
	// ErrNothingFailed: no hook (or crawl page) of the job's last run
	// failed.
	ErrNothingFailed = errors.New("nothing failed to retry")
	// ErrAborted: the job was aborted; a retry runs what failed in a job
	// that ended (submit it again instead).
	ErrAborted = errors.New("job was aborted")
	// ErrNothingLeft: a crawl to continue has no page READY.
	ErrNothingLeft = errors.New("no page left to crawl")
	// ErrNotACrawl: only a crawl can be continued.
	ErrNotACrawl = errors.New("job is not a crawl")
	// ErrNotAborted: only an aborted job can be un-aborted.
	ErrNotAborted = errors.New("job was not aborted")
)

// maxPagesListed bounds the failed pages Rerun lists (the retry requeues
// every failed page however many there are; Retried.PageCount counts them).
const maxPagesListed = frontier.MaxPagesLimit

// Retried is what a retry runs again: a snapshot's failed hooks, or a
// crawl's failed pages.
type Retried struct {
	// Crawl tells a crawl's retry from a snapshot's.
	Crawl bool
	// PreviousRunID is the run whose failures are retried.
	PreviousRunID string
	// Hooks are the snapshot's failed hooks (PLUGIN/NAME).
	Hooks []string
	// Pages are the crawl's failed pages in discovery order (the first
	// maxPagesListed); PageCount counts them all (a continue: the READY
	// pages, none listed).
	Pages     []frontier.Page
	PageCount int64
	// Continue: the crawl goes on from its READY pages (Continue).
	Continue bool
	// ListPartial: the crawl's URL list was cut short while it was
	// seeded; the new run seeds the rest of it first.
	ListPartial bool
}

// Rerun starts a new run of the job's workflow (same workflow ID) that
// runs again only what failed in the last run, the one place that decides
// between a snapshot and a crawl (by the last run's workflow type): a
// SnapshotWorkflow runs the hooks whose final status was failed
// (workflows.Rerun), a CrawlWorkflow the pages whose final status is
// failed in its frontier f (workflows.CrawlRerun). The last run's input is
// otherwise unchanged. It refuses with ErrStillRunning while the last run
// is running, ErrAborted for an aborted crawl, and ErrNothingFailed when
// nothing failed; a crawl whose frontier expired gives
// frontier.ErrNoFrontier.
func Rerun(ctx context.Context, c client.Client, f *frontier.Frontier, workflowID string) (client.WorkflowRun, Retried, error) {
	return rerun(ctx, c, f, workflowID, rerunMode{})
}

// Unabort starts a new run of an aborted job (mnbot's un-abort, `starter
// unabort`) through Rerun's path: a crawl goes on from the pages its
// frontier f holds READY (the pages the abort stopped were released to
// READY), requeueing nothing, with its settings and limits as they were
// (Continue's run): no page is fetched twice; a snapshot runs what Rerun
// runs (the failed hooks, and those the abort stopped before they ran),
// keeping the other results. The job must have been aborted
// (ErrNotAborted) and still be retained: its frontier and Redis record
// expire with redis.retain_aborted.
func Unabort(ctx context.Context, c client.Client, f *frontier.Frontier, workflowID string) (client.WorkflowRun, Retried, error) {
	return rerun(ctx, c, f, workflowID, rerunMode{unabort: true})
}

// rerunMode is what a new run over an ended run does besides retrying
// failures: continue a crawl with new limits, or un-abort.
type rerunMode struct {
	limits  *model.Settings // Continue's limits
	unabort bool
}

// continues reports whether the crawl goes on from its READY pages.
func (m rerunMode) continues() bool { return m.limits != nil || m.unabort }

// rerun is Rerun and Unabort.
func rerun(ctx context.Context, c client.Client, f *frontier.Frontier, workflowID string, mode rerunMode) (client.WorkflowRun, Retried, error) {
	runID, crawl, err := endedRun(ctx, c, workflowID)
	if err != nil {
		return nil, Retried{}, err
	}
	if crawl {
		return rerunCrawl(ctx, c, f, workflowID, runID, mode)
	}
	st, err := lastStatus(ctx, c, workflowID, runID)
	if err != nil {
		return nil, Retried{}, err
	}
	if mode.unabort && st.State != model.StateAborted {
		return nil, Retried{}, fmt.Errorf("unabort job %s: %w: run %s ended %s (starter retry runs its failed hooks)", workflowID, ErrNotAborted, runID, st.State)
	}
	var in workflows.SnapshotInput
	if err := lastInput(ctx, c, workflowID, runID, &in); err != nil {
		return nil, Retried{}, err
	}
	rerun, err := workflows.RerunOf(runID, st)
	if err != nil {
		return nil, Retried{}, fmt.Errorf("retry job %s: no hook failed (%w): %w", workflowID, ErrNothingFailed, err)
	}
	in.Rerun = rerun
	if err := in.Validate(); err != nil {
		return nil, Retried{}, fmt.Errorf("retry job %s: input of run %s: %w", workflowID, runID, err)
	}
	r := Request{Ident: in.Job.Ident, URL: in.Job.URL, Pool: config.Pool{Name: in.Pool, TaskQueue: in.TaskQueue}}
	run, err := startRerun(ctx, c, workflowID, r, workflows.SnapshotWorkflow, in)
	if err != nil {
		return nil, Retried{}, err
	}
	return run, Retried{PreviousRunID: runID, Hooks: rerun.Hooks}, nil
}

// Continue starts a new run of a crawl that ended (one finished at a
// limit, typically) that goes on from the pages its frontier f holds
// READY, requeueing nothing (workflows.CrawlRerun.Continue): no page is
// fetched twice. The run's settings are the last run's with its limits
// replaced by limits' MaxPages, MaxBytes and MaxDuration (zero: none);
// a page limit counts every page the crawl fetched so far. Refused as
// Rerun is, with ErrNotACrawl for a snapshot and ErrNothingLeft when no
// page is READY.
func Continue(ctx context.Context, c client.Client, f *frontier.Frontier, workflowID string, limits model.Settings) (client.WorkflowRun, Retried, error) {
	runID, crawl, err := endedRun(ctx, c, workflowID)
	if err != nil {
		return nil, Retried{}, err
	}
	if !crawl {
		return nil, Retried{}, fmt.Errorf("continue job %s: %w: continue goes on with a crawl's pages (retry runs a snapshot's failed hooks)", workflowID, ErrNotACrawl)
	}
	return rerunCrawl(ctx, c, f, workflowID, runID, rerunMode{limits: &limits})
}

// endedRun is the last run of workflowID, refused with ErrStillRunning
// while it runs, and whether it is a crawl.
func endedRun(ctx context.Context, c client.Client, workflowID string) (runID string, crawl bool, err error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return "", false, fmt.Errorf("retry job %s: describe its workflow: %w", workflowID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	runID = info.GetExecution().GetRunId()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return "", false, fmt.Errorf("retry job %s: %w (run %s): wait for it to end, or abort it, before retrying", workflowID, ErrStillRunning, runID)
	}
	return runID, info.GetType().GetName() == workflows.CrawlWorkflowName, nil
}

// rerunCrawl retries a crawl's failed pages: the new run starts from the
// existing frontier with the last run's settings and rules. With limits
// it continues the crawl instead (Continue), un-aborting it continues it
// with its limits as they were (Unabort).
func rerunCrawl(ctx context.Context, c client.Client, f *frontier.Frontier, workflowID, runID string, mode rerunMode) (client.WorkflowRun, Retried, error) {
	limits := mode.limits
	if f == nil {
		return nil, Retried{}, fmt.Errorf("retry crawl %s: no frontier reader given (a bug in the caller)", workflowID)
	}
	var st workflows.CrawlStatus
	if err := c.GetWorkflow(ctx, workflowID, runID).Get(ctx, &st); err != nil {
		return nil, Retried{}, fmt.Errorf("retry crawl %s: run %s ended without the crawl's status (terminated or timed out?): %w", workflowID, runID, err)
	}
	switch aborted := st.State == model.StateAborted; {
	case aborted && !mode.unabort:
		return nil, Retried{}, fmt.Errorf("retry crawl %s: %w (run %s): starter unabort goes on with it (within redis.retain_aborted), or submit it again with --force", workflowID, ErrAborted, runID)
	case !aborted && mode.unabort:
		return nil, Retried{}, fmt.Errorf("unabort crawl %s: %w: run %s ended %s (starter retry runs its failed pages)", workflowID, ErrNotAborted, runID, st.State)
	}
	var in workflows.CrawlInput
	if err := lastInput(ctx, c, workflowID, runID, &in); err != nil {
		return nil, Retried{}, err
	}
	out := Retried{Crawl: true, PreviousRunID: runID, Continue: mode.continues()}
	if mode.continues() || in.URLList != nil {
		// A URL list cut short while it was seeded (frontier
		// Counts.ListPartial) is something to do: the new run seeds
		// the rest of it (workflows' resumesList).
		counts, err := f.Counts(ctx, in.Crawl.Job.Ident)
		switch {
		case err != nil && mode.continues():
			return nil, Retried{}, fmt.Errorf("continue crawl %s: count its pages: %w", workflowID, err)
		case err != nil && !errors.Is(err, frontier.ErrNoFrontier): // none: the failed pages' listing says so
			return nil, Retried{}, fmt.Errorf("retry crawl %s: count its pages: %w", workflowID, err)
		}
		out.ListPartial = counts.ListPartial && in.URLList != nil
		if mode.continues() && counts.Ready == 0 && !out.ListPartial {
			return nil, Retried{}, fmt.Errorf("continue crawl %s: %w in run %s (%d pages done): retry its failed pages instead", workflowID, ErrNothingLeft, runID, counts.Done)
		}
		if mode.continues() {
			out.PageCount = counts.Ready
		}
	}
	filter := frontier.Filter{State: frontier.StateDone, Status: frontier.StatusFailed}
	for cursor := int64(0); !mode.continues(); {
		pages, next, err := f.Pages(ctx, in.Crawl.Job.Ident, filter, cursor, frontier.MaxPagesLimit)
		if err != nil {
			return nil, Retried{}, fmt.Errorf("retry crawl %s: list its failed pages: %w", workflowID, err)
		}
		out.PageCount += int64(len(pages))
		out.Pages = append(out.Pages, pages[:min(len(pages), maxPagesListed-len(out.Pages))]...)
		if next == 0 {
			break
		}
		cursor = next
	}
	if out.PageCount == 0 && !out.ListPartial {
		return nil, Retried{}, fmt.Errorf("retry crawl %s: no page failed (%w) in run %s (%d pages done)", workflowID, ErrNothingFailed, runID, st.Counts.Done)
	}
	in = crawlRerunInput(in, st, runID, out.PageCount)
	in.Rerun.Continue = mode.continues()
	in.Rerun.ListPartial = out.ListPartial
	if limits != nil {
		in.Settings.MaxPages, in.Settings.MaxBytes, in.Settings.MaxDuration = limits.MaxPages, limits.MaxBytes, limits.MaxDuration
	}
	if err := in.Validate(); err != nil {
		return nil, Retried{}, fmt.Errorf("retry crawl %s: input of run %s: %w", workflowID, runID, err)
	}
	r := Request{Ident: in.Crawl.Job.Ident, URL: in.Crawl.Job.URL, FetchDepth: model.FetchInf,
		Pool: config.Pool{Name: in.Pool, TaskQueue: in.TaskQueue}}
	run, err := startRerun(ctx, c, workflowID, r, workflows.CrawlWorkflow, in)
	if err != nil {
		return nil, Retried{}, err
	}
	return run, out, nil
}

// crawlRerunInput is the input of a retry of run runID, whose last input
// was in and whose final status is st, for pages failed pages: the run
// goes on with the run's last settings and rules, from the frontier (no
// carry). A URL-list crawl learns its start URLs from its list; the first
// run's input never held them, its status does.
func crawlRerunInput(in workflows.CrawlInput, st workflows.CrawlStatus, runID string, pages int64) workflows.CrawlInput {
	in.Carry = nil
	in.Settings = st.Settings
	if in.URLList != nil && len(in.Crawl.Scope.StartURLs) == 0 {
		in.Crawl.Scope.StartURLs = st.StartURLs
	}
	in.Rerun = &workflows.CrawlRerun{PreviousRunID: runID, Pages: pages, SettingsVersion: st.SettingsVersion, Rules: st.Rules}
	return in
}

// startRerun starts the retry's run with the job's start options.
func startRerun(ctx context.Context, c client.Client, workflowID string, r Request, wf, in any) (client.WorkflowRun, error) {
	opts := StartOptions(r)
	opts.ID = workflowID
	run, err := c.ExecuteWorkflow(ctx, opts, wf, in)
	if err != nil {
		return nil, fmt.Errorf("retry job %s: start a new run: %w", workflowID, err)
	}
	return run, nil
}

// lastStatus is the final Status of a run that ended: its result, or the
// details of the error a failed or aborted job ends with.
func lastStatus(ctx context.Context, c client.Client, workflowID, runID string) (workflows.Status, error) {
	var st workflows.Status
	err := c.GetWorkflow(ctx, workflowID, runID).Get(ctx, &st)
	if err == nil {
		return st, nil
	}
	if s, ok := workflows.EndStatus(err); ok {
		return s, nil
	}
	return st, fmt.Errorf("retry job %s: run %s ended without the job's status (terminated or timed out?): %w", workflowID, runID, err)
}

// lastInput decodes the input the run was started with (its first history
// event) into in.
func lastInput(ctx context.Context, c client.Client, workflowID, runID string, in any) error {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return fmt.Errorf("retry job %s: run %s has no history", workflowID, runID)
	}
	ev, err := it.Next()
	if err != nil {
		return fmt.Errorf("retry job %s: read the history of run %s: %w", workflowID, runID, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil || len(attrs.GetInput().GetPayloads()) != 1 {
		return fmt.Errorf("retry job %s: run %s: first event carries no workflow input", workflowID, runID)
	}
	if err := converter.GetDefaultDataConverter().FromPayload(attrs.GetInput().GetPayloads()[0], in); err != nil {
		return fmt.Errorf("retry job %s: decode the input of run %s: %w", workflowID, runID, err)
	}
	return nil
}
