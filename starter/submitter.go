package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/submit"
)

// submitted is one job this command started.
type submitted struct {
	Ident       string    `json:"ident"`
	URL         string    `json:"url"`
	WorkflowID  string    `json:"workflow_id"`
	RunID       string    `json:"run_id"`
	TaskQueue   string    `json:"task_queue"`
	Pool        string    `json:"pool"`
	PriorityKey int       `json:"priority_key"`
	StartsAt    time.Time `json:"starts_at,omitzero"`
	UI          string    `json:"ui,omitempty"`
}

// submitter creates the Redis jobs and starts the workflows of one
// validated submission, undoing everything on failure.
type submitter struct {
	app *app
	inv *invocation
	b   *backend.Backend
	s   *submission
}

// submitAll checks every ident for a conflict first, then submits each
// target; if any submission fails, the ones already made are undone.
func (sb *submitter) submitAll(ctx context.Context) ([]submitted, error) {
	if err := sb.checkConflicts(ctx); err != nil {
		return nil, err
	}
	op := newOpID()
	var done []submitted
	for _, t := range sb.s.targets {
		j, err := sb.submitOne(ctx, t, op)
		if err != nil {
			sb.undo(done)
			if len(done) > 0 {
				err = fmt.Errorf("%w (the %d job(s) submitted before it were withdrawn)", err, len(done))
			}
			return nil, err
		}
		done = append(done, j)
	}
	return done, nil
}

// checkConflicts refuses the whole submission when any ident is running,
// or retained and --force was not given.
func (sb *submitter) checkConflicts(ctx context.Context) error {
	var errs []error
	for _, t := range sb.s.targets {
		v, err := sb.b.Store.GetJob(ctx, t.Ident)
		switch {
		case errors.Is(err, rkeys.ErrJobNotFound):
			continue
		case err != nil:
			return withCode(exitUnavailable, fmt.Errorf("check job %s: %w", t.Ident, err))
		case !v.Final():
			errs = append(errs, fmt.Errorf("%s: job %s for %s is already %s: abort it first (starter abort %s)", t.Source, t.Ident, t.URL, v.State, t.Ident))
		case !sb.s.force:
			errs = append(errs, fmt.Errorf("%s: job %s for %s already ran (%s, kept for %s): pass --force to start a fresh job", t.Source, t.Ident, t.URL, v.State, v.TTL.Round(time.Second)))
		}
	}
	if len(errs) > 0 {
		return withCode(exitConflict, errors.Join(errs...))
	}
	return nil
}

// submitOne creates the Redis job and starts its workflow; if the start
// fails the Redis job is removed again.
func (sb *submitter) submitOne(ctx context.Context, t target, op string) (submitted, error) {
	cfg, s := sb.inv.cfg, sb.s
	req := submit.Request{
		Ident: t.Ident, URL: t.URL, FetchDepth: s.depth, Pool: s.pool, Settings: s.settings,
		PriorityKey: s.priorityKey, Nice: s.nice, StartDelay: s.startDelay, NotBefore: s.notBefore,
		StartedBy: startedBy(), StartedIn: "cli", CreateOp: t.Ident + "/" + op, Replace: s.force,
		CrawlDepth: s.crawlDepth, Rules: s.rules, Robots: s.robots, Sitemaps: s.sitemaps,
		Tag: s.tag,
	}
	workflow, in, err := submit.Workflow(cfg, req)
	if err != nil {
		return submitted{}, withCode(exitUsage, fmt.Errorf("%s: %w", t.Source, err))
	}
	if req.IsCrawl() && s.force {
		// A crawl replacing a retained one starts from an empty frontier.
		if err := sb.frontier().Delete(ctx, t.Ident, 500); err != nil {
			return submitted{}, withCode(exitUnavailable, fmt.Errorf("%s: remove the retained crawl's pages: %w", t.Source, err))
		}
	}
	err = sb.b.Store.CreateJob(ctx, submit.Job(req))
	if err != nil {
		if errors.Is(err, rkeys.ErrJobExists) {
			return submitted{}, withCode(exitConflict, fmt.Errorf("%s: %w", t.Source, err))
		}
		return submitted{}, withCode(exitUnavailable, fmt.Errorf("%s: %w", t.Source, err))
	}
	run, err := sb.b.Temporal.ExecuteWorkflow(ctx, submit.StartOptions(req), workflow, in)
	if err != nil {
		sb.discard(t.Ident)
		return submitted{}, startError(t, err)
	}
	sb.inv.log.Info("job submitted", logging.Ident(t.Ident), zap.String("url", t.URL), zap.String("run_id", run.GetRunID()))
	j := submitted{
		Ident: t.Ident, URL: t.URL, WorkflowID: run.GetID(), RunID: run.GetRunID(),
		TaskQueue: req.Queue(), Pool: s.pool.Name, PriorityKey: s.priorityKey,
		UI: uiLink(cfg.Temporal, t.Ident),
	}
	if s.startDelay > 0 {
		j.StartsAt = s.notBefore
	}
	return j, nil
}

// startError classifies a failed workflow start.
func startError(t target, err error) error {
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return withCode(exitConflict, fmt.Errorf("%s: start workflow %s for %s: a workflow with this ident is already running in Temporal: %w", t.Source, t.Ident, t.URL, err))
	}
	return withCode(exitUnavailable, fmt.Errorf("%s: start workflow %s for %s: %w", t.Source, t.Ident, t.URL, err))
}

// withdrawnReason is the reason undo terminates a withdrawn job's
// workflow with: status knows by it that the job never was.
const withdrawnReason = "submission withdrawn: a later URL of the same submit failed"

// undo withdraws jobs submitted earlier in this command: their workflows
// are terminated and their Redis jobs removed.
func (sb *submitter) undo(done []submitted) {
	for _, j := range done {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		err := sb.b.Temporal.TerminateWorkflow(ctx, j.WorkflowID, j.RunID, withdrawnReason)
		cancel()
		if err != nil {
			sb.inv.log.Warn("withdraw job: terminate workflow", logging.Ident(j.Ident), zap.Error(err))
		}
		sb.discard(j.Ident)
	}
}

// discard removes a job this command created from Redis.
func (sb *submitter) discard(ident string) {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	if err := sb.b.Store.DeleteJob(ctx, ident); err != nil {
		sb.inv.log.Error("withdraw job: remove it from Redis", logging.Ident(ident), zap.Error(err))
	}
}

// frontier reads and writes crawls' pages on the starter's Redis.
func (sb *submitter) frontier() *frontier.Frontier {
	return newFrontier(sb.b)
}

// newOpID identifies one submit command (repeat-safety key of CreateJob).
func newOpID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// printSubmitted prints the submitted jobs with their Web UI links.
func (a *app) printSubmitted(inv *invocation, s *submission, done []submitted) error {
	if inv.json {
		if s.wait {
			return nil // the --wait result carries the jobs
		}
		return writeJSON(a.stdout, map[string]any{"jobs": done})
	}
	for _, j := range done {
		when := ""
		if !j.StartsAt.IsZero() {
			when = "  starts " + j.StartsAt.Local().Format(time.RFC3339)
		}
		fmt.Fprintf(a.stdout, "submitted %s  %s  (queue %s, priority %d%s)\n", j.Ident, j.URL, j.TaskQueue, j.PriorityKey, when)
		if j.UI != "" {
			fmt.Fprintf(a.stdout, "  Web UI: %s\n", j.UI)
		}
	}
	if len(done) > 1 {
		fmt.Fprintf(a.stdout, "%d jobs submitted\n", len(done))
	}
	return nil
}
