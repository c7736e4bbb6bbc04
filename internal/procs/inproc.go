package procs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/jsonl"
)

// Func is a hook run inside this process: it works in dir, writes the
// hook's stdout and stderr to the writers and returns its exit code. It
// must return soon after ctx ends (timeout or stop).
type Func func(ctx context.Context, dir string, stdout, stderr io.Writer) int

// RunFunc runs fn as one hook attempt inside this process, with Run's
// contract for everything a process is not needed for: the spec's Dir is
// created, stdout and stderr are kept byte for byte in the attempt's runner
// files (STEM.ID.stdout.log, .stderr.log; each created at its stream's
// first byte, none for a stream fn wrote nothing to; none at all under
// Spec.NoRunnerFiles) and parsed with the same line
// caps and callbacks, the timeout and cancellation reach fn through its
// context, outputs are listed and the exit is mapped to a status by the
// same rules (decide). Spec.Path and Args are recorded only. A fn that does
// not return within the grace after its context ended is abandoned and the
// attempt is transient.
//
// It is for built-in hooks that start no process of their own: starting
// the worker's binary again to call the same function costs tens of
// milliseconds of CPU per hook (docs/crawls.md).
func RunFunc(ctx context.Context, spec Spec, fn Func) (Result, error) {
	s, err := spec.normalize()
	if err != nil {
		return Result{}, err
	}
	log := s.Log.WithLazy(zap.String("hook", s.Stem), zap.String("attempt", s.AttemptID), zap.Bool("in_process", true))
	beginRun()
	defer endRun()
	if err := context.Cause(ctx); err != nil {
		return Result{}, fmt.Errorf("run hook %s: not started: %w", s.Stem, err)
	}
	files := runnerFiles(s.Dir, s.Stem, s.AttemptID)
	files.PID, files.Sh = "", ""
	if s.NoRunnerFiles {
		files = Files{}
	} else if err := EnsureDir(s.Dir); err != nil {
		return Result{}, fmt.Errorf("run hook %s: create dir: %w", s.Stem, err)
	}

	out := &stdoutSink{onRecord: s.OnRecord, onReady: s.OnReady, log: log, lineCap: s.LineCap, snapID: s.SnapshotID}
	errs := &stderrSink{onLine: s.OnStderr}
	stdout := &teeLines{path: files.Stdout, sp: &jsonl.Splitter{Cap: s.LineCap, Emit: out.line}}
	stderr := &teeLines{path: files.Stderr, sp: &jsonl.Splitter{Cap: s.StderrLineCap, Emit: errs.line}}
	defer stdout.closeFile()
	defer stderr.closeFile()

	res := Result{AttemptID: s.AttemptID, Files: files, StartedAt: time.Now(), ExitCode: -1}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.Timeout > 0 {
		var tcancel context.CancelFunc
		runCtx, tcancel = context.WithTimeout(runCtx, s.Timeout)
		defer tcancel()
	}
	done := make(chan int, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				fmt.Fprintf(stderr, "panic: %v\n", p)
				log.Error("in-process hook panicked", zap.Any("panic", p))
				done <- 2
			}
		}()
		done <- fn(runCtx, s.Dir, stdout, stderr)
	}()
	select {
	case code := <-done:
		res.ExitCode = code
	case <-runCtx.Done():
		if ctx.Err() != nil {
			res.Canceled = true
		} else {
			res.TimedOut = true
		}
		select {
		case code := <-done:
			res.ExitCode = code
		case <-time.After(s.Grace):
			log.Warn("in-process hook did not return within the grace; abandoned", zap.Duration("grace", s.Grace))
			res.ExitCode = exitSIGKILL
		}
	}
	res.EndedAt = time.Now()
	stdout.close()
	stderr.close()
	if err := errors.Join(stdout.err, stderr.err); err != nil {
		return Result{}, fmt.Errorf("run hook %s: %w", s.Stem, err)
	}
	res.finish(s, out, errs, log)
	return res, nil
}

// exitSIGKILL is what an abandoned in-process hook is recorded as: a hook
// that needed SIGKILL.
const exitSIGKILL = 128 + 9

// teeLines keeps what a hook writes in its runner file and splits it into
// lines for the sinks. The file is created at the first byte written: a
// hook that writes nothing to a stream leaves no file for it (a crawl
// page's built-ins print no stderr when all goes well, and a file costs
// more than the page's other work on a slow disk); with no path, no file
// at all (Spec.NoRunnerFiles). Writes may come from
// several goroutines of the hook; writes after close are refused.
type teeLines struct {
	mu     sync.Mutex
	path   string
	file   *os.File // nil until the first write
	err    error    // the file could not be created: the attempt has no log
	sp     *jsonl.Splitter
	closed bool
}

var errClosedOutput = errors.New("hook output closed: the attempt ended")

func (t *teeLines) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, errClosedOutput
	}
	if len(p) == 0 {
		return 0, nil
	}
	if t.err != nil {
		return 0, t.err
	}
	if t.file == nil && t.path != "" {
		if t.file, t.err = createOutput(t.path); t.err != nil {
			return 0, t.err
		}
	}
	if t.file != nil {
		if _, err := t.file.Write(p); err != nil {
			return 0, err
		}
	}
	return t.sp.Write(p)
}

// EnsureDir creates dir when it is missing, with one system call when its
// parent exists (a crawl page's hook directory), MkdirAll's when not.
func EnsureDir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
			return nil
		}
		return err
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	}
	return err
}

// closeFile closes the runner file, if one was created.
func (t *teeLines) closeFile() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file != nil {
		t.file.Close()
	}
}

func (t *teeLines) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		t.sp.Flush()
	}
}
