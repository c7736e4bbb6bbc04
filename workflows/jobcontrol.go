package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// control is a job workflow's control plane, the one SnapshotWorkflow and
// CrawlWorkflow share: where the job stands (jobStatus), its settings and
// their versions, the ordered Redis writer, the status query, the
// set_settings update and signal, the abort signal, a Temporal cancel
// request, the job's deadline, stopping (the first reason wins) and the
// wait for handlers and writes before the workflow returns. Each workflow
// supplies what differs: its status (the query's answer) and what new
// settings do (apply).
type control struct {
	ident string
	kind  string // "snapshot" or "crawl", in log lines
	runID string

	// dctx is disconnected from workflow cancellation: the workflow always
	// ends cleanly. runCtx is cancelled on stop (cancelRun).
	dctx      workflow.Context
	runCtx    workflow.Context
	cancelRun workflow.CancelFunc

	job      jobStatus
	settings settingsState
	writes   writer
	// hash writes the job's hash through writes (chosen once).
	hash jobHash

	// apply installs new settings and queues their Redis write; it returns
	// the write's sequence number and the new settings version.
	apply func(set model.Settings) (seq, version int)
	// waitState: this run shows a waiting job as StateWaiting
	// (waitingStateChange, asked once by showWaiting).
	waitState *bool
}

// newControl is the control plane of the job ident's workflow run ctx,
// pending, with its first settings.
func newControl(ctx workflow.Context, ident, kind string, set model.Settings) control {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return control{
		ident: ident, kind: kind, runID: workflow.GetInfo(ctx).WorkflowExecution.RunID,
		dctx:     dctx,
		job:      jobStatus{state: model.StatePending},
		settings: settingsState{current: set},
	}
}

// versionOnce reports that this run takes version 1 of change, asking
// GetVersion the first time only and keeping its answer in *on.
func versionOnce(ctx workflow.Context, on **bool, change string) bool {
	if *on == nil {
		v := workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1) == 1
		*on = &v
	}
	return **on
}

// log is the workflow's replay-safe logger.
func (c *control) log() log.Logger { return workflow.GetLogger(c.dctx) }

// serve installs the status query (status, a func() (T, error), answers
// it), the set_settings
// update, more (a workflow's own updates), the abort and set_settings
// signals, and the watch that turns a Temporal cancel request into an
// abort.
func (c *control) serve(ctx workflow.Context, status any, more func() error) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, status); err != nil {
		return fmt.Errorf("query %s: %w", QueryStatus, err)
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSetSettings, c.updateSettings,
		workflow.UpdateHandlerOptions{Validator: c.validateSettings})
	if err != nil {
		return fmt.Errorf("update %s: %w", UpdateSetSettings, err)
	}
	if more != nil {
		if err := more(); err != nil {
			return err
		}
	}
	abortCh := workflow.GetSignalChannel(ctx, SignalAbort)
	settingsCh := workflow.GetSignalChannel(ctx, SignalSetSettings)
	workflow.Go(c.dctx, func(gc workflow.Context) {
		for {
			sel := workflow.NewSelector(gc)
			sel.AddReceive(abortCh, func(ch workflow.ReceiveChannel, _ bool) {
				var req AbortRequest
				ch.Receive(gc, &req)
				c.stop(req.reason(), true)
			})
			sel.AddReceive(settingsCh, func(ch workflow.ReceiveChannel, _ bool) {
				var set model.Settings
				ch.Receive(gc, &set)
				if err := c.validateSettings(set); err != nil {
					c.log().Warn("ignored set_settings signal", "error", err)
					return
				}
				c.apply(set)
			})
			sel.Select(gc)
		}
	})
	workflow.Go(ctx, func(gc workflow.Context) {
		gc.Done().Receive(gc, nil)
		c.stop(reasonCancelled, true)
	})
	return nil
}

// stop cancels the run (hooks, pages, children in flight); the workflow
// then winds down. The first reason wins; an abort cannot be undone.
func (c *control) stop(reason string, operator bool) {
	if c.job.stopReason != "" || c.job.state.Final() {
		return
	}
	c.job.stopReason, c.job.aborted = reason, operator
	c.log().Info("stopping "+c.kind, "reason", reason)
	if c.cancelRun != nil {
		c.cancelRun()
	}
}

// startDeadline bounds the job with a timer that stops it after left (at
// once when left ≤ 0), never with a run timeout, which would end it without
// cleanup; none unless set. It returns the timer's cancel.
func (c *control) startDeadline(left time.Duration, set bool) func() {
	if !set {
		return func() {}
	}
	return c.after(left, "job max duration", func() { c.stop(reasonDeadline, false) })
}

// after runs fn once a timer named summary has waited left (at once when
// left ≤ 0), unless the returned cancel comes first.
func (c *control) after(left time.Duration, summary string, fn func()) workflow.CancelFunc {
	tctx, cancel := workflow.WithCancel(c.dctx)
	workflow.Go(tctx, func(gc workflow.Context) {
		if left > 0 {
			if err := workflow.NewTimerWithOptions(gc, left, workflow.TimerOptions{Summary: summary}).Get(gc, nil); err != nil {
				return
			}
		}
		fn()
	})
	return cancel
}

// finalState decides the job's final state and error from a stop or a
// failure: finished when neither happened.
func (c *control) finalState() (model.JobState, string) {
	switch {
	case c.job.aborted:
		return model.StateAborted, c.job.stopReason
	case c.job.stopReason != "":
		return model.StateFailed, c.job.stopReason
	case c.job.failure != "":
		return model.StateFailed, c.job.failure
	}
	return model.StateFinished, ""
}

