package procs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/archiveflow/archiveflow/internal/bytesize"
)

// cgroupPrefix starts the name of every per-hook cgroup:
// archiveflow-hook.<runner pid>-<runner start time>.<attempt ID>.
const cgroupPrefix = "archiveflow-hook."

// Controllers a hook cgroup needs.
const (
	ctrlMemory = "memory"
	ctrlPids   = "pids"
)

// hookCgroup is the cgroup one hook attempt runs in: one cgroup v2
// directory, or one directory per cgroup v1 controller (memory, pids).
type hookCgroup struct {
	v2     string            // the v2 directory, or ""
	fd     int               // v2: the directory, open for CLONE_INTO_CGROUP
	v1     map[string]string // v1: controller → directory
	limits Limits
}

// needed returns the controllers l needs.
func (l Limits) needed() []string {
	var c []string
	if l.Memory > 0 {
		c = append(c, ctrlMemory)
	}
	if l.Processes > 0 {
		c = append(c, ctrlPids)
	}
	return c
}

// newHookCgroup creates the attempt's cgroup and writes its limits. It
// returns nil without error when no grouped limit is set or l.Cgroup is
// CgroupNone. When l.Cgroup names a directory, failing to use it is an
// error; otherwise the error only says why the hook gets rlimits instead.
func newHookCgroup(l Limits, attemptID string, log *zap.Logger) (*hookCgroup, error) {
	need := l.needed()
	if len(need) == 0 || l.Cgroup == CgroupNone {
		return nil, nil
	}
	name := cgroupName(selfRef(), attemptID)
	if l.Cgroup != "" {
		sweepCgroupsOnce(l.Cgroup, log)
		if err := enableControllers(l.Cgroup, need); err != nil {
			return nil, err
		}
		return createV2(filepath.Join(l.Cgroup, name), l)
	}
	lay, err := cgroupLayoutOnce()
	if err != nil {
		return nil, err
	}
	if dirs, ok := lay.v1Dirs(need); ok {
		for _, d := range dirs {
			sweepCgroupsOnce(d, log)
		}
		return createV1(dirs, name, l)
	}
	if lay.v2 != "" && hasControllers(lay.v2, need) {
		sweepCgroupsOnce(lay.v2, log)
		return createV2(filepath.Join(lay.v2, name), l)
	}
	return nil, fmt.Errorf("no writable cgroup with the %s controller(s): neither cgroup v1 hierarchies nor the worker's cgroup v2 directory %q with them enabled for children", strings.Join(need, " and "), lay.v2)
}

func cgroupName(owner procRef, attemptID string) string {
	return fmt.Sprintf("%s%d-%d.%s", cgroupPrefix, owner.PID, owner.StartTime, attemptID)
}

// parseCgroupName returns the owner and attempt ID of a per-hook cgroup.
func parseCgroupName(name string) (procRef, string, bool) {
	rest, ok := strings.CutPrefix(name, cgroupPrefix)
	if !ok {
		return procRef{}, "", false
	}
	owner, id, ok := strings.Cut(rest, ".")
	if !ok || !ValidAttemptID(id) {
		return procRef{}, "", false
	}
	p, t, ok := strings.Cut(owner, "-")
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(t, 10, 64)
	if !ok || err1 != nil || err2 != nil || pid <= 0 {
		return procRef{}, "", false
	}
	return procRef{PID: pid, StartTime: start}, id, true
}

func createV2(dir string, l Limits) (*hookCgroup, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	cg := &hookCgroup{v2: dir, fd: -1, limits: l}
	err := func() error {
		if l.Memory > 0 {
			if err := writeCgroupFile(dir, "memory.max", strconv.FormatInt(l.Memory, 10)); err != nil {
				return err
			}
			// No swapping around the limit, and an OOM kill ends the whole
			// hook rather than one of its processes. Older kernels lack
			// these files.
			_ = writeCgroupFile(dir, "memory.swap.max", "0")
			_ = writeCgroupFile(dir, "memory.oom.group", "1")
		}
		if l.Processes > 0 {
			if err := writeCgroupFile(dir, "pids.max", strconv.FormatInt(l.Processes, 10)); err != nil {
				return err
			}
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open cgroup %s: %w", dir, err)
		}
		cg.fd = fd
		return nil
	}()
	if err != nil {
		cg.remove(nil)
		return nil, err
	}
	return cg, nil
}

