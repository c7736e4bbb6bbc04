package procs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/archiveflow/archiveflow/internal/jsonl"
)

// maxWarnings bounds the warnings logged per attempt about bad stdout lines;
// the rest are only counted.
const maxWarnings = 10

// noCgroupOnce warns once per process that limits fall back to rlimits.
var noCgroupOnce sync.Once

// active holds the attempt IDs being run by this process, so that Sweep
// never touches a live attempt of its own process.
var active sync.Map

// inflight counts the Run calls under way in this process, so a worker that
// shuts down can wait until every hook it cancelled is really gone.
var inflight struct {
	sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func beginRun() {
	inflight.Lock()
	defer inflight.Unlock()
	if inflight.n == 0 {
		inflight.idle = make(chan struct{})
	}
	inflight.n++
}

func endRun() {
	inflight.Lock()
	defer inflight.Unlock()
	inflight.n--
	if inflight.n == 0 {
		close(inflight.idle)
	}
}

// Wait blocks until no Run is under way in this process (every hook it
// started has ended and been cleaned up) or ctx ends; it returns the number
// of runs still under way (0 when idle).
func Wait(ctx context.Context) int {
	inflight.Lock()
	if inflight.n == 0 {
		inflight.Unlock()
		return 0
	}
	idle := inflight.idle
	inflight.Unlock()
	select {
	case <-idle:
		return 0
	case <-ctx.Done():
		inflight.Lock()
		defer inflight.Unlock()
		return inflight.n
	}
}

// Run runs one hook attempt to its end and returns its outcome.
//
// An error means the hook could not be started (invalid spec, missing
// executable, I/O failure creating its files; see IsPermanent); once the
// hook has started, Run always returns a Result and a nil error, and the
// Result says whether the outcome is final (Status) or transient
// (Transient, Err). When Run returns, nothing the hook started is running,
// OnRecord and OnStderr are not called any more, and the .pid file is gone.
func Run(ctx context.Context, spec Spec) (Result, error) {
	s, err := spec.normalize()
	if err != nil {
		return Result{}, err
	}
	if s.NoRunnerFiles {
		return Result{}, fmt.Errorf("%w: hook %s: NoRunnerFiles is for in-process hooks (RunFunc): a process's output is kept in its runner files", ErrInvalidSpec, s.Stem)
	}
	log := s.Log.With(zap.String("hook", s.Stem), zap.String("attempt", s.AttemptID))
	if _, loaded := active.LoadOrStore(s.AttemptID, struct{}{}); loaded {
		return Result{}, fmt.Errorf("%w: attempt ID %s: already running in this process", ErrInvalidSpec, s.AttemptID)
	}
	defer active.Delete(s.AttemptID)
	beginRun()
	defer endRun()

	if err := context.Cause(ctx); err != nil {
		return Result{}, fmt.Errorf("run hook %s: not started: %w", s.Stem, err)
	}
	if err := makeDir(s.Dir); err != nil {
		return Result{}, fmt.Errorf("run hook %s: create dir: %w", s.Stem, err)
	}
	files := runnerFiles(s.Dir, s.Stem, s.AttemptID)
	cmd, argv, err := prepare(s, files)
	if err != nil {
		return Result{}, fmt.Errorf("run hook %s: %w", s.Stem, err)
	}
	cg, err := newHookCgroup(s.Limits, s.AttemptID, log)
	if err != nil {
		if s.Limits.Cgroup != "" {
			closeFiles(cmd)
			// %v: a missing cgroup file is not a missing executable (IsPermanent).
			return Result{}, fmt.Errorf("run hook %s: limits: %v", s.Stem, err)
		}
		noCgroupOnce.Do(func() {
			log.Warn("hook limits without a cgroup: memory is limited per process (RLIMIT_DATA), processes per user (RLIMIT_NPROC, not for root); set hooks.limits.cgroup", zap.Error(err))
		})
	}
	born := openBirthWindow()
	cmd, startErr := launch(ctx, cmd, cg, s.Limits, log)
	// The child holds its own copies of the output descriptors.
	closeFiles(cmd)
	if startErr != nil {
		cg.remove(log)
		return Result{}, fmt.Errorf("run hook %s: start %s: %w", s.Stem, s.Path, startErr)
	}
	res := Result{AttemptID: s.AttemptID, Files: files, StartedAt: time.Now(), ExitCode: -1}
	waitCh := make(chan error, 1)
	go func() { waitCh <- cmd.Wait() }()

	pid := cmd.Process.Pid
	if born != nil {
		born.first = pid
	}
	leader := procRef{PID: pid}
	if st, err := readStat(pid); err == nil {
		leader.StartTime = st.StartTime
		leaders.Store(pid, leader.StartTime)
		defer leaders.CompareAndDelete(pid, leader.StartTime)
	}
	if leader.StartTime != 0 {
		enterDir(s.Dir, leader.StartTime)
	} else {
		enterDir(s.Dir, nowTicks())
	}
	log = log.With(zap.Int("pid", pid))
	log.Info("hook started", zap.String("path", s.Path), zap.Strings("args", s.Args), zap.String("dir", s.Dir))

	out := &stdoutSink{onRecord: s.OnRecord, onReady: s.OnReady, log: log, lineCap: s.LineCap, snapID: s.SnapshotID}
	errs := &stderrSink{onLine: s.OnStderr}
	stdout := newTailer(files.Stdout, &jsonl.Splitter{Cap: s.LineCap, Emit: out.line})
	stderr := newTailer(files.Stderr, &jsonl.Splitter{Cap: s.StderrLineCap, Emit: errs.line})
	stopTail := make(chan struct{})
	var tails sync.WaitGroup
	follow := func() {
		for _, t := range []*tailer{stdout, stderr} {
			tails.Go(func() {
				if err := t.follow(stopTail); err != nil {
					log.Warn("read hook output", zap.Error(err))
				}
			})
		}
	}
	// The runner's own files are written while the hook runs, not before.
	writeAttemptPIDFile(files.PID, leader, argv, res.StartedAt, log)
	if err := writeShFile(files.Sh, s.Dir, s.AttemptID, argv); err != nil {
		log.Warn("write command file", zap.String("path", files.Sh), zap.Error(err))
	}

	rp := &reaper{pgid: pid, marker: []byte(MarkerEnv + "=" + s.AttemptID), minStart: leader.StartTime, born: born, grace: s.Grace, log: log}
	if cg != nil {
		rp.members = cg.members
	}
	if err := supervise(ctx, s.Timeout, rp, waitCh, follow, &res); err != nil {
		log.Debug("hook wait", zap.Error(err))
	}
	res.EndedAt = time.Now()
	res.ExitCode, res.Signal = exitStatus(cmd.ProcessState)
	close(stopTail) // tails that follow catch up while the leftovers are cleaned up
	if since, last := leaveDir(s.Dir); last {
		rp.pidFiles = hookPIDFiles(s.Dir, since, nowTicks())
	}
	res.Leftovers = rp.cleanup()
	res.Limit, res.LimitError = cg.hit()
	if res.Limit == "" {
		res.Limit, res.LimitError = rlimitHit(s.Limits, cg != nil, &res, usage(cmd.ProcessState))
	}
	cg.remove(log)
	tails.Wait()
	for _, t := range []*tailer{stdout, stderr} {
		if err := t.finish(); err != nil {
			log.Warn("read hook output", zap.Error(err))
		}
	}
	if err := os.Remove(files.PID); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Warn("remove pid file", zap.Error(err))
	}

	res.finish(s, out, errs, log)
	return res, nil
}

