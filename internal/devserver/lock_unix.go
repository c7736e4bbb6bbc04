//go:build unix

package devserver

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// dirLock is an exclusive advisory lock (flock) on a file inside a data
// dir. flock locks belong to the open file description, so a second lock
// attempt fails both from another process and from this process, and the
// kernel drops the lock when the holder dies: a crashed server never
// leaves a stale lock behind.
type dirLock struct {
	f *os.File
}

// heldLocks keeps every held lock's file reachable. Without it, a caller
// that drops its *Server while the server keeps running would let the
// garbage collector finalize the file, closing the descriptor and
// silently releasing the lock.
var heldLocks sync.Map // *dirLock → struct{}

// lockDataDir takes the lock at path or fails naming the holder's pid.
func lockDataDir(path string) (*dirLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readHolder(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: lock %s is held by %s", ErrDataDirInUse, path, holder)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Record the holder for the error message of the next contender.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	l := &dirLock{f: f}
	heldLocks.Store(l, struct{}{})
	return l, nil
}

// unlock releases the lock; the file stays (removing it would race with a
// contender that already opened it).
func (l *dirLock) unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	heldLocks.Delete(l)
	if err != nil {
		return fmt.Errorf("unlock data dir: %w", err)
	}
	return nil
}

func readHolder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid := strings.TrimSpace(string(buf[:n]))
	if pid == "" {
		return "another dev server"
	}
	if pid == strconv.Itoa(os.Getpid()) {
		return "another dev server in this process (pid " + pid + ")"
	}
	return "the dev server of pid " + pid
}