// refuseChange refuses any change (what: the update's name) once the job
// is stopping or final.
func (c *control) refuseChange(what string) error {
	if c.job.state.Final() || c.job.stopReason != "" {
		word := string(c.job.state)
		if !c.job.state.Final() {
			word = "stopping"
		}
		return fmt.Errorf("%s on %s: job is %s; it can no longer change", what, c.ident, word)
	}
	return nil
}

// validateSettings rejects settings model.Settings.Validate refuses (ranges,
// ignore patterns), so the Redis store is never asked to write what it
// cannot; the bot's settings older than those the job has
// (model.Settings.OlderThan); and any change once the job is stopping or
// final.
func (c *control) validateSettings(set model.Settings) error {
	if err := c.refuseChange(UpdateSetSettings); err != nil {
		return err
	}
	if err := set.Validate(); err != nil {
		return fmt.Errorf("set_settings on %s: %w", c.ident, err)
	}
	if cur := c.settings.current; set.OlderThan(cur) {
		return fmt.Errorf("set_settings on %s: the bot's settings at settings_age %d are older than the job's (settings_age %d); a job never goes back to older settings",
			c.ident, set.BotAge, cur.BotAge)
	}
	return nil
}

// updateSettings handles UpdateSetSettings: new settings take effect for
// everything launched from now on (concurrency 0 pauses); it returns the
// settings version once Redis has it.
func (c *control) updateSettings(ctx workflow.Context, set model.Settings) (int, error) {
	seq, version := c.apply(set)
	if err := c.writes.await(ctx, seq); err != nil {
		return 0, fmt.Errorf("set_settings on %s: await redis write: %w", c.ident, err)
	}
	return version, nil
}

// nextSettings installs set as the next settings version and returns
// its Redis write's input (settings fields, settings_age bump, publish).
func (c *control) nextSettings(set model.Settings) activities.SettingsInput {
	c.settings = settingsState{current: set, version: c.settings.version + 1}
	return activities.SettingsInput{Ident: c.ident, Settings: set, Version: c.settings.version,
		Key: fmt.Sprintf("%s/settings/%d", c.runID, c.settings.version)}
}

// redisCtx runs a Redis write as a local activity (redisOptions): it takes
// milliseconds, and a local activity costs no task-queue round trip and no
// extra workflow task, which keeps the orchestration overhead per hook low.
func (c *control) redisCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, redisOptions())
}

// write queues the Redis write of the local activity act with in
// (redisOptions) and returns its sequence number (writer.enqueue).
func (c *control) write(name string, act, in any) int {
	return c.writes.enqueue(name, func(wc workflow.Context) error {
		return workflow.ExecuteLocalActivity(c.redisCtx(wc), act, in).Get(wc, nil)
	})
}

// awaitEnd waits until every handler has finished and every Redis write is
// done, before the workflow returns.
func (c *control) awaitEnd() error {
	if err := workflow.Await(c.dctx, func() bool { return workflow.AllHandlersFinished(c.dctx) && c.writes.idle() }); err != nil {
		return fmt.Errorf("await handlers of %s: %w", c.ident, err)
	}
	return nil
}

// StateWaiting is how a running job shows while it only waits for a
// later retry (a snapshot whose hooks, or a crawl whose only remaining
// pages, wait): its status query's State, its ArchiveflowState search
// attribute and its Web UI details line (with the due time) say waiting,
// as starter status and list do from the job hash's retry_at (Redis keeps
// the state active). Never stored; not a model.JobState of the lifecycle.
const StateWaiting model.JobState = "waiting"

// waitingStateChange versions showing a waiting job as StateWaiting
// (showWaiting): runs from before it show it active.
const waitingStateChange = "waiting-state-shown"

// shownState is the state the job shows: StateWaiting while it only waits
// for a later retry (showWaiting) and is not stopping, else its state.
func (c *control) shownState() model.JobState {
	if c.waiting() {
		return StateWaiting
	}
	return c.job.state
}

// waiting reports that the job shows as waiting (shownState).
func (c *control) waiting() bool {
	return !c.job.retryAt.IsZero() && !c.job.state.Final() && c.job.stopReason == ""
}

// shownRetryAt is when the waiting job's next later retry is due (nil
// when it does not show as waiting): the status query's RetryAt.
func (c *control) shownRetryAt() *time.Time {
	if !c.waiting() {
		return nil
	}
	at := c.job.retryAt
	return &at
}

// stateWords is the job's state in its Web UI details line: "waiting
// (retry at TIME UTC)" while it shows as waiting, else its state.
func (c *control) stateWords() string {
	if !c.waiting() {
		return string(c.job.state)
	}
	return string(StateWaiting) + " (retry at " + c.job.retryAt.UTC().Format(time.DateTime) + " UTC)"
}

// showWaiting makes the job show as waiting until at (zero: no longer
// waiting) when this run shows waiting jobs so (waitingStateChange, asked
// once); it reports that what the job shows changed, for the workflow to
// upsert its search attributes and details line.
func (c *control) showWaiting(at time.Time) bool {
	if !versionOnce(c.dctx, &c.waitState, waitingStateChange) || c.job.retryAt.Equal(at) {
		return false
	}
	c.job.retryAt = at
	return true
}
