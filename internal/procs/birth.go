package procs

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// birthWindow tells, from its pid alone, whether a process may have been
// created after a hook started, so that the leftover scan reads the /proc
// entries of new processes only instead of every process on the host.
//
// The kernel hands out pids in increasing order, wrapping from pid_max back
// to 300 and skipping pids in use. A process created after the hook leader
// therefore has a pid in the cyclic range from the leader's pid to the last
// pid handed out, as long as the pid counter has not gone all the way round
// since. It cannot have: the counter moves by at most one per process created
// (the fork counter of /proc/stat, all namespaces) plus one per pid it skips
// (in use at the start, at most 3 per thread counting process group and
// session ids, or created since), and the window is used only while
//
//	2 × forks since the start + 3 × threads at the start < pid_max − 300.
//
// Otherwise, or when a counter cannot be read, every process is a candidate
// and only the start-time filter applies. Known gap: a fork that the kernel
// refuses after taking a pid (a cgroup pids limit, a fork restarted by a
// signal) moves the counter without being counted; a hook would need tens of
// thousands of those during its run, and when the runner put the hook in
// its own cgroup, the cgroup's member list finds its processes anyway.
type birthWindow struct {
	forks   uint64 // /proc/stat "processes" before the leader was created
	threads uint64 // threads on the host then (/proc/loadavg)
	first   int    // the leader's pid
}

// reservedPIDs is where the kernel restarts handing out pids after pid_max.
const reservedPIDs = 300

// openBirthWindow reads the counters; call it before the leader is created
// and set first to its pid. It returns nil (no window) when the counters
// cannot be read.
func openBirthWindow() *birthWindow {
	forks, err := readForks()
	if err != nil {
		return nil
	}
	threads, _, err := readLoadavg()
	if err != nil {
		return nil
	}
	return &birthWindow{forks: forks, threads: threads}
}

// maxProbe bounds the window probed pid by pid; a larger window is read
// from the /proc listing instead.
const maxProbe = 512

// pidSpan is a trusted window: the pids from first to last, wrapping from
// pidMax-1 to reservedPIDs when last < first.
type pidSpan struct{ first, last, pidMax int }

func (s pidSpan) contains(pid int) bool {
	if s.first <= s.last {
		return pid >= s.first && pid <= s.last
	}
	return pid >= s.first || pid <= s.last // the counter wrapped
}

// ranges returns the window as one or two increasing ranges [lo, hi].
func (s pidSpan) ranges() [][2]int {
	if s.first <= s.last {
		return [][2]int{{s.first, s.last}}
	}
	return [][2]int{{s.first, s.pidMax - 1}, {reservedPIDs, s.last}}
}

func (s pidSpan) size() int {
	n := 0
	for _, r := range s.ranges() {
		n += max(r[1]-r[0]+1, 0)
	}
	return n
}

