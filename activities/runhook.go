package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/steprun"
)

// finalFlushTimeout bounds the last job-log write of an attempt, which runs
// even when the attempt was cancelled.
const finalFlushTimeout = 10 * time.Second

// RunHook runs one attempt of one hook through the Runner. It heartbeats on
// a ticker with Progress as details, so the workflow's heartbeat timeout
// notices a dead worker and cancellation (abort, seal, shutdown) reaches the
// hook within seconds; it streams stderr lines and Response records to the
// job log in batches. It returns:
//   - the final result as a value (succeeded, noresults, skipped, and the
//     soft failure a hook printed itself), never the hook's stdout, written
//     to Redis under the hook's key (Recorded says whether that write
//     succeeded);
//   - a retryable ErrTypeTransient ApplicationError whose details carry the
//     attempt's result, for failures the retry policy should retry;
//   - a non-retryable ErrTypeConfig error for configuration errors;
//   - a CanceledError when a foreground hook was stopped by cancellation.
//
// A background hook stopped by cancellation (the seal) always ends with a
// final result: the runner's (which maps its exit, DESIGN.md §3), or
// skipped when the hook never started before the seal.
func (a *HostActivities) RunHook(ctx context.Context, in RunHookInput) (RunHookResult, error) {
	if err := validateRunHook(in); err != nil {
		return RunHookResult{}, err
	}
	info := activity.GetInfo(ctx)
	attempt := in.AttemptsBefore + int(info.Attempt)
	// Log batches are keyed by run, activity and attempt: unique per attempt
	// and stable across a repeated flush.
	logKey := fmt.Sprintf("%s/%s/attempt-%d", info.WorkflowExecution.RunID, info.ActivityID, attempt)
	return a.runAttempt(ctx, in, attempt, logKey, func(p Progress) { activity.RecordHeartbeat(ctx, p) })
}

// runAttempt is one attempt of one hook, the unit RunHook and RunSteps
// share: the runner, the heartbeat and log-flush loop (beat receives the
// attempt's progress), the job log under logKey, the result's Redis write
// and the mapping of the outcome to a result or an error (see RunHook).
func (a *HostActivities) runAttempt(ctx context.Context, in RunHookInput, attempt int, logKey string, beat func(Progress)) (RunHookResult, error) {
	log := a.log.With(logging.Ident(in.Job.Ident), logging.Hook(in.Hook.Key()),
		zap.Int("step", in.Hook.Step), logging.Attempt(attempt))

	sink := newRunSink(a.opts, in.Hook.Key())
	stop := a.superviseAttempt(ctx, in, attempt, logKey, sink, log, beat)
	started := time.Now()
	req := RunRequest{Job: in.Job, Hook: in.Hook, Settings: in.Settings, Attempt: attempt}
	told := a.tellReady(ctx, in, &req, log)
	outcome, runErr := a.runner.Run(ctx, req, sink)
	stop()
	told()

	if runErr != nil && !errors.Is(runErr, ErrConfig) {
		outcome = Outcome{Transient: true, Error: runErr.Error()}
	}
	res := a.attemptResult(in, attempt, started, outcome)
	if rs := sink.responses(); len(rs) > 0 {
		c := model.CountResponses(rs)
		res.Responses = &c
	}
	_, statusErr := model.ParseStatus(string(res.Status))
	invalid := !outcome.Transient && runErr == nil && statusErr != nil
	cancelled := ctx.Err() != nil
	stopping := cancelled && workerStopping(ctx)
	class := steprun.Classify(steprun.Ending{Err: runErr, ConfigErr: errors.Is(runErr, ErrConfig),
		Transient: outcome.Transient || invalid, Cancelled: cancelled, WorkerStopping: stopping, Background: in.Hook.Background})
	switch {
	case class == steprun.Config:
		log.Warn("hook configuration error", zap.Error(runErr))
		return RunHookResult{}, nonRetryable(ErrTypeConfig, "%v", runErr)
	case class == steprun.Retry && stopping:
		// The worker is shutting down, not the job: the retry policy runs
		// the hook again (on this host's queue, so a host that does not
		// come back is re-claimed by the workflow).
		res.Error = "worker shut down during the hook: " + res.Error
		log.Warn("hook interrupted by worker shutdown")
		return RunHookResult{}, transientError(in, res)
	case class == steprun.Retry && invalid:
		res.Status, res.Error = model.StatusFailed, fmt.Sprintf("hook reported an invalid result: %v", statusErr)
		return RunHookResult{}, transientError(in, res)
	case class == steprun.Retry:
		log.Warn("hook attempt failed", zap.String("error", res.Error), zap.Int("exit_code", res.ExitCode))
		return RunHookResult{}, transientError(in, res)
	case class == steprun.Cancelled:
		log.Info("hook cancelled", zap.String("error", res.Error))
		return RunHookResult{}, temporal.NewCanceledError(res)
	case outcome.Transient:
		// A background hook stopped by cancellation (the seal).
		res = sealedResult(res, runErr != nil)
		log.Info("background hook stopped", zap.String("status", string(res.Status)), zap.String("error", res.Error), zap.NamedError("run_error", runErr))
	default:
		log.Info("hook finished", zap.String("status", string(res.Status)), zap.Int("exit_code", res.ExitCode))
	}
	return RunHookResult{ArchiveResult: res, Recorded: a.recordFinal(ctx, in, res, sink, log, beat)}, nil
}

