// Package workflows owns archiveflow's deterministic Temporal workflow code:
// SnapshotWorkflow, which runs one snapshot's hooks in steps 0..9 and seals
// it, and BackgroundHookWorkflow, the child that runs one background hook
// across steps. Every side effect happens in activities (package
// activities); this package does no I/O, reads no clock but the workflow's,
// starts no goroutine but workflow.Go and iterates no map for order.
//
// Job states: pending (written by the starter) → active (the workflow
// started) → draining (every foreground hook is final, background hooks are
// being stopped at the seal) → finished | aborted | failed. A job is
// failed when it could not run its plan: invalid discovery, no hooks at all,
// every hook failed, the host was lost more than Timing.MaxClaims times, or
// Timing.MaxDuration ran out. It is finished otherwise, even if single hooks
// failed, and aborted after an abort signal or a Temporal cancel request.
// From InputV2 on a failed job fails its workflow and an aborted one cancels
// it, with the job's Status as the error's details (EndStatus), so
// Temporal's own views tell the job's end.
//
// Host affinity: the snapshot claims a worker's own task queue (ClaimHost
// on the pool's queue) and sends every hook there. Archives are not on
// shared storage, so when the host is lost (an activity waits on its queue
// past Timing.HostScheduleToStart and no live pipeline:ID record lists the
// queue) the snapshot is re-claimed by another worker and restarts from
// step 0. A host that is alive but busy is waited for (hostwait.go).
package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// errHostLost ends a claim whose host stopped polling its queue.
var errHostLost = errors.New("snapshot host lost")

// Stop reasons besides an operator's abort.
const (
	reasonCancelled = "workflow cancelled"
	reasonDeadline  = "job exceeded its maximum duration"
)

// snapshot is the state of one SnapshotWorkflow run, in parts that change
// together.
type snapshot struct {
	in SnapshotInput
	// control: the job's state, settings, writer, handlers and stop (its
	// runCtx is a claim's, cancelled on stop).
	control

	rerun rerunState
	plan  hookPlan
	claim claim
	attr  stepAttribute
	// ready are the background hooks that said they are ready, by the key
	// the snapshot gave them (InputV3).
	ready map[string]bool
}

// jobStatus is where the job stands as a whole.
type jobStatus struct {
	state      model.JobState
	stopReason string // abort reason, reasonCancelled or reasonDeadline
	aborted    bool   // stopped by an operator (abort signal or cancel)
	failure    string // why the job failed, if it did
	// retryAt: the job only waits for a later retry, due then; shown
	// as waiting (showWaiting, waitingStateChange).
	retryAt time.Time
}

// settingsState are the job's current settings and their generation (the
// set_settings handlers change them).
type settingsState struct {
	current model.Settings
	version int
}

// hookPlan is the discovered plan and how often each hook file name occurs
// in it.
type hookPlan struct {
	activities.Plan
	names map[string]int // hook file name → count in plan
}

// claim is one claim of the snapshot by a host: everything a lost host
// takes with it. A re-claim starts from a fresh claim (newClaim).
type claim struct {
	n          int // 1 for the first claim
	hostQueue  string
	discovered bool // the plan was discovered on this claim's host
	hostLost   bool
	step       int
	results    map[string]model.ArchiveResult
	running    map[string]bool
	// transient are the foreground hooks whose attempts all ended
	// transiently (HookStatus.Transient).
	transient map[string]bool
	counters  activities.Counters
	fgActive  int
	bgLive    int
	bgCancels []workflow.CancelFunc
	// attemptsBefore are the attempts a hook's segment used (host steps).
	attemptsBefore map[string]int
	// perHook: a segment of this claim failed; the rest runs per hook.
	perHook bool
}

// newClaim is claim n, from step 0, with Redis counters to be rewritten
// as absolute values for a plan of total hooks.
func newClaim(n, total int) claim {
	return claim{
		n:              n,
		results:        map[string]model.ArchiveResult{},
		running:        map[string]bool{},
		transient:      map[string]bool{},
		counters:       activities.Counters{Total: total},
		attemptsBefore: map[string]int{},
	}
}

