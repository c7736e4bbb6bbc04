package procs

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/archiveflow/archiveflow/internal/bytesize"
)

// Limits are optional resource limits of one hook attempt; a zero field
// means no limit. Memory and Processes count the hook's processes together
// when the runner can give the hook its own cgroup (see Cgroup), else they
// fall back to per-process rlimits; CPUTime and OpenFiles are always
// per-process rlimits, inherited by every process the hook starts.
type Limits struct {
	// Memory is in bytes: the cgroup's memory limit (the OOM killer ends
	// the hook beyond it), or RLIMIT_DATA of each process without a cgroup
	// (allocations beyond it fail).
	Memory int64
	// CPUTime is RLIMIT_CPU, rounded up to whole seconds: SIGXCPU at the
	// limit, SIGKILL one second of CPU later.
	CPUTime time.Duration
	// OpenFiles is RLIMIT_NOFILE: opening more fails with EMFILE, which
	// the hook reports (or not) as its own error.
	OpenFiles int64
	// Processes is the cgroup's pids limit (forks beyond it fail), or
	// RLIMIT_NPROC without a cgroup: that one counts every process of the
	// hook's user, and root ignores it.
	Processes int64
	// Cgroup says where the hook's cgroup goes: "" finds a place (the
	// worker's own cgroup v1 memory and pids hierarchies, or its cgroup v2
	// directory when that already enables the controllers for children;
	// rlimits when neither is writable), CgroupNone never uses one, and an
	// absolute path names a cgroup v2 directory delegated to the worker,
	// where it creates one child per attempt (an error if it cannot).
	Cgroup string
}

// Set reports whether any limit is set (Cgroup alone limits nothing).
func (l Limits) Set() bool {
	return l.Memory > 0 || l.CPUTime > 0 || l.OpenFiles > 0 || l.Processes > 0
}

// CgroupNone in Limits.Cgroup makes the runner use rlimits only.
const CgroupNone = "none"

// Names of the limits, as Result.Limit and model.ArchiveResult.Limit report
// the one that ended a hook.
const (
	LimitMemory    = "memory"
	LimitProcesses = "processes"
	LimitCPUTime   = "cpu_time"
)

func (l Limits) validate() error {
	switch {
	case l.Memory < 0:
		return fmt.Errorf("memory limit %d: must be >= 0 bytes (0 = none)", l.Memory)
	case l.CPUTime < 0:
		return fmt.Errorf("CPU time limit %s: must be >= 0 (0 = none)", l.CPUTime)
	case l.OpenFiles < 0:
		return fmt.Errorf("open files limit %d: must be >= 0 (0 = none)", l.OpenFiles)
	case l.Processes < 0:
		return fmt.Errorf("processes limit %d: must be >= 0 (0 = none)", l.Processes)
	case l.Cgroup != "" && l.Cgroup != CgroupNone && !filepath.IsAbs(l.Cgroup):
		return fmt.Errorf("cgroup %q: must be empty (find one), %q or an absolute cgroup v2 directory", l.Cgroup, CgroupNone)
	}
	return nil
}

// cpuSeconds is CPUTime in whole seconds, rounded up.
func (l Limits) cpuSeconds() uint64 {
	return uint64((l.CPUTime + time.Second - 1) / time.Second)
}

// launch starts cmd with the limits in force from the hook's first
// instruction. A cgroup v2 takes the hook at its creation (clone3). For
// rlimits and a cgroup v1 the hook starts traced (PTRACE_TRACEME), so the
// kernel stops it right after its exec; the runner sets its rlimits with
// prlimit(2), moves it into its v1 cgroups and detaches, which lets it run.
// Where ptrace is refused (Yama ptrace_scope 3, a seccomp filter, a worker
// that is itself traced), the hook starts untraced and gets them right
// after the start instead: a window of microseconds in which a process it
// forks keeps the worker's rlimits and cgroups (logged once).
func launch(ctx context.Context, cmd *exec.Cmd, cg *hookCgroup, l Limits, log *zap.Logger) (*exec.Cmd, error) {
	cg.place(cmd)
	if !l.rlimited(cg != nil) && (cg == nil || cg.v1 == nil) {
		return start(ctx, cmd)
	}
	type started struct {
		cmd *exec.Cmd
		err error
	}
	done := make(chan started, 1)
	go func() {
		// ptrace requests come from the thread that started the tracee.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		traced := *cmd.SysProcAttr
		traced.Ptrace = true
		c := fresh(cmd)
		c.SysProcAttr = &traced
		c, err := start(ctx, c)
		if err == nil {
			done <- started{c, setUp(c, true, cg, l, log)}
			return
		}
		if !errors.Is(err, syscall.EPERM) {
			done <- started{c, err}
			return
		}
		untracedOnce.Do(func() {
			log.Warn("hook limits: ptrace refused, limits are set right after the start (a process the hook forks at once keeps the worker's)", zap.Error(err))
		})
		c, err = start(ctx, cmd)
		if err == nil {
			err = setUp(c, false, cg, l, log)
		}
		done <- started{c, err}
	}()
	r := <-done
	return r.cmd, r.err
}

// untracedOnce warns once per process that limits apply after the start.
var untracedOnce sync.Once