// NotStartedBeforeSeal is the reason of a background hook recorded skipped
// because the seal came before it started.
const NotStartedBeforeSeal = "not started before the seal"

// sealedResult is the final result of a background hook whose attempt the
// seal ended without a final status from the runner: skipped when the hook
// never started (the runner could not run it before the cancellation),
// failed otherwise (a runner that maps its own exits does not get here).
// Retrying is no option after the seal.
func sealedResult(res model.ArchiveResult, neverStarted bool) model.ArchiveResult {
	if neverStarted {
		res.Status, res.OutputStr, res.Error = model.StatusSkipped, NotStartedBeforeSeal, ""
		return res
	}
	res.Status, res.Error = model.StatusFailed, "stopped at seal: "+res.Error
	return res
}

// workerStopping reports that this worker is shutting down.
func workerStopping(ctx context.Context) bool {
	select {
	case <-activity.GetWorkerStopChannel(ctx):
		return true
	default:
		return false
	}
}

// recordFinal writes a final result with the attempt's responses, which
// only this process holds, under the hook's idempotency key, and reports
// whether the write succeeded. When it did not, the workflow records the
// result with the same key (the response counters then come from the
// result's summary of them), so the result is never lost.
func (a *HostActivities) recordFinal(ctx context.Context, in RunHookInput, res model.ArchiveResult, sink *runSink, log *zap.Logger, beat func(Progress)) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
	defer cancel()
	var err error
	a.heartbeatWhile(res.Attempts, sink, beat, func() {
		err = a.store.RecordResult(wctx, ResultInput{Ident: in.Job.Ident, Result: res, Key: in.Key, Responses: sink.responses(), CrawlPage: in.Job.CrawlPage})
	})
	if err != nil {
		log.Warn("record result with responses; the workflow records it", zap.Error(err))
		return false
	}
	return true
}

func validateRunHook(in RunHookInput) error {
	hookErr := in.Hook.Validate()
	switch {
	case in.Job.Ident == "":
		return invalidInput("run hook %s: job ident must not be empty", in.Hook.Key())
	case in.Job.URL == "":
		return invalidInput("run hook %s for %s: job url must not be empty", in.Hook.Key(), in.Job.Ident)
	case hookErr != nil:
		return invalidInput("run hook for %s: %v", in.Job.Ident, hookErr)
	case in.Hook.Path == "":
		return invalidInput("run hook %s for %s: path must not be empty", in.Hook.Key(), in.Job.Ident)
	case in.AttemptsBefore < 0:
		return invalidInput("run hook %s for %s: attempts_before %d: must be >= 0", in.Hook.Key(), in.Job.Ident, in.AttemptsBefore)
	}
	return nil
}

// transientError is the retryable error of a failed attempt; its details
// carry the attempt's result so the workflow can record the last error when
// retries run out.
func transientError(in RunHookInput, res model.ArchiveResult) error {
	res.Status = model.StatusFailed
	msg := attemptFailure(in.Hook.Key(), res.Attempts, res.Error)
	return temporal.NewApplicationErrorWithOptions(msg, ErrTypeTransient, temporal.ApplicationErrorOptions{Details: []any{res}})
}