// stepAttribute is what the state and step search attributes show: the
// step and state they last showed, and the delayed upsert that is pending
// (see publishStep, showLater).
type stepAttribute struct {
	shown      int
	shownState model.JobState
	pending    bool
	// cancelLater cancels the pending delayed upsert (InputV2).
	cancelLater workflow.CancelFunc
}

// SnapshotWorkflow runs one snapshot: it claims a worker host, discovers
// the hooks, runs steps 0..9 (foreground hooks of a step in parallel,
// bounded by the job's concurrency, in filename order; background hooks as
// BackgroundHookWorkflow children), seals (cancels and awaits background
// children) and writes the final job state. It answers the `status` query,
// the `abort` signal and the `set_settings` update and signal. It returns
// the final Status. A failed or aborted job ends the workflow failed or
// canceled with that Status as the error's details (InputV2; before it, a
// completed workflow whose Status says so).
func SnapshotWorkflow(ctx workflow.Context, in SnapshotInput) (Status, error) {
	in = in.recorded()
	if err := in.Validate(); err != nil {
		return Status{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("snapshot input: %v", err), "InvalidSnapshotInput", err)
	}
	s := newSnapshot(ctx, in)
	if err := s.serve(ctx, func() (Status, error) { return s.status(), nil }, nil); err != nil {
		return Status{}, fmt.Errorf("register handlers of %s: %w", in.Job.Ident, err)
	}
	if in.since(InputV3) {
		s.hearReady(ctx)
	}
	stopDeadline := s.startDeadline(in.Timing.MaxDuration, in.Timing.MaxDuration > 0)
	workflow.Go(s.dctx, s.writes.run)

	if in.Rerun != nil && !in.Rerun.Waiting {
		s.reopen()
	}
	s.setState(model.StateActive)
	s.execute()
	stopDeadline()
	if in.RetryLater != nil {
		if next, ok := s.waitForLater(); ok {
			if err := s.awaitEnd(); err != nil {
				return s.status(), err
			}
			return s.status(), workflow.NewContinueAsNewError(ctx, SnapshotWorkflow, next)
		}
	}
	s.finish()

	if err := s.awaitEnd(); err != nil {
		return s.status(), err
	}
	st := s.status()
	if !in.since(InputV2) {
		return st, nil
	}
	return st, endError(st)
}

func newSnapshot(ctx workflow.Context, in SnapshotInput) *snapshot {
	s := &snapshot{
		in:      in,
		control: newControl(ctx, in.Job.Ident, "snapshot", in.Settings),
		rerun:   newRerunState(in.Rerun),
		claim:   newClaim(0, 0),
	}
	s.apply = s.applySettings
	s.hash = snapshotHash(&s.control, in.Job)
	return s
}

func (s *snapshot) stopping() bool { return s.job.stopReason != "" || s.claim.hostLost }

// execute claims a host and runs the plan, re-claiming when the host is lost.
func (s *snapshot) execute() {
	for n := 1; ; n++ {
		err := s.runClaim(n)
		switch {
		case err == nil || s.job.stopReason != "":
			return
		case !errors.Is(err, errHostLost):
			s.job.failure = err.Error()
			return
		case n >= s.in.Timing.MaxClaims:
			s.job.failure = fmt.Sprintf("snapshot host lost %d times (max_claims %d)", n, s.in.Timing.MaxClaims)
			return
		}
		s.log().Warn("snapshot host lost; re-claiming from step 0", "host_queue", s.claim.hostQueue, "claim", n)
	}
}

// runClaim is claim n of the snapshot: host, discovery, steps, seal. It
// forgets the results of a lost claim: the new host starts from step 0 and
// Redis counters are rewritten as absolute values.
func (s *snapshot) runClaim(n int) error {
	s.runCtx, s.cancelRun = workflow.WithCancel(s.dctx)
	defer s.cancelRun()
	s.claim = newClaim(n, len(s.plan.Hooks))
	if s.stopping() {
		return nil
	}
	if s.in.since(InputV2) {
		if err := s.claimAndDiscover(); err != nil {
			return err
		}
	} else {
		if err := s.claimHost(); err != nil {
			return err
		}
		if err := s.discover(); err != nil {
			return err
		}
	}
	for step := 0; step <= 9 && !s.stopping(); step++ {
		if s.hostSteps() {
			last, left, ran := s.runSegment(step)
			if ran && (left < 0 || s.stopping()) {
				step = last
				continue
			}
			if ran {
				step = left // its hooks left run the old way
			}
		}
		s.enterStep(step)
		s.runStep(step)
	}
	s.seal()
	if s.claim.hostLost && s.job.stopReason == "" {
		return errHostLost
	}
	return nil
}

