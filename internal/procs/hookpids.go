package procs

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Hook-written pid files. ArchiveBox's hook plan asks a hook that
// double-forks or leaves a long-running process behind to name it in a
// .pid file in its own directory (abx-plugins' chrome plugin writes
// chrome.pid, its mtime set to the browser's start time). Such a process
// may have left the hook's group and cleared its environment, so neither
// the group nor the marker finds it: the runner reads these files when an
// attempt ends and ends the processes they name, with the checks the
// sweeper applies to its own files (a pid whose instance is not the one
// the file meant is never signalled).
//
// A directory can be shared by several hooks of one plugin (the chrome
// plugin's launch, tab and navigate hooks all write to chrome/). A
// hook's pid file may name a process another hook of the same directory
// still needs, so the files are read only when the last attempt this
// process runs in that directory ends, and only processes started while
// attempts ran there count.

// pidFileSlack is how much later than a pid file's mtime the process it
// names may have started: abx-plugins set the mtime to the process's start
// time (wall clock, rounded), other hooks write the file after the start.
// A process started later than that is a reused pid.
const pidFileSlack = 2 * time.Second

// maxHookPIDFile bounds what is read of a hook's pid file.
const maxHookPIDFile = 64

// userHZ is the unit of /proc/PID/stat's start time: USER_HZ, 100 on every
// Linux architecture Go supports (the kernel's ABI, whatever CONFIG_HZ is).
const userHZ = 100

// dirUse counts the attempts this process runs in one directory and the
// earliest start among the attempts since the count was last zero.
type dirUse struct {
	n     int
	since uint64 // clock ticks since boot
}

var dirs = struct {
	sync.Mutex
	m map[string]*dirUse
}{m: map[string]*dirUse{}}

// enterDir records an attempt started at start (clock ticks) in dir.
func enterDir(dir string, start uint64) {
	dirs.Lock()
	defer dirs.Unlock()
	u := dirs.m[dir]
	if u == nil {
		u = &dirUse{since: start}
		dirs.m[dir] = u
	}
	u.n++
	u.since = min(u.since, start)
}

// leaveDir ends an attempt in dir. When it was the last one, it returns
// the earliest start of the attempts that ran there since the directory
// was last free, and true.
func leaveDir(dir string) (uint64, bool) {
	dirs.Lock()
	defer dirs.Unlock()
	u := dirs.m[dir]
	if u == nil {
		return 0, false
	}
	u.n--
	if u.n > 0 {
		return 0, false
	}
	delete(dirs.m, dir)
	return u.since, true
}

// dirBusy reports whether this process runs an attempt in dir.
func dirBusy(dir string) bool {
	dirs.Lock()
	defer dirs.Unlock()
	return dirs.m[dir] != nil
}

// hookPIDFiles returns a function listing the live processes named by the
// hook-written .pid files in dir (not the runner's own) that started at or
// after since and at most until (clock ticks since boot), each with the
// members of the process group it leads.
func hookPIDFiles(dir string, since, until uint64) func() []procRef {
	return func() []procRef {
		var out []procRef
		for _, p := range namedByPIDFiles(dir, since, until) {
			out = append(out, p)
			if st, err := readStat(p.PID); err == nil && st.PGID == p.PID {
				for _, m := range groupMembers(p.PID) {
					if m.PID != p.PID && m.StartTime >= since {
						out = append(out, m)
					}
				}
			}
		}
		return out
	}
}

// namedByPIDFiles reads dir's hook pid files and keeps each process that
// passes the checks: alive and not a zombie, not this process, started in
// [since, until], no later than the file's mtime plus pidFileSlack, and a
// user process (a non-empty cmdline).
func namedByPIDFiles(dir string, since, until uint64) []procRef {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	boot, ok := bootTime()
	if !ok {
		return nil
	}
	var out []procRef
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, SuffixPID) || !e.Type().IsRegular() || IsRunnerFile(name) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		pid, ok := readHookPID(filepath.Join(dir, name))
		if !ok || pid <= 1 || pid == os.Getpid() {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.State == 'Z' || st.State == 'X' || st.Flags&pfKthread != 0 {
			continue
		}
		if st.StartTime < since || st.StartTime > until {
			continue
		}
		started := boot.Add(time.Duration(st.StartTime) * time.Second / userHZ)
		if started.After(info.ModTime().Add(pidFileSlack)) {
			continue
		}
		if cmd, err := readCmdline(pid); err != nil || len(cmd) == 0 {
			continue
		}
		out = append(out, procRef{PID: pid, StartTime: st.StartTime})
	}
	return out
}

// readHookPID reads the pid on the first line of a hook's pid file.
func readHookPID(path string) (int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	buf := make([]byte, maxHookPIDFile)
	n, _ := f.Read(buf)
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	return pid, err == nil
}

// bootTime is the wall-clock time of boot (/proc/stat's btime).
func bootTime() (time.Time, bool) {
	b, err := os.ReadFile(procRoot + "/stat")
	if err != nil {
		return time.Time{}, false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			secs, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return time.Unix(secs, 0), err == nil
		}
	}
	return time.Time{}, false
}

// nowTicks is the current time in /proc start-time units.
func nowTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return ^uint64(0)
	}
	return uint64(ts.Sec)*userHZ + uint64(ts.Nsec)/(1e9/userHZ)
}