// attemptResult completes the runner's record with the hook's identity and
// caps the fields that go into workflow history.
func (a *HostActivities) attemptResult(in RunHookInput, attempt int, started time.Time, o Outcome) model.ArchiveResult {
	res := o.Result
	res.Plugin, res.Hook, res.Step, res.Background = in.Hook.Plugin, in.Hook.Name, in.Hook.Step, in.Hook.Background
	res.Attempts = attempt
	if res.StartedAt.IsZero() {
		res.StartedAt = started
	}
	if res.EndedAt.IsZero() {
		res.EndedAt = time.Now()
	}
	if o.Transient {
		res.Status = ""
		res.Error = cmp.Or(res.Error, o.Error, fmt.Sprintf("exit code %d without a result record", res.ExitCode))
	}
	limit := a.opts.ResultFieldBytes
	res.OutputStr = truncate(res.OutputStr, limit)
	res.Error = truncate(res.Error, limit)
	res.Title = truncate(res.Title, limit)
	if len(res.OutputJSON) > limit {
		res.OutputJSON = json.RawMessage(fmt.Sprintf(`{"truncated":true,"bytes":%d}`, len(res.OutputJSON)))
	}
	return res
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…[truncated]"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// superviseAttempt starts the heartbeat and log-flush loop of one attempt
// and returns the function that stops it and writes the last log batch.
func (a *HostActivities) superviseAttempt(ctx context.Context, in RunHookInput, attempt int, logKey string, sink *runSink, log *zap.Logger, beat func(Progress)) func() {
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	flusher := &logFlusher{store: a.store, ident: in.Job.Ident, key: logKey, log: log}
	lastPulse := time.Time{}
	go func() {
		defer close(done)
		hb := time.NewTicker(a.opts.HeartbeatInterval)
		defer hb.Stop()
		fl := time.NewTicker(a.opts.LogFlushInterval)
		defer fl.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-hb.C:
				beat(sink.progressAt(attempt))
				if time.Since(lastPulse) >= a.opts.JobHeartbeatInterval {
					lastPulse = time.Now()
					if err := a.store.Heartbeat(loopCtx, in.Job.Ident); err != nil {
						log.Warn("job heartbeat", zap.Error(err))
					}
				}
			case <-fl.C:
				flusher.flush(loopCtx, sink)
			case <-sink.full:
				flusher.flush(loopCtx, sink)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
		defer fcancel()
		var undelivered []LogBatch
		a.heartbeatWhile(attempt, sink, beat, func() { undelivered = flusher.final(fctx, sink, a.opts.LogBatch) })
		if len(undelivered) == 0 {
			return
		}
		if lost, err := spoolLog(a.opts.LogOutbox, undelivered); err != nil {
			log.Error("job log entries lost (the hook's stderr stays in its .stderr.log)",
				zap.Int("entries", lost), zap.Error(err))
			return
		}
		log.Warn("job log not written before the attempt ended; spooled to the log outbox for delivery",
			zap.Int("batches", len(undelivered)))
	}
}

// heartbeatWhile keeps heartbeating the attempt's progress while fn runs.
// The final Redis writes of an attempt may wait on a slow or absent Redis
// for up to finalFlushTimeout each; without heartbeats that wait could
// outlast the heartbeat timeout, and Temporal would run the finished hook
// again.
func (a *HostActivities) heartbeatWhile(attempt int, sink *runSink, beat func(Progress), fn func()) {
	stop := onTicks(a.opts.HeartbeatInterval, func() { beat(sink.progressAt(attempt)) })
	fn()
	stop()
}

// logFlusher writes buffered log entries of one attempt in numbered batches.
// A failed write keeps the batch for the next flush (Redis being down delays
// the log, it does not fail the hook); what is still undelivered when the
// attempt ends goes to the log outbox.
type logFlusher struct {
	store   Store
	ident   string
	key     string
	seq     int
	pending []LogEntry
	log     *zap.Logger
}

// flush writes the pending batch, or a new one from sink. It reports false
// when a write failed.
func (f *logFlusher) flush(ctx context.Context, sink *runSink) bool {
	if len(f.pending) == 0 {
		f.pending = sink.take()
	}
	if len(f.pending) == 0 {
		return true
	}
	if err := f.store.AppendLog(ctx, f.ident, f.key, f.seq, f.pending); err != nil {
		f.log.Warn("append job log", zap.Int("entries", len(f.pending)), zap.Int("batch", f.seq), zap.Error(err))
		return false
	}
	f.seq++
	f.pending = nil
	return true
}

// final writes everything left once the attempt is over and returns what
// could not be written: the pending batch and the rest of the sink in
// batches of at most size entries, numbered on from the pending one.
func (f *logFlusher) final(ctx context.Context, sink *runSink, size int) []LogBatch {
	for f.flush(ctx, sink) {
		if len(f.pending) == 0 && sink.buffered() == 0 {
			return nil
		}
	}
	out := []LogBatch{{Ident: f.ident, Key: f.key, Seq: f.seq, Entries: f.pending}}
	rest := sink.take()
	for seq := f.seq + 1; len(rest) > 0; seq++ {
		n := min(size, len(rest))
		out = append(out, LogBatch{Ident: f.ident, Key: f.key, Seq: seq, Entries: rest[:n]})
		rest = rest[n:]
	}
	f.pending = nil
	return out
}

// runSink implements Sink for one attempt: it counts progress and buffers
// log entries up to the per-attempt cap.
type runSink struct {
	hook     string
	opts     Options
	full     chan struct{}
	mu       sync.Mutex
	prog     Progress
	resps    []model.Response
	buf      []LogEntry
	logged   int
	capNoted bool
}

func newRunSink(opts Options, hook string) *runSink {
	return &runSink{hook: hook, opts: opts, full: make(chan struct{}, 1)}
}

func (s *runSink) StderrLine(line string) {
	s.mu.Lock()
	s.prog.StderrLines++
	s.mu.Unlock()
	s.add(LogEntry{Kind: LogStdout, Time: time.Now(), Hook: s.hook, Message: truncate(strings.TrimRight(line, "\r\n"), s.opts.LogLineBytes)})
}

func (s *runSink) Response(r model.Response) {
	s.mu.Lock()
	s.prog.Responses++
	if len(s.resps) < s.opts.ResponsesPerRun {
		// The counters need status and fetcher code only, not the URL.
		s.resps = append(s.resps, model.Response{Status: r.Status, Bytes: r.Bytes, WgetCode: r.WgetCode})
	}
	s.mu.Unlock()
	r.URL = truncate(r.URL, s.opts.LogLineBytes)
	s.add(LogEntry{Kind: LogDownload, Time: time.Now(), Hook: s.hook, Response: &r})
}

func (s *runSink) Record() {
	s.mu.Lock()
	s.prog.Records++
	s.mu.Unlock()
}

func (s *runSink) add(e LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logged >= s.opts.LogLinesPerRun {
		if !s.capNoted {
			s.capNoted = true
			s.buf = append(s.buf, LogEntry{Kind: LogStdout, Time: e.Time, Hook: s.hook,
				Message: fmt.Sprintf("archiveflow: log of %s capped at %d entries for this attempt; further lines dropped", s.hook, s.opts.LogLinesPerRun)})
		}
		return
	}
	s.logged++
	s.buf = append(s.buf, e)
	if len(s.buf) >= s.opts.LogBatch {
		nudge(s.full)
	}
}

func (s *runSink) take() []LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.buf
	s.buf = nil
	return out
}