func (s *snapshot) claimHost() error {
	actx := workflow.WithActivityOptions(s.runCtx, claimOptions(s.in.TaskQueue, s.in.Job.Ident+"/claim"+claimSuffix(s.claim.n)))
	var queue string
	if err := workflow.ExecuteActivity(actx, poolActs.ClaimHost, s.in.Job.Ident).Get(s.dctx, &queue); err != nil {
		if s.stopping() {
			return nil
		}
		return fmt.Errorf("claim host for %s: %w", s.in.Job.Ident, err)
	}
	s.claim.hostQueue = queue
	s.enqueueState(model.StateActive)
	return nil
}

// claimAndDiscover claims a host and discovers the hooks on it in one
// activity on the pool's queue (InputV2): the worker that takes it is the
// host.
func (s *snapshot) claimAndDiscover() error {
	id := s.in.Job.Ident + "/claim" + claimSuffix(s.claim.n)
	actx := workflow.WithActivityOptions(s.runCtx, claimAndDiscoverOptions(s.in.TaskQueue, id))
	in := activities.DiscoverInput{Ident: s.in.Job.Ident, SnapshotID: s.in.Job.SnapshotID, URL: s.in.Job.URL, Overrides: s.in.Job.Overrides}
	var c activities.Claim
	if err := workflow.ExecuteActivity(actx, poolActs.ClaimAndDiscover, in).Get(s.dctx, &c); err != nil {
		if s.stopping() {
			return nil
		}
		return fmt.Errorf("claim a host and discover hooks for %s: %w", s.in.Job.Ident, err)
	}
	s.claim.hostQueue = c.HostQueue
	s.enqueueState(model.StateActive)
	return s.setPlan(c.Plan)
}

// hostCheck tells a busy claimed host from a lost one (see hostwait.go).
func (s *snapshot) hostCheck() hostCheck {
	return hostCheck{poolQueue: s.in.TaskQueue, hostQueue: s.claim.hostQueue, timing: s.in.Timing, fast: s.in.since(InputV2)}
}

// discover runs DiscoverHooks on the claimed host. While it times out
// before start on a host that is alive (busy), it is scheduled again.
func (s *snapshot) discover() error {
	id := s.in.Job.Ident + "/discover" + claimSuffix(s.claim.n)
	in := activities.DiscoverInput{Ident: s.in.Job.Ident, SnapshotID: s.in.Job.SnapshotID, URL: s.in.Job.URL, Overrides: s.in.Job.Overrides}
	var plan activities.Plan
	err := s.hostCheck().untilStarted(s.runCtx, s.dctx, id, &plan, nil, func(r round) workflow.Future {
		actx := workflow.WithActivityOptions(s.runCtx, hostTaskOptions(s.claim.hostQueue, id+requeueSuffix(r.n), "discover hooks", r.wait, discoverStartToClose, discoverAttempts))
		return workflow.ExecuteActivity(actx, hostActs.DiscoverHooks, in)
	})
	switch {
	case err != nil && s.stopping():
		return nil
	case err != nil && isHostLost(err):
		s.claim.hostLost = true
		return errHostLost
	case err != nil:
		return fmt.Errorf("discover hooks for %s: %w", s.in.Job.Ident, err)
	}
	return s.setPlan(plan)
}

// setPlan installs the plan discovered on this claim's host.
func (s *snapshot) setPlan(plan activities.Plan) error {
	if err := plan.Validate(); err != nil {
		return fmt.Errorf("discover hooks for %s: %w", s.in.Job.Ident, err)
	}
	s.plan = hookPlan{Plan: plan, names: map[string]int{}}
	for _, h := range plan.Hooks {
		s.plan.names[h.Name]++
	}
	s.claim.counters = activities.Counters{Total: len(plan.Hooks)}
	s.claim.discovered = true
	return nil
}

