package procs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// procRoot is where the proc filesystem is mounted.
const procRoot = "/proc"

// procStat is the part of /proc/PID/stat the runner needs.
type procStat struct {
	State     byte   // R, S, D, Z, T, ...
	PPID      int    // field 4
	PGID      int    // field 5
	Flags     uint64 // field 9, PF_* flags
	StartTime uint64 // field 22, clock ticks since boot
}

// Process flags (include/linux/sched.h): a kernel thread has no user
// memory; an exiting process has released or is releasing it.
const (
	pfExiting = 0x00000004
	pfKthread = 0x00200000
)

// readStat reads /proc/PID/stat. The comm field may hold spaces and
// parentheses, so fields are counted from the last ')'.
// It uses raw system calls and a stack buffer: the leftover scan reads the
// stat of every process on the host after every hook, and os.File's
// bookkeeping would double its cost.
func readStat(pid int) (procStat, error) {
	path := procRoot + "/" + strconv.Itoa(pid) + "/stat"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var buf [1024]byte // a stat line is ~300 bytes; comm is at most 64
	n, err := unix.Read(fd, buf[:])
	if err != nil {
		return procStat{}, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return parseStat(buf[:n])
}

func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return procStat{}, fmt.Errorf("parse /proc stat %q: no ')' after comm", truncateBytes(b, 80))
	}
	// Field N (1-based, as in proc(5)) is f[N-3]; only the five used are
	// kept, without splitting the whole line.
	var f [20][]byte
	n := 0
	for rest := b[i+1:]; n < len(f); n++ {
		rest = bytes.TrimLeft(rest, " \n")
		if len(rest) == 0 {
			break
		}
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		f[n], rest = rest[:end], rest[end:]
	}
	if n < len(f) {
		return procStat{}, fmt.Errorf("parse /proc stat: %d fields after comm, want >= 20", n)
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat ppid %q: %w", f[1], err)
	}
	pgid, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat pgrp %q: %w", f[2], err)
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat flags %q: %w", f[6], err)
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc stat starttime %q: %w", f[19], err)
	}
	return procStat{State: f[0][0], PPID: ppid, PGID: pgid, Flags: flags, StartTime: start}, nil
}

// readCmdline returns /proc/PID/cmdline split on NUL (empty for zombies and
// kernel threads).
func readCmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// Reading the environment of a process that is in the middle of execve can
// transiently fail or return nothing; such reads are retried for up to
// envRetryBudget, sleeping envRetryMin, doubling up to envRetryMax, in
// between: the exec window is usually over after the first short sleep.
const (
	envRetryBudget = 20 * time.Millisecond
	envRetryMin    = 50 * time.Microsecond
	envRetryMax    = 2 * time.Millisecond
)

// hasEnv reports whether /proc/PID/environ of the process instance p
// holds the exact entry kv. An empty or failed read of a process that is
// still alive and not exiting (it may be inside execve) is retried; a
// process whose environment cannot be read for lack of permission is not.
func hasEnv(p procRef, kv []byte) bool {
	path := procRoot + "/" + strconv.Itoa(p.PID) + "/environ"
	bp := envBufs.Get().(*[]byte)
	defer putEnvBuf(bp)
	var b []byte
	var deadline time.Time
	for delay := envRetryMin; ; delay = min(2*delay, envRetryMax) {
		var err error
		b, err = readWhole(path, bp)
		if err == nil && len(b) > 0 {
			break
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return false
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(envRetryBudget)
		} else if time.Now().After(deadline) {
			return false
		}
		st, err := readStat(p.PID)
		if err != nil || st.StartTime != p.StartTime || st.State == 'Z' || st.State == 'X' || st.Flags&(pfExiting|pfKthread) != 0 {
			return false
		}
		time.Sleep(delay)
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return bytes.Equal(b, kv)
		}
		if bytes.Equal(b[:i], kv) {
			return true
		}
		b = b[i+1:]
	}
	return false
}

// envBufs holds the buffers hasEnv reads environments into: the scan reads
// one per candidate process, and an environment is a few KiB.
var envBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// putEnvBuf returns a buffer to envBufs unless a huge environment grew it.
func putEnvBuf(bp *[]byte) {
	if len(*bp) <= 256<<10 {
		envBufs.Put(bp)
	}
}

// readWhole reads the whole file at path into *buf, growing it as needed,
// with plain system calls (os.ReadFile adds an fstat, the poller and a
// fresh buffer per read).
func readWhole(path string, buf *[]byte) ([]byte, error) {
	fd, err := openFile(path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(*buf) {
			*buf = append(*buf, make([]byte, len(*buf))...)
		}
		m, err := readFD(fd, (*buf)[n:])
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return (*buf)[:n], nil
		}
		n += m
	}
}