func createV1(workerDirs map[string]string, name string, l Limits) (*hookCgroup, error) {
	cg := &hookCgroup{fd: -1, v1: map[string]string{}, limits: l}
	err := func() error {
		for ctrl, parent := range workerDirs {
			dir := filepath.Join(parent, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				return fmt.Errorf("create cgroup: %w", err)
			}
			cg.v1[ctrl] = dir
		}
		if dir := cg.v1[ctrlMemory]; dir != "" {
			mem := strconv.FormatInt(l.Memory, 10)
			if err := writeCgroupFile(dir, "memory.limit_in_bytes", mem); err != nil {
				return err
			}
			_ = writeCgroupFile(dir, "memory.memsw.limit_in_bytes", mem) // no swapping around it, where swap is accounted
		}
		if dir := cg.v1[ctrlPids]; dir != "" {
			if err := writeCgroupFile(dir, "pids.max", strconv.FormatInt(l.Processes, 10)); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		cg.remove(nil)
		return nil, err
	}
	return cg, nil
}

func writeCgroupFile(dir, file, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("set cgroup %s: %w", file, err)
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("set cgroup %s to %s: %w", filepath.Join(dir, file), value, err)
	}
	return nil
}

// place prepares cmd to start inside a cgroup v2 directly: clone3 with
// CLONE_INTO_CGROUP. A v1 cgroup has no such call: launch moves the hook
// in (enter) while it is stopped before its first instruction.
func (c *hookCgroup) place(cmd *exec.Cmd) {
	if c != nil && c.v2 != "" {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = c.fd
	}
}

// enter moves process pid into the v1 cgroups.
func (c *hookCgroup) enter(pid int) error {
	for ctrl, dir := range c.v1 {
		if err := writeCgroupFile(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("move hook into its %s cgroup: %w", ctrl, err)
		}
	}
	return nil
}

// dir is the directory whose member list holds every process of the hook.
func (c *hookCgroup) dir() string {
	if c.v2 != "" {
		return c.v2
	}
	if d := c.v1[ctrlPids]; d != "" {
		return d
	}
	return c.v1[ctrlMemory]
}

// members lists the pids in the cgroup; nil for a nil cgroup.
func (c *hookCgroup) members() []int {
	if c == nil {
		return nil
	}
	return cgroupMembers(c.dir())
}