// enterStep publishes the new current step.
func (s *snapshot) enterStep(step int) {
	s.claim.step = step
	if s.in.since(InputV2) {
		s.showLater()
	} else {
		s.publishStep()
	}
	workflow.SetCurrentDetails(s.dctx, s.details())
	s.hash.step(activities.StepInput{Ident: s.in.Job.Ident, Step: step, HooksTotal: len(s.plan.Hooks)})
}

// limit is how many foreground hooks of step may run at once.
func (s *snapshot) limit(step int) int {
	return activities.StepLimit(s.settings.current.Concurrency, step, s.in.SequentialSteps)
}

// canLaunch reports whether h may start now. Concurrency 0 pauses every
// launch; background, disabled and misconfigured hooks take no slot.
func (s *snapshot) canLaunch(h activities.HookSpec) bool {
	n := s.limit(h.Step)
	if n <= 0 {
		return false
	}
	if !h.TakesSlot() {
		return true
	}
	return s.claim.fgActive < n
}

// runStep launches the hooks of step in plan order as slots free up and
// returns when every foreground hook of it is final (or the run stopped).
func (s *snapshot) runStep(step int) {
	queue := s.plan.Step(step)
	for len(queue) > 0 {
		// A paused job (concurrency 0) waits here; its details say so and
		// applySettings refreshes them when the concurrency changes.
		_ = workflow.Await(s.dctx, func() bool { return s.stopping() || s.canLaunch(queue[0]) })
		if s.stopping() {
			break
		}
		s.launch(queue[0])
		queue = queue[1:]
	}
	_ = workflow.Await(s.dctx, func() bool { return s.claim.fgActive == 0 })
}

func (s *snapshot) launch(h activities.HookSpec) {
	if _, done := s.claim.results[h.Key()]; done {
		return // ended in a segment of this claim (host steps)
	}
	if res, ok := s.keptResult(h); ok {
		s.keep(h, res)
		return
	}
	now := workflow.Now(s.dctx)
	switch h.Launch() {
	case activities.LaunchSkip:
		s.complete(h, activities.RunHookResult{ArchiveResult: skippedResult(h, now, cmp.Or(h.SkipReason, "disabled by configuration"))})
	case activities.LaunchConfigFailed:
		s.complete(h, activities.RunHookResult{ArchiveResult: configFailedResult(h, now)})
	case activities.LaunchBackground:
		s.startBackground(h)
	default:
		s.startForeground(h)
	}
}

func (s *snapshot) startForeground(h activities.HookSpec) {
	s.claim.fgActive++
	s.claim.running[h.Key()] = true
	id, in, r := s.activityID(h), s.runInput(h), s.in.Retry.For(h.Plugin)
	// A hook whose first attempt failed in a segment continues with the
	// attempts its policy has left (host steps; 0 otherwise).
	in.AttemptsBefore = s.claim.attemptsBefore[h.Key()]
	check := s.hostCheck()
	opts := hookActivityOptions(h, id, s.claim.hostQueue, r.remaining(in.AttemptsBefore), s.in.Timing, s.in.Timing.HostScheduleToStart, check.fast)
	var fut workflow.Future
	backoff := in.AttemptsBefore > 0 && workflow.GetVersion(s.dctx, segmentBackoffChange, workflow.DefaultVersion, 1) == 1
	if !backoff {
		fut = workflow.ExecuteActivity(workflow.WithActivityOptions(s.runCtx, opts), hostActs.RunHook, in)
	}
	// The goroutine's context is a child of runCtx, so a stop or a lost
	// host also cancels a hook scheduled again on a busy host.
	workflow.Go(s.runCtx, func(c workflow.Context) {
		defer func() { s.claim.fgActive-- }()
		if backoff {
			// The attempt after a segment's failed one waits the retry
			// policy's backoff, as an activity's own retry would.
			if err := workflow.Sleep(c, r.backoff(in.AttemptsBefore)); err != nil {
				s.complete(h, activities.RunHookResult{ArchiveResult: s.failedResult(h, err)})
				return
			}
			fut = workflow.ExecuteActivity(workflow.WithActivityOptions(c, opts), hostActs.RunHook, in)
		}
		res, err := hookOnHost(c, fut, in, id, r, check)
		if err != nil {
			res = activities.RunHookResult{ArchiveResult: s.failedResult(h, err)}
		}
		s.complete(h, res)
	})
}