// listPIDs returns every numeric entry of /proc (processes; threads are not
// listed). It runs after every hook, so it reads the directory with raw
// getdents into a stack buffer and parses the names in place.
func listPIDs() ([]int, error) {
	fd, err := unix.Open(procRoot, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", &fs.PathError{Op: "open", Path: procRoot, Err: err})
	}
	defer unix.Close(fd)
	var buf [16 << 10]byte
	pids := make([]int, 0, 256)
	for {
		n, err := unix.Getdents(fd, buf[:])
		if err != nil {
			return nil, fmt.Errorf("list processes: %w", &fs.PathError{Op: "getdents", Path: procRoot, Err: err})
		}
		if n <= 0 {
			return pids, nil
		}
		pids = appendDirentPIDs(pids, buf[:n])
	}
}

// appendDirentPIDs appends the all-digit names of the linux_dirent64
// records in b (ino u64, off i64, reclen u16, type u8, NUL-terminated name).
func appendDirentPIDs(pids []int, b []byte) []int {
	const nameOff = 19
	for len(b) >= nameOff {
		reclen := int(b[16]) | int(b[17])<<8
		if reclen < nameOff || reclen > len(b) {
			break
		}
		pid := 0
		for _, c := range b[nameOff:reclen] {
			if c == 0 {
				break
			}
			if c < '0' || c > '9' || pid > 1<<30 {
				pid = 0
				break
			}
			pid = pid*10 + int(c-'0')
		}
		if pid > 0 {
			pids = append(pids, pid)
		}
		b = b[reclen:]
	}
	return pids
}

// procRef identifies one process instance: a pid plus its start time, so a
// reused pid is never mistaken for it.
type procRef struct {
	PID       int
	StartTime uint64
}

// alive reports whether the process still exists as the same instance and is
// not a zombie (a zombie holds no resources and cannot be signalled away).
func (p procRef) alive() bool {
	st, err := readStat(p.PID)
	return err == nil && st.StartTime == p.StartTime && st.State != 'Z' && st.State != 'X'
}

// signal delivers sig to exactly this process instance. It opens a pidfd
// first and re-checks the start time through it, so a pid reused between
// the check and the signal cannot be hit; without pidfd support it falls
// back to kill(2) after the check. A process already gone is not an error.
func (p procRef) signal(sig unix.Signal) error {
	fd, err := unix.PidfdOpen(p.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		if !p.alive() {
			return nil
		}
		return ignoreESRCH(unix.Kill(p.PID, sig))
	}
	defer unix.Close(fd)
	// The pidfd pins this pid to the instance that existed at open time; if
	// that instance is the one we mean, the start time still matches now.
	if st, err := readStat(p.PID); err != nil || st.StartTime != p.StartTime {
		return nil
	}
	return ignoreESRCH(unix.PidfdSendSignal(fd, sig, nil, 0))
}

// groupMembers lists the non-zombie processes of process group pgid.
func groupMembers(pgid int) []procRef {
	pids, err := listPIDs()
	if err != nil {
		return nil
	}
	var out []procRef
	for _, pid := range pids {
		st, err := readStat(pid)
		if err != nil || st.PGID != pgid || st.State == 'Z' || st.State == 'X' {
			continue
		}
		out = append(out, procRef{PID: pid, StartTime: st.StartTime})
	}
	return out
}

// leaders holds the hook leaders this process has started and not yet
// cleaned up after, pid → start time: Run adds its leader once started and
// removes it when the run ends.
var leaders sync.Map

// isLeader reports whether p is the leader of a hook this process runs: its
// environment holds that hook's own marker (Spec.env overrides any
// inherited one), so it never carries another attempt's, and the marker
// scan need not read it. The start time tells a reused pid apart.
func isLeader(p procRef) bool {
	start, ok := leaders.Load(p.PID)
	return ok && start.(uint64) == p.StartTime
}

// markedProcesses lists live processes whose environment holds the entry
// kv and that started at or after minStart (clock ticks since boot; 0 = any).
// Only processes started after the hook can carry its marker, so the start
// time filter avoids reading the environment of every process on the host;
// a non-nil birth window also skips, without reading their /proc entry, the
// processes whose pid shows they were created before the hook. The leaders
// of the other hooks this process runs are skipped too: on a busy worker
// they are most of the window, and reading a process's environment is the
// costly part of the scan (tens of µs, longer while it is inside execve).
func markedProcesses(kv []byte, minStart uint64, w *birthWindow) ([]procRef, error) {
	pids, err := w.candidates()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []procRef
	for _, pid := range pids {
		if pid == self {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.StartTime < minStart || st.State == 'Z' || st.State == 'X' || st.Flags&pfKthread != 0 {
			continue
		}
		if ref := (procRef{PID: pid, StartTime: st.StartTime}); !isLeader(ref) && hasEnv(ref, kv) {
			out = append(out, ref)
		}
	}
	return out, nil
}

func ignoreESRCH(err error) error {
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

func truncateBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
