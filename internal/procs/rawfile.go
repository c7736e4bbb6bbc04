package procs

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The runner opens a handful of regular files per hook. os.OpenFile costs
// five system calls more than open(2) for each (it tries the file on the
// network poller and sets and clears O_NONBLOCK), which adds up to a
// noticeable part of a no-op hook on a host where system calls are slow;
// these helpers make the plain calls.

// openFile opens path with open(2) (O_CLOEXEC added).
func openFile(path string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, perm)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// createFile creates a new file for writing; flags add to O_WRONLY|O_CREAT.
// It returns an *os.File that is not on the network poller, as os/exec
// wants for a child's stdout.
func createFile(path string, flags int) (*os.File, error) {
	fd, err := openFile(path, unix.O_WRONLY|unix.O_CREAT|flags, 0o644)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// writeNewFile writes data to path, creating or truncating it, and sets
// its mtime unless mtime is zero.
func writeNewFile(path string, data []byte, mtime time.Time) error {
	fd, err := openFile(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	for len(data) > 0 && err == nil {
		var n int
		n, err = unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			err = nil
		}
		data = data[max(n, 0):]
	}
	if err == nil && !mtime.IsZero() {
		ts := unix.NsecToTimespec(mtime.UnixNano())
		err = unix.UtimesNanoAt(fd, "", []unix.Timespec{ts, ts}, unix.AT_EMPTY_PATH)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// readFD reads from fd, retrying on EINTR; 0 bytes and no error is EOF.
func readFD(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Read(fd, buf)
		if !errors.Is(err, unix.EINTR) {
			return max(n, 0), err
		}
	}
}

// procFile is a /proc file read again and again (the fork counter, the
// load average): it stays open, and each read seeks back to its start,
// which makes the kernel generate it afresh. Two calls instead of three.
type procFile struct {
	path string
	mu   sync.Mutex
	fd   int // -1 until opened
}

func newProcFile(path string) *procFile { return &procFile{path: path, fd: -1} }

// read returns the file's current content, at most len(buf) bytes.
func (p *procFile) read(buf []byte) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for try := 0; ; try++ {
		if p.fd < 0 {
			fd, err := openFile(p.path, unix.O_RDONLY, 0)
			if err != nil {
				return nil, err
			}
			p.fd = fd
		}
		_, err := unix.Seek(p.fd, 0, 0)
		var n int
		if err == nil {
			n, err = readFD(p.fd, buf)
		}
		if err == nil {
			return buf[:n], nil
		}
		unix.Close(p.fd)
		p.fd = -1
		if try > 0 {
			return nil, &fs.PathError{Op: "read", Path: p.path, Err: err}
		}
	}
}