func (s *snapshot) startBackground(h activities.HookSpec) {
	cctx, cancel := workflow.WithCancel(s.runCtx)
	s.claim.bgCancels = append(s.claim.bgCancels, cancel)
	s.claim.bgLive++
	s.claim.running[h.Key()] = true
	cctx = workflow.WithChildOptions(cctx, childOptions(s.childID(h), s.in.TaskQueue, h.Name))
	run := s.runInput(h)
	if s.in.since(InputV3) {
		run.ReadyTo, run.ReadyKey = workflow.GetInfo(s.dctx).WorkflowExecution.ID, s.activityID(h)
	}
	fut := workflow.ExecuteChildWorkflow(cctx, BackgroundHookWorkflow, BackgroundInput{
		Run:        run,
		HostQueue:  s.claim.hostQueue,
		ActivityID: s.activityID(h),
		Retry:      s.in.Retry.For(h.Plugin),
		Timing:     s.in.Timing,
		Version:    s.in.Version,
	})
	workflow.Go(s.dctx, func(c workflow.Context) {
		defer func() { s.claim.bgLive-- }()
		var res activities.RunHookResult
		err := fut.Get(c, &res)
		switch {
		case err == nil:
			res.ArchiveResult = s.sealedBetweenAttempts(h, run.ReadyKey, res.ArchiveResult)
		case temporal.IsCanceledError(err):
			// Cancelled before the child ran: its hook never started.
			res = activities.RunHookResult{ArchiveResult: skippedResult(h, workflow.Now(s.dctx), activities.NotStartedBeforeSeal)}
		default:
			res = activities.RunHookResult{ArchiveResult: s.failedResult(h, err)}
		}
		s.complete(h, res)
	})
	if s.in.since(InputV3) {
		s.awaitReady(h, run.ReadyKey)
	}
}

// sealedBetweenAttempts corrects the child's "not started before the
// seal" for a background hook that said it was ready (InputV3): it did
// start. The child cannot tell, because a cancelled activity carries no
// attempt: on a real server that is an attempt that ended transiently
// while the seal came during the retry policy's wait for the next one
// (an attempt the seal stops reports its own result). It ran and nothing
// reported a final result, so it failed; its files stay.
func (s *snapshot) sealedBetweenAttempts(h activities.HookSpec, key string, res model.ArchiveResult) model.ArchiveResult {
	if res.Status != model.StatusSkipped || res.OutputStr != activities.NotStartedBeforeSeal || !s.ready[key] ||
		workflow.GetVersion(s.dctx, sealedBetweenAttemptsChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return res
	}
	res.Status, res.OutputStr, res.Attempts = model.StatusFailed, "", 1
	res.Error = SealedBetweenAttempts
	return res
}

// SealedBetweenAttempts is the error of a background hook that started
// and was sealed before any attempt reported a final result.
const SealedBetweenAttempts = "stopped at seal before any attempt reported a final result: an attempt ran (the hook said " +
	"it was ready) and the retry policy was waiting to run it again; see the hook's files and the job log"

// sealedBetweenAttemptsChange marks histories in which a background hook
// that was ready and then sealed between attempts is failed, not skipped.
const sealedBetweenAttemptsChange = "bg-sealed-between-attempts"

// hearReady keeps what SignalHookReady says (InputV3).
func (s *snapshot) hearReady(ctx workflow.Context) {
	s.ready = map[string]bool{}
	ch := workflow.GetSignalChannel(ctx, SignalHookReady)
	workflow.Go(s.dctx, func(c workflow.Context) {
		for {
			var key string
			ch.Receive(c, &key)
			s.ready[key] = true
		}
	})
}

// awaitReady holds the next launch until background hook h, started under
// key, is ready, has ended or its timeout + Timing.ReadyMargin ran out,
// or the snapshot stops (InputV3: abx-dl's launch order).
func (s *snapshot) awaitReady(h activities.HookSpec, key string) {
	wait := h.Timeout + s.in.Timing.ReadyMargin
	ok, _ := workflow.AwaitWithTimeout(s.dctx, wait, func() bool {
		_, ended := s.claim.results[h.Key()]
		return s.ready[key] || ended || s.stopping()
	})
	if !ok {
		s.log().Warn("background hook not ready (no line on stdout) within its wait; launching the next hooks anyway", "hook", h.Key(), "wait", wait)
	}
}