// setUp applies the rlimits and the v1 cgroup to the started hook and,
// when traced, lets it run. A hook gone already is not an error; a hook
// that cannot be put in its cgroup is killed and reaped, since it would
// run without its limits.
func setUp(cmd *exec.Cmd, traced bool, cg *hookCgroup, l Limits, log *zap.Logger) error {
	pid := cmd.Process.Pid
	if traced {
		var info unix.Siginfo
		var err error = unix.EINTR
		for errors.Is(err, unix.EINTR) {
			err = unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		}
		if err != nil {
			_ = cmd.Process.Kill() // a traced, stopped hook must not be left behind
			_ = cmd.Wait()
			return fmt.Errorf("wait for the hook's exec stop: %w", err)
		}
		if info.Code != cldTrapped {
			return nil // ended (killed) before it ran; Wait reports it
		}
		// Let it go: the exec's SIGTRAP is not delivered.
		defer func() {
			if err := unix.PtraceDetach(pid); err != nil && !errors.Is(err, unix.ESRCH) {
				log.Error("detach the hook's tracer", zap.Int("pid", pid), zap.Error(err))
			}
		}()
	}
	applyRlimits(pid, l, cg != nil, log)
	if cg != nil && cg.v1 != nil {
		if err := cg.enter(pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return err
		}
	}
	return nil
}

// cldTrapped is the si_code of a traced child's stop (CLD_TRAPPED).
const cldTrapped = 4

// rlimited reports whether the hook gets rlimits: always for CPU time and
// open files, for memory and processes when it has no cgroup.
func (l Limits) rlimited(cgrouped bool) bool {
	return l.CPUTime > 0 || l.OpenFiles > 0 || (!cgrouped && (l.Memory > 0 || l.Processes > 0))
}

// applyRlimits lowers the hook's rlimits with prlimit(2). Limits are only
// ever lowered: a value above the current hard limit keeps the hard limit.
// A hook already gone is not an error.
func applyRlimits(pid int, l Limits, cgrouped bool, log *zap.Logger) {
	set := func(name string, res int, soft, hard uint64) {
		var old unix.Rlimit
		if err := unix.Prlimit(pid, res, nil, &old); err != nil {
			if !errors.Is(err, unix.ESRCH) {
				log.Warn("read hook rlimit", zap.String("limit", name), zap.Error(err))
			}
			return
		}
		lim := unix.Rlimit{Cur: min(soft, old.Max), Max: min(hard, old.Max)}
		if err := unix.Prlimit(pid, res, &lim, nil); err != nil && !errors.Is(err, unix.ESRCH) {
			log.Warn("set hook rlimit", zap.String("limit", name), zap.Uint64("value", soft), zap.Error(err))
		}
	}
	if s := l.cpuSeconds(); s > 0 {
		set("cpu", unix.RLIMIT_CPU, s, s+1) // SIGXCPU at the soft limit, SIGKILL at the hard one
	}
	if l.OpenFiles > 0 {
		set("nofile", unix.RLIMIT_NOFILE, uint64(l.OpenFiles), uint64(l.OpenFiles))
	}
	if cgrouped {
		return
	}
	if l.Memory > 0 {
		set("data", unix.RLIMIT_DATA, uint64(l.Memory), uint64(l.Memory))
	}
	if l.Processes > 0 {
		set("nproc", unix.RLIMIT_NPROC, uint64(l.Processes), uint64(l.Processes))
	}
}

// rlimitHit says which per-process limit ended the hook, from how the
// leader ended: SIGXCPU (or a shell's exit 152 for a child killed by it),
// or SIGKILL after using the CPU time limit, ends a CPU-limited hook; without
// a cgroup, a hook that fails after its peak RSS reached 90 % of the memory
// limit is taken as stopped by RLIMIT_DATA (best effort: RSS and the data
// segment differ). It returns the limit's name and a message, or "".
func rlimitHit(l Limits, cgrouped bool, r *Result, ps processUsage) (string, string) {
	if s := l.cpuSeconds(); s > 0 {
		how := ""
		switch {
		case r.Signal == syscall.SIGXCPU:
			how = "killed by SIGXCPU"
		case r.Signal == 0 && r.ExitCode == 128+int(syscall.SIGXCPU):
			how = fmt.Sprintf("exit %d: a process was killed by SIGXCPU", r.ExitCode)
		case r.Signal == syscall.SIGKILL && !r.TimedOut && !r.Canceled && ps.cpu >= time.Duration(s)*time.Second:
			how = fmt.Sprintf("killed by SIGKILL after %s of CPU", ps.cpu.Round(10*time.Millisecond))
		}
		if how != "" {
			return LimitCPUTime, fmt.Sprintf("CPU time limit %d s exceeded (%s)", s, how)
		}
	}
	failed := r.Signal != 0 || r.ExitCode != 0
	if !cgrouped && l.Memory > 0 && failed && ps.maxRSS >= l.Memory/10*9 {
		return LimitMemory, fmt.Sprintf("memory limit %s reached (RLIMIT_DATA; peak RSS %s)", bytesize.Format(l.Memory), bytesize.Format(ps.maxRSS))
	}
	return "", ""
}

// processUsage is what the leader and the children it waited for used.
type processUsage struct {
	cpu    time.Duration // user + system
	maxRSS int64         // bytes, the largest of them
}
