package procs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Tail polling: after EOF the reader sleeps pollMin, doubling up to pollMax
// while the file stays idle; any new data resets it.
const (
	pollMin     = 2 * time.Millisecond
	pollMax     = 50 * time.Millisecond
	tailBufSize = 64 << 10
)

// tail follows the file at path from its start, writing everything read to
// w, until stop is closed; then it reads to EOF one last time and returns.
// Memory is one fixed buffer: the file may grow without bound.
func tail(path string, stop <-chan struct{}, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("tail %s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, tailBufSize)
	wait := pollMin
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		n, err := f.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			wait = pollMin
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("tail %s: %w", path, err)
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return drain(f, buf, w, path)
		case <-timer.C:
			wait = min(2*wait, pollMax)
		}
	}
}

// drain copies f to w until EOF.
func drain(f *os.File, buf []byte, w io.Writer, path string) error {
	for {
		n, err := f.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tail %s: %w", path, err)
		}
	}
}