func cgroupMembers(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hit says which cgroup limit the hook ran into: an OOM kill (memory) or a
// refused fork (processes). It returns the limit's name and a message, or "".
func (c *hookCgroup) hit() (string, string) {
	if c == nil {
		return "", ""
	}
	if c.limits.Memory > 0 {
		// An OOM kill counts only when the hook reached its own limit: a
		// kill for lack of memory on the host or in the worker's cgroup is
		// counted here too.
		// The kernel counts the limit in whole pages.
		full := c.limits.Memory &^ int64(os.Getpagesize()-1)
		var kills int64
		var reached bool
		if c.v2 != "" {
			kills = cgroupCounter(c.v2, "memory.events", "oom_kill")
			reached = cgroupCounter(c.v2, "memory.events", "max") > 0 || cgroupValue(c.v2, "memory.peak") >= full
		} else {
			// failcnt stays 0 on some kernels when the memsw limit is
			// set as well; the peak usage tells.
			dir := c.v1[ctrlMemory]
			kills = cgroupCounter(dir, "memory.oom_control", "oom_kill")
			reached = cgroupValue(dir, "memory.failcnt") > 0 || cgroupValue(dir, "memory.max_usage_in_bytes") >= full
		}
		if kills > 0 && reached {
			return LimitMemory, fmt.Sprintf("memory limit %s exceeded (%s killed by the OOM killer)", bytesize.Format(c.limits.Memory), plural(kills, "process", "processes"))
		}
	}
	if c.limits.Processes > 0 {
		dir := c.v2
		if dir == "" {
			dir = c.v1[ctrlPids]
		}
		if refused := cgroupCounter(dir, "pids.events", "max"); refused > 0 {
			return LimitProcesses, fmt.Sprintf("process limit %d reached (%s refused)", c.limits.Processes, plural(refused, "fork", "forks"))
		}
	}
	return "", ""
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// cgroupCounter reads "key N" from a flat-keyed cgroup file; 0 if absent.
func cgroupCounter(dir, file, key string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// cgroupValue reads a cgroup file holding one number; 0 if absent.
func cgroupValue(dir, file string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// Removal of an emptied cgroup is retried while the kernel still counts a
// process that is exiting.
const (
	rmdirWait = 200 * time.Millisecond
	rmdirPoll = 2 * time.Millisecond
)

// remove closes the cgroup and removes its directories once they are empty
// (the caller has ended every process in it); what cannot be removed is
// logged and left to the sweep. log may be nil.
func (c *hookCgroup) remove(log *zap.Logger) {
	if c == nil {
		return
	}
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	dirs := []string{c.v2}
	for _, d := range c.v1 {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if err := removeCgroupDir(d); err != nil && log != nil {
			log.Warn("remove hook cgroup (the next sweep retries)", zap.String("cgroup", d), zap.Error(err))
		}
	}
}

func removeCgroupDir(dir string) error {
	deadline := time.Now().Add(rmdirWait)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
		}
		time.Sleep(rmdirPoll)
	}
}

// enableControllers makes sure parent's children get the controllers,
// enabling them in cgroup.subtree_control when they are not yet.
func enableControllers(parent string, need []string) error {
	if hasControllers(parent, need) {
		return nil
	}
	var b strings.Builder
	for _, c := range need {
		b.WriteString(" +" + c)
	}
	if err := writeCgroupFile(parent, "cgroup.subtree_control", strings.TrimSpace(b.String())); err != nil {
		return fmt.Errorf("cgroup %s: enable %s for hook cgroups: %w", parent, strings.Join(need, ", "), err)
	}
	return nil
}

// hasControllers reports whether parent's cgroup.subtree_control enables
// every controller in need.
func hasControllers(parent string, need []string) bool {
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		return false
	}
	have := strings.Fields(string(b))
	for _, c := range need {
		found := false
		for _, h := range have {
			found = found || h == c
		}
		if !found {
			return false
		}
	}
	return true
}

// cgroupLayout is where this process sits in the mounted cgroup
// hierarchies.
type cgroupLayout struct {
	v2 string            // the worker's cgroup v2 directory, or ""
	v1 map[string]string // v1 controller → the worker's directory
}

// v1Dirs returns the worker's v1 directories of the controllers in need,
// when every one is mounted.
func (l cgroupLayout) v1Dirs(need []string) (map[string]string, bool) {
	dirs := map[string]string{}
	for _, c := range need {
		d, ok := l.v1[c]
		if !ok {
			return nil, false
		}
		dirs[c] = d
	}
	return dirs, true
}

// dirs lists every directory per-hook cgroups may be created in.
func (l cgroupLayout) dirs() []string {
	var out []string
	for _, c := range []string{ctrlMemory, ctrlPids} {
		if d, ok := l.v1[c]; ok {
			out = append(out, d)
		}
	}
	if l.v2 != "" {
		out = append(out, l.v2)
	}
	return out
}

var cgroupLayoutOnce = sync.OnceValues(func() (cgroupLayout, error) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cgroupLayout{}, fmt.Errorf("read cgroup mounts: %w", err)
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cgroupLayout{}, fmt.Errorf("read own cgroups: %w", err)
	}
	return parseCgroupLayout(mounts, own), nil
})

