package procs

import (
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Tail polling: after EOF the reader sleeps pollMin, doubling up to pollMax
// while the file stays idle; any new data resets it.
const (
	pollMin     = 2 * time.Millisecond
	pollMax     = 50 * time.Millisecond
	tailBufSize = 64 << 10
)

// tailBufs recycles the read buffers: a fresh 64 KiB per output file and
// hook would be zeroed and collected after every hook.
var tailBufs = sync.Pool{New: func() any { return new([tailBufSize]byte) }}

// flushWriter receives a file's bytes and, at the end, a Flush for a last
// line without a newline (a *jsonl.Splitter).
type flushWriter interface {
	io.Writer
	Flush()
}

// tailer follows one output file from its start with one fixed buffer: the
// file may grow without bound. follow runs in its own goroutine while the
// hook runs (not at all for a hook that ends at once); finish runs after
// follow returned and every writer is gone.
type tailer struct {
	path   string
	w      flushWriter
	fd     int // -1 when not open
	buf    *[tailBufSize]byte
	opened bool // open was tried
}

func newTailer(path string, w flushWriter) *tailer {
	return &tailer{path: path, w: w, fd: -1}
}

func (t *tailer) open() error {
	t.opened = true
	fd, err := openFile(t.path, unix.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("tail: %w", err)
	}
	t.fd, t.buf = fd, tailBufs.Get().(*[tailBufSize]byte)
	return nil
}

// follow opens the file and copies what is written to it until stop is
// closed, then reads to the current EOF and returns. The caller closes stop
// as soon as the hook leader exits, so this catch-up overlaps the leftover
// cleanup and finish has little left to read.
func (t *tailer) follow(stop <-chan struct{}) error {
	if err := t.open(); err != nil {
		return err
	}
	wait := pollMin
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		n, err := readFD(t.fd, t.buf[:])
		if n > 0 {
			_, _ = t.w.Write(t.buf[:n])
			wait = pollMin
			continue
		}
		if err != nil {
			return fmt.Errorf("tail %s: %w", t.path, err)
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return t.drain()
		case <-timer.C:
			wait = min(2*wait, pollMax)
		}
	}
}

// finish reads what follow did not (all of it when follow never ran) to
// EOF, flushes the writer and closes the file.
func (t *tailer) finish() error {
	var err error
	if !t.opened {
		err = t.open()
	}
	if t.fd >= 0 {
		err = t.drain()
		unix.Close(t.fd)
		tailBufs.Put(t.buf)
		t.fd, t.buf = -1, nil
	}
	t.w.Flush()
	return err
}

// drain copies the file to w until EOF.
func (t *tailer) drain() error {
	for {
		n, err := readFD(t.fd, t.buf[:])
		if n > 0 {
			_, _ = t.w.Write(t.buf[:n])
		}
		if err != nil {
			return fmt.Errorf("tail %s: %w", t.path, err)
		}
		if n == 0 {
			return nil
		}
	}
}