func (s *runSink) buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf)
}

func (s *runSink) responses() []model.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]model.Response(nil), s.resps...)
}

// progressAt is the attempt's progress so far.
func (s *runSink) progressAt(attempt int) Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.prog
	p.Attempt = attempt
	return p
}

// SignalHookReady names the signal RunHook sends the workflow a background
// hook's RunHookInput.ReadyTo names once the hook is ready (its first line
// of stdout); its payload is RunHookInput.ReadyKey. workflows'
// SignalHookReady is this name.
const SignalHookReady = "hook_ready"

// ReadySignaler tells a workflow that a background hook is ready.
type ReadySignaler interface {
	HookReady(ctx context.Context, workflowID, key string) error
}

// clientReady signals through the worker's client.
type clientReady struct{}

func (clientReady) HookReady(ctx context.Context, workflowID, key string) error {
	return activity.GetClient(ctx).SignalWorkflow(ctx, workflowID, "", SignalHookReady, key)
}

// readyTimeout bounds the signal that tells a workflow a hook is ready.
const readyTimeout = 10 * time.Second

// tellReady arranges for req.OnReady to tell in.ReadyTo that the hook is
// ready, once, without holding up the hook's output; it returns the
// function that waits for that signal to be sent (or to fail, which is
// logged: the workflow then launches the next hooks when its wait for the
// hook runs out).
func (a *HostActivities) tellReady(ctx context.Context, in RunHookInput, req *RunRequest, log *zap.Logger) (wait func()) {
	if in.ReadyTo == "" || !in.Hook.Background {
		return func() {}
	}
	signaler := cmp.Or[ReadySignaler](a.opts.Ready, clientReady{})
	var once sync.Once
	done := make(chan struct{})
	sent := false
	req.OnReady = func() {
		once.Do(func() {
			sent = true
			go func() {
				defer close(done)
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
				defer cancel()
				if err := signaler.HookReady(sctx, in.ReadyTo, in.ReadyKey); err != nil {
					log.Warn("tell the workflow the background hook is ready", zap.String("workflow", in.ReadyTo), zap.Error(err))
					return
				}
				log.Info("background hook ready")
			}()
		})
	}
	return func() {
		once.Do(func() {}) // no signal after the attempt
		if sent {
			<-done
		}
	}
}