// makeDir creates dir like os.MkdirAll, with one system call when only the
// last element is missing (the common case: SNAP_DIR exists, PLUGIN not).
func makeDir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	if err == nil {
		return nil
	}
	return os.MkdirAll(dir, 0o755)
}

// prepare creates the output files and builds the command.
func prepare(s Spec, files Files) (*exec.Cmd, []string, error) {
	stdout, err := createOutput(files.Stdout)
	if err != nil {
		return nil, nil, err
	}
	stderr, err := createOutput(files.Stderr)
	if err != nil {
		stdout.Close()
		return nil, nil, err
	}
	argv := append([]string{s.Path}, s.Args...)
	cmd := &exec.Cmd{
		Path:        s.Path,
		Args:        argv,
		Env:         s.env(),
		Dir:         s.Dir,
		Stdout:      stdout,
		Stderr:      stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	return cmd, argv, nil
}

// createOutput creates a fresh append-only output file; an existing file
// means the attempt ID was reused, which would mix two attempts' output.
func createOutput(path string) (*os.File, error) {
	f, err := createFile(path, unix.O_EXCL|unix.O_APPEND)
	if err != nil {
		return nil, fmt.Errorf("create output file: %w", err)
	}
	return f, nil
}

func closeFiles(cmd *exec.Cmd) {
	for _, w := range []any{cmd.Stdout, cmd.Stderr} {
		if f, ok := w.(*os.File); ok {
			f.Close()
		}
	}
}

// writeAttemptPIDFile records the started hook. The cmdline recorded is the
// argv that was executed, not a read of /proc/PID/cmdline: right after
// execve that read can still return a transitional value. For a script the
// kernel puts the interpreter before it; Sweep matches on that suffix. A
// failure is logged, not fatal: the hook is running and Run cleans up.
func writeAttemptPIDFile(path string, leader procRef, argv []string, started time.Time, log *zap.Logger) {
	if err := writePIDFile(path, pidFile{Proc: leader, Cmdline: argv, Owner: selfRef()}, started); err != nil {
		log.Warn("write pid file", zap.String("path", path), zap.Error(err))
	}
}

// followDelay is how long a hook runs before its output is followed live.
// A hook that ends sooner (a no-op hook, a skip) has its output read once,
// at its end, without two goroutines and their files competing with it for
// the CPU while it runs; records still reach OnRecord within about
// followDelay + pollMax of their write.
const followDelay = 5 * time.Millisecond

// supervise waits for the leader, stopping the group on timeout or
// cancellation, and returns the leader's wait error. It calls follow once
// the hook has run for followDelay, or when it starts stopping it.
func supervise(ctx context.Context, timeout time.Duration, rp *reaper, waitCh <-chan error, follow func(), res *Result) error {
	var timeoutC <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	ft := time.NewTimer(followDelay)
	defer ft.Stop()
	followC := ft.C
	startFollowing := func() {
		if followC != nil {
			followC = nil
			follow()
		}
	}
	for {
		select {
		case err := <-waitCh:
			return err
		case <-followC:
			startFollowing()
		case <-timeoutC:
			res.TimedOut = true
			startFollowing()
			return rp.stopLeader(waitCh, "timeout "+timeout.String())
		case <-ctx.Done():
			res.Canceled = true
			startFollowing()
			return rp.stopLeader(waitCh, "canceled: "+context.Cause(ctx).Error())
		}
	}
}

// exitStatus returns the exit code (128+N for death by signal N) and signal.
func exitStatus(ps *os.ProcessState) (int, syscall.Signal) {
	if ps == nil {
		return -1, 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return ps.ExitCode(), 0
}

var (
	selfOnce sync.Once
	self     procRef
)

// selfRef identifies the current process (the owner of its pid files).
func selfRef() procRef {
	selfOnce.Do(func() {
		self = procRef{PID: os.Getpid()}
		if st, err := readStat(self.PID); err == nil {
			self.StartTime = st.StartTime
		}
	})
	return self
}

func logResult(log *zap.Logger, r Result) {
	fields := []zap.Field{
		zap.String("status", string(r.Status)),
		zap.Bool("transient", r.Transient),
		zap.String("reason", r.Reason),
		zap.Int("exit_code", r.ExitCode),
		zap.Bool("timed_out", r.TimedOut),
		zap.Bool("canceled", r.Canceled),
		zap.Duration("duration", r.EndedAt.Sub(r.StartedAt)),
		zap.Int64("records", r.Counts.Records),
		zap.Int64("ignored_lines", r.Counts.Ignored),
		zap.Int64("unknown_records", r.Counts.Unknown),
		zap.Int64("invalid_records", r.Counts.Invalid),
		zap.Int64("oversize_lines", r.Counts.Oversize),
		zap.Int("outputs", len(r.Outputs)),
		zap.Int64("output_bytes", r.OutputBytes),
		zap.Int("leftovers", r.Leftovers),
	}
	if r.Transient {
		log.Warn("hook attempt failed transiently", fields...)
		return
	}
	log.Info("hook finished", fields...)
}

// stdoutSink parses stdout lines into records and counts them. It is used
// by one goroutine only.
type stdoutSink struct {
	onRecord  func(jsonl.Record)
	onReady   func() // called at the first line, then nil
	log       *zap.Logger
	lineCap   int
	counts    Counts
	last      *jsonl.ArchiveResult
	responses ResponseSummary
	warnings  int
	snapID    string // Spec.SnapshotID
	title     string
	tags      map[string]bool
}

func (k *stdoutSink) line(b []byte, truncated bool) {
	if k.onReady != nil {
		ready := k.onReady
		k.onReady = nil
		ready()
	}
	if truncated {
		k.counts.Oversize++
		k.warn("stdout line longer than the cap dropped", zap.Int("cap", k.lineCap))
		return
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	rec, err := jsonl.ParseLine(b)
	switch {
	case err == nil:
	case errors.Is(err, jsonl.ErrInvalid):
		k.counts.Invalid++
		k.warn("invalid record ignored", zap.Error(err))
		return
	case errors.Is(err, jsonl.ErrUnknownType):
		// Kept in the stdout log as printed, counted in the result.
		k.counts.Unknown++
		k.warn("record of an unknown type kept in the stdout log only", zap.Error(err))
		return
	default:
		k.counts.Ignored++
		return
	}
	k.counts.Records++
	switch rec.Type {
	case jsonl.TypeArchiveResult:
		k.last = rec.ArchiveResult
	case jsonl.TypeResponse:
		k.responses.add(*rec.Response)
	case jsonl.TypeSnapshot:
		k.snapshot(*rec.Snapshot)
	case jsonl.TypeTag:
		k.tag(rec.Tag.Name)
	}
	if k.onRecord != nil {
		k.onRecord(rec)
	}
}

// snapshot takes the title of a Snapshot record that updates the current
// snapshot; one naming another snapshot's id is logged and left out.
func (k *stdoutSink) snapshot(s jsonl.Snapshot) {
	switch {
	case !s.IsUpdate():
	case s.ID != "" && k.snapID != "" && s.ID != k.snapID:
		k.warn("Snapshot record for another snapshot ignored", zap.String("id", s.ID), zap.String("snapshot_id", k.snapID))
	case s.Title != "":
		k.title = s.Title
	}
}

// MaxTags caps the distinct Tag names one attempt keeps.
const MaxTags = 64

func (k *stdoutSink) tag(name string) {
	if k.tags[name] {
		return
	}
	if len(k.tags) >= MaxTags {
		k.warn("Tag record over the cap ignored", zap.String("tag", name), zap.Int("cap", MaxTags))
		return
	}
	if k.tags == nil {
		k.tags = map[string]bool{}
	}
	k.tags[name] = true
}

func (k *stdoutSink) warn(msg string, fields ...zap.Field) {
	k.warnings++
	switch {
	case k.warnings <= maxWarnings:
		k.log.Warn(msg, fields...)
	case k.warnings == maxWarnings+1:
		k.log.Warn("further stdout warnings suppressed for this attempt; see counts")
	}
}

// stderrSink passes stderr lines on and keeps the last few.
type stderrSink struct {
	onLine func(string)
	count  int64
	tail   []string
}

func (k *stderrSink) line(b []byte, truncated bool) {
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	line := strings.ToValidUTF8(string(b), "\uFFFD")
	if truncated {
		line += " [truncated]"
	}
	k.count++
	if len(k.tail) == StderrTailLines {
		copy(k.tail, k.tail[1:])
		k.tail = k.tail[:StderrTailLines-1]
	}
	k.tail = append(k.tail, line)
	if k.onLine != nil {
		k.onLine(line)
	}
}

// finish fills in what the hook printed and left, decides its status and
// logs the result: the end of every run, in its own process or in-process.
func (res *Result) finish(s Spec, out *stdoutSink, errs *stderrSink, log *zap.Logger) {
	res.Counts = out.counts
	res.Counts.StderrLines = errs.count
	res.Last = out.last
	res.Title = out.title
	res.Tags = slices.Sorted(maps.Keys(out.tags))
	res.Responses = out.responses
	res.StderrTail = errs.tail
	var err error
	if res.Outputs, res.OutputBytes, err = ListOutputs(s.Dir); err != nil {
		log.Warn("list hook outputs", zap.Error(err))
	}
	decide(res, s.Background, s.Timeout)
	logResult(log, *res)
}