// candidates returns the pids of the processes that may have been created
// since the leader: the live processes whose pid is in the window, or,
// when w is nil or cannot be trusted, every process. A small window is
// probed pid by pid (pidfd_open fails for a free pid and for a thread that
// does not lead its process), a larger one filters the /proc listing; both
// cost a few microseconds per pid in the window instead of a /proc read per
// process on the host.
func (w *birthWindow) candidates() ([]int, error) {
	if s, ok := w.span(); ok && s.size() <= maxProbe {
		if pids, ok := probe(s); ok {
			return pids, nil
		}
	}
	pids, err := listPIDs()
	if err != nil {
		return nil, err
	}
	s, ok := w.span() // after the listing: every listed pid was handed out by then
	if !ok {
		return pids, nil
	}
	out := pids[:0]
	for _, pid := range pids {
		if s.contains(pid) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// span returns the window from the leader's pid to the last pid handed
// out, and whether it can be trusted (see birthWindow).
func (w *birthWindow) span() (pidSpan, bool) {
	if w == nil || w.first <= 0 {
		return pidSpan{}, false
	}
	forks, err := readForks()
	if err != nil || forks < w.forks {
		return pidSpan{}, false
	}
	_, last, err := readLoadavg()
	if err != nil {
		return pidSpan{}, false
	}
	pidMax, err := pidMaxOnce()
	if err != nil || 2*(forks-w.forks)+3*w.threads >= uint64(max(pidMax-reservedPIDs, 0)) {
		return pidSpan{}, false
	}
	return pidSpan{first: w.first, last: last, pidMax: pidMax}, true
}

// probe lists the processes with a pid in s by opening a pidfd for each;
// false when the kernel has no pidfd_open.
func probe(s pidSpan) ([]int, bool) {
	var pids []int
	for _, r := range s.ranges() {
		for pid := r[0]; pid <= r[1]; pid++ {
			fd, err := unix.PidfdOpen(pid, 0)
			switch {
			case err == nil:
				unix.Close(fd)
				pids = append(pids, pid)
			case errors.Is(err, unix.ENOSYS):
				return nil, false
			}
		}
	}
	return pids, true
}

// pidMaxOnce reads /proc/sys/kernel/pid_max once per process: a window
// check per hook should not cost a file read, and lowering pid_max under
// running workers is not a case this guards.
var pidMaxOnce = sync.OnceValues(readPIDMax)

// readSmall reads a /proc file of at most len(buf) bytes with one read.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf[:n], nil
}

// The two /proc files read twice per hook stay open.
var (
	procStatFile    = newProcFile(procRoot + "/stat")
	procLoadavgFile = newProcFile(procRoot + "/loadavg")
)

// readForks returns the number of processes and threads created since boot
// (the "processes" line of /proc/stat).
func readForks() (uint64, error) {
	// The line follows the per-CPU and interrupt lines, which grow with the
	// host: a read into a buffer too small for the whole file is retried
	// with a larger one.
	var small [16 << 10]byte
	buf := small[:]
	for {
		b, err := procStatFile.read(buf)
		if err != nil {
			return 0, err
		}
		if n, ok := forksLine(b); ok {
			return n, nil
		}
		if len(b) < len(buf) || len(buf) >= 4<<20 {
			return 0, fmt.Errorf("read %s/stat: no processes line in %d bytes", procRoot, len(b))
		}
		buf = make([]byte, 4*len(buf))
	}
}

func forksLine(b []byte) (uint64, bool) {
	const key = "\nprocesses "
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	line := b[i+len(key):]
	j := bytes.IndexByte(line, '\n')
	if j < 0 {
		return 0, false // cut by the buffer
	}
	n, err := strconv.ParseUint(string(line[:j]), 10, 64)
	return n, err == nil
}

// readLoadavg returns the number of threads on the host and the last pid
// handed out in this pid namespace (/proc/loadavg).
func readLoadavg() (threads uint64, lastPID int, err error) {
	var buf [128]byte
	b, err := procLoadavgFile.read(buf[:])
	if err != nil {
		return 0, 0, err
	}
	return parseLoadavg(b)
}

// parseLoadavg parses "0.50 0.40 0.30 2/139 21239": the thread count is
// after the '/' of field 4, the last pid is field 5.
func parseLoadavg(b []byte) (threads uint64, lastPID int, err error) {
	f := bytes.Fields(b)
	if len(f) < 5 {
		return 0, 0, fmt.Errorf("parse loadavg %q: want 5 fields", b)
	}
	_, t, ok := bytes.Cut(f[3], []byte("/"))
	if !ok {
		return 0, 0, fmt.Errorf("parse loadavg: field 4 %q: want running/threads", f[3])
	}
	if threads, err = strconv.ParseUint(string(t), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("parse loadavg: threads %q: %w", t, err)
	}
	if lastPID, err = strconv.Atoi(string(f[4])); err != nil {
		return 0, 0, fmt.Errorf("parse loadavg: last pid %q: %w", f[4], err)
	}
	return threads, lastPID, nil
}

// readPIDMax returns /proc/sys/kernel/pid_max.
func readPIDMax() (int, error) {
	var buf [32]byte
	b, err := readSmall(procRoot+"/sys/kernel/pid_max", buf[:])
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return 0, fmt.Errorf("read pid_max %q: %w", b, err)
	}
	return n, nil
}