// parseCgroupLayout combines /proc/self/mountinfo (where each hierarchy is
// mounted, and which part of it) with /proc/self/cgroup (this process's
// path in each hierarchy).
func parseCgroupLayout(mountinfo, cgroups []byte) cgroupLayout {
	type mnt struct{ root, point string }
	var v2 *mnt
	v1 := map[string]mnt{}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := mnt{root: unescapeMount(f[3]), point: unescapeMount(f[4])}
		switch g[0] {
		case "cgroup2":
			if v2 == nil {
				v2 = &m
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o == ctrlMemory || o == ctrlPids {
					if _, dup := v1[o]; !dup {
						v1[o] = m
					}
				}
			}
		}
	}
	dir := func(m mnt, path string) (string, bool) {
		rel, ok := strings.CutPrefix(path, m.root)
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && m.root != "/") {
			return "", false
		}
		return filepath.Join(m.point, rel), true
	}
	lay := cgroupLayout{v1: map[string]string{}}
	for _, line := range strings.Split(string(cgroups), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			if v2 != nil {
				if d, ok := dir(*v2, parts[2]); ok {
					lay.v2 = d
				}
			}
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if m, ok := v1[c]; ok {
				if d, ok := dir(m, parts[2]); ok {
					lay.v1[c] = d
				}
			}
		}
	}
	return lay
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// sweptCgroupDirs holds the parent directories this process created hook
// cgroups in; each was swept of empty stale cgroups before its first one.
var sweptCgroupDirs sync.Map

// sweepCgroupsOnce removes the empty cgroups of gone runners under parent
// the first time this process uses it. It ends no process (that would
// delay a hook by the grace): the pid-file sweep has ended them, and
// SweepGrace ends what is left.
func sweepCgroupsOnce(parent string, log *zap.Logger) {
	if _, done := sweptCgroupDirs.LoadOrStore(parent, true); !done {
		sweepCgroupDir(parent, 0, false, log)
	}
}

// sweepCgroups sweeps every place this process creates hook cgroups in:
// the worker's own cgroups and the directories named in Limits.Cgroup that
// it used. It returns the cgroups removed.
func sweepCgroups(grace time.Duration, log *zap.Logger) []string {
	var parents []string
	if lay, err := cgroupLayoutOnce(); err == nil {
		parents = lay.dirs()
	}
	sweptCgroupDirs.Range(func(k, _ any) bool {
		parents = append(parents, k.(string))
		return true
	})
	var removed []string
	seen := map[string]bool{}
	for _, p := range parents {
		if !seen[p] {
			seen[p] = true
			removed = append(removed, sweepCgroupDir(p, grace, true, log)...)
		}
	}
	return removed
}

// sweepCgroupDir removes the hook cgroups under parent whose runner is gone
// (or is this process and no longer runs the attempt), after terminating
// what still runs in them when end is set (SIGTERM, grace, SIGKILL).
// Cgroups of live runners are left alone.
func sweepCgroupDir(parent string, grace time.Duration, end bool, log *zap.Logger) []string {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		owner, id, ok := parseCgroupName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		if owner == selfRef() {
			if _, running := active.Load(id); running {
				continue
			}
		} else if owner.alive() {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if !end {
			if unix.Rmdir(dir) == nil {
				removed = append(removed, dir)
			}
			continue
		}
		rp := &reaper{markerOnly: true, marker: []byte(MarkerEnv + "=" + id), grace: grace, log: log,
			members: func() []int { return cgroupMembers(dir) }}
		if n := rp.cleanup(); n > 0 {
			log.Info("swept processes of a dead hook by its cgroup", zap.String("cgroup", dir), zap.Int("count", n))
		}
		if err := removeCgroupDir(dir); err != nil {
			log.Warn("remove stale hook cgroup", zap.Error(err))
			continue
		}
		removed = append(removed, dir)
	}
	return removed
}

// usage reads what the leader (and the children it waited for) used.
func usage(ps *os.ProcessState) processUsage {
	if ps == nil {
		return processUsage{}
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return processUsage{}
	}
	return processUsage{cpu: ps.UserTime() + ps.SystemTime(), maxRSS: ru.Maxrss * 1024}
}