// failedResult maps a hook's final error, noting a lost host or a stop.
func (s *snapshot) failedResult(h activities.HookSpec, err error) model.ArchiveResult {
	s.noteHostLost(h, err)
	res := resultFromError(h, s.in.Retry.For(h.Plugin), err, workflow.Now(s.dctx))
	if s.job.stopReason != "" && temporal.IsCanceledError(err) {
		res.Error = "stopped: " + s.job.stopReason
	}
	if at, ok := s.laterRetry(h, err); ok {
		res.RetryAt = &at
	}
	if !h.Background && transientEnd(err) {
		s.claim.transient[h.Key()] = true
	}
	return res
}

// noteHostLost ends the claim when err says h's host is gone.
func (s *snapshot) noteHostLost(h activities.HookSpec, err error) {
	if isHostLost(err) && s.job.stopReason == "" && !s.claim.hostLost {
		s.claim.hostLost = true
		s.log().Warn("hook's host queue is not polled; host lost", "hook", h.Key(), "host_queue", s.claim.hostQueue)
		s.cancelRun()
	}
}

// complete records a hook's final result, unless its claim was lost (the
// next claim runs the hook again). RunHook writes the results it returns
// to Redis itself; the workflow writes a result only when RunHook did not
// (Redis was down, the hook never ran, the result is the workflow's own).
func (s *snapshot) complete(h activities.HookSpec, res activities.RunHookResult) {
	delete(s.claim.running, h.Key())
	if s.claim.hostLost && s.job.stopReason == "" {
		return
	}
	s.claim.results[h.Key()] = res.ArchiveResult
	s.claim.counters.Add(res.ArchiveResult)
	if res.Recorded || waiting(res.ArchiveResult) {
		// A waiting result is not final: written once it is.
		return
	}
	s.hash.result(activities.ResultInput{Ident: s.in.Job.Ident, Result: res.ArchiveResult, Counters: s.claim.counters, Key: s.runKey(h)})
}

// seal cancels the background children still running and waits for their
// results (their hooks get SIGTERM, then SIGKILL after the grace). Then,
// from InputV2 on, the claimed host writes the snapshot's index.
func (s *snapshot) seal() {
	if s.claim.bgLive > 0 && s.job.stopReason == "" && !s.claim.hostLost {
		s.setState(model.StateDraining)
	}
	for _, cancel := range s.claim.bgCancels {
		cancel()
	}
	_ = workflow.Await(s.dctx, func() bool { return s.claim.bgLive == 0 && s.claim.fgActive == 0 })
	if s.in.since(InputV2) && s.claim.discovered && !s.claim.hostLost {
		s.sealOnHost()
	}
}

// sealOnHost runs SealSnapshot on the claimed host with every final result
// in plan order. A host lost now loses the snapshot's directory with it:
// the claim is lost like any other. Any other failure is logged: the job's
// outcome does not depend on its index.
func (s *snapshot) sealOnHost() {
	state, reason := s.finalState()
	in := activities.SealInput{Job: s.in.Job, State: state, Error: reason}
	for _, h := range s.plan.Hooks {
		if res, ok := s.claim.results[h.Key()]; ok {
			in.Results = append(in.Results, res)
		}
	}
	id := s.in.Job.Ident + "/seal" + claimSuffix(s.claim.n)
	// The seal runs even when the job was stopped: on dctx, never runCtx.
	var rep activities.SealReport
	err := s.hostCheck().untilStarted(s.dctx, s.dctx, id, &rep, nil, func(r round) workflow.Future {
		actx := workflow.WithActivityOptions(s.dctx, hostTaskOptions(s.claim.hostQueue, id+requeueSuffix(r.n), "seal", r.wait, sealStartToClose, sealAttempts))
		return workflow.ExecuteActivity(actx, hostActs.SealSnapshot, in)
	})
	switch {
	case err == nil:
		s.recordArchive(rep)
	case isHostLost(err) && s.job.stopReason == "":
		s.claim.hostLost = true
		s.log().Warn("host lost at the seal", "host_queue", s.claim.hostQueue)
	default:
		s.log().Error("seal on the host failed; the snapshot has no final index", "host_queue", s.claim.hostQueue, "error", err)
	}
}

