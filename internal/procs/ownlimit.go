package procs

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// HookMemory is the memory limit a hook process runs under, as the runner
// set it (Limits.Memory), seen from inside the hook: the limit of its own
// hook cgroup (all its processes together), else its RLIMIT_DATA (each
// process's data segment). A hook that starts a program which can die of
// the limit without ending itself (a browser's renderer) uses it to
// notice that and give up.
type HookMemory struct {
	Limit  int64  // bytes; 0: no memory limit
	Cgroup string // the hook's memory cgroup directory; "" when the limit is RLIMIT_DATA
	v2     bool
}

// PerProcess reports whether the limit binds each process on its own
// (RLIMIT_DATA) rather than the hook's processes together (a cgroup).
func (m HookMemory) PerProcess() bool { return m.Limit > 0 && m.Cgroup == "" }

// OwnMemoryLimit returns the memory limit the calling process runs under
// as a hook: its hook cgroup's (a cgroup this package created for the
// attempt, named archiveflow-hook.*), else its soft RLIMIT_DATA when one is
// set; a zero Limit when neither is.
func OwnMemoryLimit() HookMemory {
	if lay, err := cgroupLayoutOnce(); err == nil {
		if m, ok := ownCgroupMemory(lay); ok {
			return m
		}
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_DATA, &rl); err == nil && rl.Cur != unix.RLIM_INFINITY && rl.Cur <= math.MaxInt64 {
		return HookMemory{Limit: int64(rl.Cur)}
	}
	return HookMemory{}
}

// unlimitedV1 is at or below the value a cgroup v1 memory.limit_in_bytes
// reads when no limit is set (the largest page count times the page size).
const unlimitedV1 = 1 << 62

// ownCgroupMemory reads the limit of the hook cgroup this process is in.
func ownCgroupMemory(lay cgroupLayout) (HookMemory, bool) {
	if d := lay.v1[ctrlMemory]; strings.HasPrefix(filepath.Base(d), cgroupPrefix) {
		if n := cgroupValue(d, "memory.limit_in_bytes"); n > 0 && n < unlimitedV1 {
			return HookMemory{Limit: n, Cgroup: d}, true
		}
	}
	if d := lay.v2; strings.HasPrefix(filepath.Base(d), cgroupPrefix) {
		b, err := os.ReadFile(filepath.Join(d, "memory.max"))
		if err != nil {
			return HookMemory{}, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && n > 0 {
			return HookMemory{Limit: n, Cgroup: d, v2: true}, true
		}
	}
	return HookMemory{}, false
}

// OOMKills returns how many processes the OOM killer has ended in the
// hook's cgroup; 0 without one.
func (m HookMemory) OOMKills() int64 {
	switch {
	case m.Cgroup == "":
		return 0
	case m.v2:
		return cgroupCounter(m.Cgroup, "memory.events", "oom_kill")
	default:
		return cgroupCounter(m.Cgroup, "memory.oom_control", "oom_kill")
	}
}

// Peak returns the largest memory use of the hook's cgroup so far (bytes),
// 0 without a cgroup or where the kernel does not report it.
func (m HookMemory) Peak() int64 {
	switch {
	case m.Cgroup == "":
		return 0
	case m.v2:
		return cgroupValue(m.Cgroup, "memory.peak")
	default:
		return cgroupValue(m.Cgroup, "memory.max_usage_in_bytes")
	}
}