// sealArchiveChange versions recording where the seal wrote the job's
// WACZ: histories from before it write nothing after the seal.
const sealArchiveChange = "seal-records-wacz"

// recordArchive writes where the seal wrote the job's WACZ (or why none)
// through the ordered writer, before the final state.
func (s *snapshot) recordArchive(rep activities.SealReport) {
	if rep.WACZ == "" && rep.WACZError == "" {
		return // a crawl's start page, or wacz.seal off
	}
	if workflow.GetVersion(s.dctx, sealArchiveChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	in := rep.Archive(s.in.Job.Ident)
	s.write("set wacz", poolActs.SetArchive, in)
}

// finalState decides the job's final state and error: a job neither
// stopped nor failed (control.finalState) fails when it ran no hook.
func (s *snapshot) finalState() (model.JobState, string) {
	state, reason := s.control.finalState()
	switch {
	case state != model.StateFinished:
	case len(s.plan.Hooks) == 0:
		return model.StateFailed, "no hooks discovered"
	case s.claim.counters.Failed == s.claim.counters.Total:
		return model.StateFailed, "every hook failed"
	}
	return state, reason
}

// finish writes the final state once.
func (s *snapshot) finish() {
	state, reason := s.finalState()
	s.job.failure = reason
	s.job.state = state
	s.showNow()
	workflow.SetCurrentDetails(s.dctx, s.details())
	s.memoTitle()
	c := s.claim.counters
	s.hash.finish(activities.FinishInput{Ident: s.in.Job.Ident, State: state, Error: reason, Counters: c, Key: s.runID + "/finish"})
	s.log().Info("snapshot done", "state", string(state), "reason", reason,
		"succeeded", c.Succeeded, "failed", c.Failed, "total", c.Total)
}

// setState moves the job to a non-final state.
func (s *snapshot) setState(state model.JobState) {
	s.job.state = state
	if s.in.since(InputV2) {
		s.showLater()
	} else {
		s.upsertSearchAttributes()
	}
	workflow.SetCurrentDetails(s.dctx, s.details())
	s.enqueueState(state)
}

func (s *snapshot) enqueueState(state model.JobState) {
	s.hash.state(activities.JobStateInput{
		Ident:      s.in.Job.Ident,
		State:      state,
		WorkflowID: workflow.GetInfo(s.dctx).WorkflowExecution.ID,
		RunID:      s.runID,
		TaskQueue:  s.claim.hostQueue,
		Key:        fmt.Sprintf("%s/claim-%d/state/%s", s.runID, s.claim.n, state),
	})
}

// publishStep shows the current step in the search attributes. With a
// StepAttributeDelay, a step is upserted only once it has lasted that long:
// a timer started at a step change upserts whatever step is current when
// it fires, so the attribute trails the real step by at most the delay,
// and a snapshot of short steps rewrites its visibility record at most once per
// delay instead of once per step. State changes upsert at once (with the
// step) either way. Without the delay every step is upserted at once,
// which is also how every history recorded before the field existed runs.
func (s *snapshot) publishStep() {
	d := s.in.Timing.StepAttributeDelay
	if d <= 0 {
		s.upsertSearchAttributes()
		return
	}
	if s.attr.pending {
		return
	}
	s.attr.pending = true
	workflow.Go(s.dctx, func(c workflow.Context) {
		err := workflow.Sleep(c, d)
		s.attr.pending = false
		if err == nil && s.claim.step != s.attr.shown {
			s.upsertSearchAttributes()
		}
	})
}

// showLater shows the current state and step in the search attributes
// once they have lasted StepAttributeDelay (InputV2): every change of
// either cancels the pending upsert and starts a new one, so a short step
// or state costs two timer events in a workflow task that runs anyway,
// never a visibility write or a workflow task of its own, and a long one
// shows after the delay. Without a delay every change is upserted at once.
func (s *snapshot) showLater() {
	s.cancelShow()
	d := s.in.Timing.StepAttributeDelay
	if d <= 0 {
		s.upsertSearchAttributes()
		return
	}
	s.attr.cancelLater = s.after(d, "show step", func() {
		if s.claim.step != s.attr.shown || s.job.state != s.attr.shownState {
			s.upsertSearchAttributes()
		}
	})
}

// titleMemoChange versions putting the title a hook set in the run's memo.
const titleMemoChange = "title-memo"

// memoTitle puts the title the snapshot's hooks set in the run's memo
// (key "title"), which the Web UI shows on the run's page after the run
// ends, when the current details line is no longer queried.
func (s *snapshot) memoTitle() {
	t := s.title()
	if t == "" || workflow.GetVersion(s.dctx, titleMemoChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	if err := workflow.UpsertMemo(s.dctx, map[string]interface{}{"title": t}); err != nil {
		s.log().Warn("upsert memo", "error", err)
	}
}

// showNow shows the final state (and the step of the end) at once.
func (s *snapshot) showNow() {
	s.cancelShow()
	s.upsertSearchAttributes()
}

// cancelShow cancels the pending delayed upsert (showLater).
func (s *snapshot) cancelShow() {
	if s.attr.cancelLater != nil {
		s.attr.cancelLater()
		s.attr.cancelLater = nil
	}
}

func (s *snapshot) upsertSearchAttributes() {
	s.attr.shown, s.attr.shownState = s.claim.step, s.job.state
	err := workflow.UpsertTypedSearchAttributes(s.dctx,
		searchattr.Ident.ValueSet(s.in.Job.Ident),
		searchattr.URL.ValueSet(s.in.Job.URL),
		searchattr.Pool.ValueSet(s.in.Pool),
		searchattr.State.ValueSet(string(s.shownState())),
		searchattr.Step.ValueSet(int64(s.claim.step)),
	)
	if err != nil {
		s.log().Warn("upsert search attributes", "error", err)
	}
}

// details is the workflow's current details line in the Web UI.
func (s *snapshot) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s · %s · step %d/9", s.in.Job.URL, s.stateWords(), s.claim.step)
	if t := s.title(); t != "" {
		fmt.Fprintf(&b, " · title %q", t)
	}
	if !s.job.state.Final() && s.limit(s.claim.step) == 0 {
		b.WriteString(" · paused (concurrency 0)")
	}
	if s.job.failure != "" {
		b.WriteString(" · " + s.job.failure)
	}
	return b.String()
}

// title is the snapshot's title its hooks set so far (model.TitleAndTags
// over the results in plan order), shown in the Web UI's details.
func (s *snapshot) title() string {
	var rs []model.ArchiveResult
	for _, h := range s.plan.Hooks {
		if r, ok := s.claim.results[h.Key()]; ok && r.Title != "" {
			rs = append(rs, r)
		}
	}
	t, _ := model.TitleAndTags(rs)
	return t
}

func (s *snapshot) runInput(h activities.HookSpec) activities.RunHookInput {
	return activities.RunHookInput{Job: s.in.Job, Hook: h, Settings: s.settings.current, Key: s.runKey(h)}
}

// hookRef is the hook's name in IDs: its file name, or PLUGIN/NAME when two
// plugins ship a hook of the same file name.
func (s *snapshot) hookRef(h activities.HookSpec) string {
	if s.plan.names[h.Name] > 1 {
		return h.Key()
	}
	return h.Name
}

// activityID is IDENT/step-N/HOOK (plus a claim suffix after a re-claim).
func (s *snapshot) activityID(h activities.HookSpec) string {
	return fmt.Sprintf("%s/step-%d/%s%s", s.in.Job.Ident, h.Step, s.hookRef(h), claimSuffix(s.claim.n))
}

// childID is IDENT/bg/HOOK (plus a claim suffix after a re-claim).
func (s *snapshot) childID(h activities.HookSpec) string {
	return fmt.Sprintf("%s/bg/%s%s", s.in.Job.Ident, s.hookRef(h), claimSuffix(s.claim.n))
}

// runKey is the idempotency key of a hook's result: one per hook and
// workflow run, so a hook run again after a re-claim is counted once.
func (s *snapshot) runKey(h activities.HookSpec) string {
	return fmt.Sprintf("%s/step-%d/%s", s.runID, h.Step, h.Key())
}
