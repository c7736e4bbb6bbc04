package procs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/archiveflow/archiveflow/internal/model"
)

// Fixtures. Each is bounded, so that a test on a host where a limit does
// not apply cannot hurt the host: the hog holds at most 512 MiB, the bomb
// starts at most 300 sleeping processes, the busy loop ends at the
// hook's timeout.
const (
	// tail keeps every byte of a line in memory, and /dev/zero has no
	// newline.
	hogBody  = `head -c 536870912 /dev/zero | tail > /dev/null`
	bombBody = `i=0
while [ $i -lt 300 ]; do
	sleep 60 &
	i=$((i+1))
done`
	busyBody = `while :; do :; done`
)

const testMemoryLimit = 64 << 20

// requireCgroups skips the test unless this host lets the runner create a
// hook cgroup with the controllers l needs.
func requireCgroups(t *testing.T, l Limits) {
	t.Helper()
	id, err := NewAttemptID()
	require.NoError(t, err)
	cg, err := newHookCgroup(l, id, zaptest.NewLogger(t))
	if err != nil || cg == nil {
		t.Skipf("no writable cgroup for hook limits on this host (%v): the rlimit fallback is covered by TestRlimitsWithoutCgroup and TestMemoryHogWithoutCgroup", err)
	}
	cg.remove(nil)
}

// A hook that allocates without bound and one that forks without bound,
// with limits set, both end failed naming the limit; a hook running at the
// same time and this test process (the worker) carry on normally.
func TestLimitsEndRunawayHooksOnly(t *testing.T) {
	limits := Limits{Memory: testMemoryLimit, Processes: 20}
	requireCgroups(t, limits)

	hog := specFor(t, writeHook(t, "hog.sh", hogBody))
	hog.Limits = limits
	bomb := specFor(t, writeHook(t, "bomb.sh", bombBody))
	bomb.Limits = limits
	bomb.Grace = 300 * time.Millisecond
	normal := specFor(t, writeHook(t, "normal.sh", `sleep 1
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"fine"}'`))
	normal.Limits = limits

	var wg sync.WaitGroup
	results := make([]Result, 3)
	for i, s := range []Spec{hog, bomb, normal} {
		wg.Go(func() { results[i] = runSpec(t, s) })
	}
	wg.Wait()
	hogRes, bombRes, normalRes := results[0], results[1], results[2]

	assert.Equal(t, model.StatusFailed, hogRes.Status, hogRes.Reason)
	assert.False(t, hogRes.Transient, "a limit is final: the same hook would run into it again")
	assert.Equal(t, LimitMemory, hogRes.Limit)
	assert.Contains(t, hogRes.Reason, "memory limit 64 MiB exceeded")
	assert.Contains(t, hogRes.Reason, "killed by the OOM killer")
	ar := hogRes.ArchiveResult()
	assert.Equal(t, LimitMemory, ar.Limit)
	assert.Equal(t, model.StatusFailed, ar.Status)
	assert.Contains(t, ar.Error, "memory limit 64 MiB exceeded")

	assert.Equal(t, model.StatusFailed, bombRes.Status, bombRes.Reason)
	assert.Equal(t, LimitProcesses, bombRes.Limit)
	assert.Contains(t, bombRes.Reason, "process limit 20 reached")
	assert.Contains(t, bombRes.ArchiveResult().Error, "process limit 20 reached")
	assert.Positive(t, bombRes.Leftovers, "the bomb's sleeping children were found and ended")

	assert.Equal(t, model.StatusSucceeded, normalRes.Status, normalRes.Reason)
	assert.Empty(t, normalRes.Limit)
	assert.Equal(t, "fine", normalRes.Last.OutputStr)

	for _, s := range []Spec{hog, bomb, normal} {
		assert.Empty(t, hookCgroupsOf(t, s), "the hook's cgroup is removed when it ends")
	}
}

// hookCgroupsOf lists the cgroups left for the attempts run in s.Dir.
func hookCgroupsOf(t *testing.T, s Spec) []string {
	t.Helper()
	lay, err := cgroupLayoutOnce()
	require.NoError(t, err)
	var left []string
	for _, parent := range lay.dirs() {
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if _, id, ok := parseCgroupName(e.Name()); ok {
				if _, err := os.Stat(runnerFiles(s.Dir, s.Stem, id).Stdout); err == nil {
					left = append(left, filepath.Join(parent, e.Name()))
				}
			}
		}
	}
	return left
}

// The CPU time limit ends a busy hook, whether the leader itself spins
// (SIGXCPU) or a child does (a shell reports its death as exit 152).
func TestCPUTimeLimit(t *testing.T) {
	for name, body := range map[string]string{
		"leader": busyBody,
		"child":  "sh -c '" + busyBody + "'",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := specFor(t, writeHook(t, "busy.sh", body))
			s.Limits = Limits{CPUTime: time.Second}
			s.Timeout = time.Minute // ends the fixture if the limit does not
			res := runSpec(t, s)
			require.Equal(t, model.StatusFailed, res.Status, res.Reason)
			assert.Equal(t, LimitCPUTime, res.Limit)
			assert.Contains(t, res.Reason, "CPU time limit 1 s exceeded")
			assert.False(t, res.TimedOut)
			if name == "leader" {
				assert.Equal(t, syscall.SIGXCPU, res.Signal)
			} else {
				assert.Equal(t, 128+int(syscall.SIGXCPU), res.ExitCode)
			}
		})
	}
}

// Without a cgroup every limit is a per-process rlimit of the hook, which
// its children inherit, in force from the hook's first instruction.
func TestRlimitsWithoutCgroup(t *testing.T) {
	t.Parallel()
	// The hook's first act is a child reporting the limits it got; the
	// rest waits until the limits have reached the hook, in case ptrace
	// is refused and they are set after the start.
	s := specFor(t, writeHook(t, "limits.sh", `cat /proc/self/limits > first.limits
until grep -q '^Max open files *64 ' /proc/$$/limits; do sleep 0.01; done
cat /proc/$$/limits
sh -c 'cat /proc/$$/limits' > child.limits`))
	s.Limits = Limits{Memory: testMemoryLimit, CPUTime: 1500 * time.Millisecond, OpenFiles: 64, Processes: 5000, Cgroup: CgroupNone}
	s.Timeout = time.Minute
	res := runSpec(t, s)
	require.Equal(t, model.StatusNoResults, res.Status, res.Reason)
	assert.Empty(t, res.Limit)

	want := map[string][2]string{
		"Max cpu time":   {"2", "3"}, // rounded up to whole seconds; SIGKILL a second later
		"Max data size":  {strconv.Itoa(testMemoryLimit), strconv.Itoa(testMemoryLimit)},
		"Max open files": {"64", "64"},
		"Max processes":  {"5000", "5000"},
	}
	files := []string{res.Files.Stdout, filepath.Join(s.Dir, "child.limits")}
	if ptraceAllowed(t) {
		files = append(files, filepath.Join(s.Dir, "first.limits"))
	}
	for _, file := range files {
		got := readLimits(t, file)
		for name, w := range want {
			assert.Equal(t, w, got[name], "%s in %s", name, file)
		}
	}
}

// ptraceAllowed reports whether this process may start a traced child, so
// that launch sets limits before the hook runs.
func ptraceAllowed(t *testing.T) bool {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Logf("ptrace refused here (%v): limits are set right after the start", err)
		return false
	}
	_ = unix.Kill(cmd.Process.Pid, unix.SIGKILL)
	_ = cmd.Wait()
	return true
}

// readLimits parses a copy of /proc/PID/limits: name → soft, hard.
func readLimits(t *testing.T, path string) map[string][2]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := map[string][2]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 26 || !strings.HasPrefix(line, "Max ") {
			continue
		}
		v := strings.Fields(line[26:])
		if len(v) >= 2 {
			out[strings.TrimSpace(line[:26])] = [2]string{v[0], v[1]}
		}
	}
	return out
}

// Without a cgroup the memory limit is RLIMIT_DATA: the hog's allocation
// fails, and the runner names the limit from the hook's peak RSS.
func TestMemoryHogWithoutCgroup(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "hog.sh", hogBody))
	s.Limits = Limits{Memory: testMemoryLimit, Cgroup: CgroupNone}
	res := runSpec(t, s)
	require.Equal(t, model.StatusFailed, res.Status, res.Reason)
	assert.Equal(t, LimitMemory, res.Limit)
	assert.Contains(t, res.Reason, "memory limit 64 MiB reached (RLIMIT_DATA; peak RSS")
	assert.Contains(t, strings.Join(res.StderrTail, "\n"), "memory exhausted", "tail reports the failed allocation")
}

// A record still decides the status when a limit was hit; the limit is
// reported with it.
func TestRecordWinsOverLimit(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "recovers.sh", `sh -c '`+busyBody+`'
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"recovered"}'`))
	s.Limits = Limits{CPUTime: time.Second}
	s.Timeout = time.Minute
	res := runSpec(t, s)
	assert.Equal(t, model.StatusSucceeded, res.Status, res.Reason)
	assert.Empty(t, res.Limit, "the leader exited 0: no limit ended the hook")
}

func TestLimitsValidation(t *testing.T) {
	for _, l := range []Limits{
		{Memory: -1}, {CPUTime: -time.Second}, {OpenFiles: -1}, {Processes: -1}, {Cgroup: "relative/dir"},
	} {
		s := specFor(t, "/bin/true")
		s.Limits = l
		_, err := Run(t.Context(), s)
		require.ErrorIs(t, err, ErrInvalidSpec, "%+v", l)
		assert.True(t, IsPermanent(err))
	}
}

// A named cgroup directory that cannot be used fails the start instead of
// running the hook with weaker limits.
func TestNamedCgroupMustWork(t *testing.T) {
	s := specFor(t, writeHook(t, "x.sh", `exit 0`))
	s.Limits = Limits{Memory: testMemoryLimit, Cgroup: t.TempDir()} // not a cgroup
	_, err := Run(t.Context(), s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "limits")
	assert.False(t, IsPermanent(err))
}

// cgroup v2: the hook is created inside its cgroup (clone3 with
// CLONE_INTO_CGROUP), its processes are listed there, and the directory is
// removed afterwards. The unified hierarchy of a hybrid host has no
// controllers, which this placement does not need.
func TestCgroupV2Placement(t *testing.T) {
	lay, err := cgroupLayoutOnce()
	require.NoError(t, err)
	if lay.v2 == "" {
		t.Skip("no cgroup v2 hierarchy mounted")
	}
	parent := filepath.Join(lay.v2, "archiveflow-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Skipf("cgroup v2 not writable here: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(parent) })
	id, err := NewAttemptID()
	require.NoError(t, err)
	dir := filepath.Join(parent, cgroupName(selfRef(), id))
	cg, err := createV2(dir, Limits{})
	require.NoError(t, err)

	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd, err = launch(t.Context(), cmd, cg, Limits{}, zaptest.NewLogger(t))
	require.NoError(t, err)
	assert.Equal(t, []int{cmd.Process.Pid}, cg.members())
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cgroup")
	require.NoError(t, err)
	assert.Contains(t, string(b), "0::"+strings.TrimPrefix(dir, lay.v2))

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	cg.remove(zaptest.NewLogger(t))
	assert.NoDirExists(t, dir)
}

// The sweep removes hook cgroups whose runner is gone, ending what still
// runs in them, and leaves those of live runners alone.
func TestSweepRemovesCgroupsOfDeadRunners(t *testing.T) {
	limits := Limits{Processes: 10}
	requireCgroups(t, limits)
	lay, err := cgroupLayoutOnce()
	require.NoError(t, err)
	parents, ok := lay.v1Dirs(limits.needed())
	var parent string
	if ok {
		parent = parents[ctrlPids]
	} else {
		parent = lay.v2
	}

	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	deadOwner := procRef{PID: dead.Process.Pid, StartTime: 1}
	live, _ := leftover(t) // a live process stands for another runner
	st, err := readStat(live.Process.Pid)
	require.NoError(t, err)
	liveOwner := procRef{PID: live.Process.Pid, StartTime: st.StartTime}

	mk := func(owner procRef) string {
		id, err := NewAttemptID()
		require.NoError(t, err)
		dir := filepath.Join(parent, cgroupName(owner, id))
		require.NoError(t, os.Mkdir(dir, 0o755))
		t.Cleanup(func() { _ = os.Remove(dir) })
		return dir
	}
	stale, kept := mk(deadOwner), mk(liveOwner)
	orphan := exec.Command("sleep", "60")
	require.NoError(t, orphan.Start())
	t.Cleanup(func() { _ = orphan.Process.Kill(); _ = orphan.Wait() })
	require.NoError(t, writeCgroupFile(stale, "cgroup.procs", strconv.Itoa(orphan.Process.Pid)))

	rep, err := SweepGrace(t.TempDir(), 200*time.Millisecond, zaptest.NewLogger(t))
	require.NoError(t, err)
	assert.Contains(t, rep.Cgroups, stale)
	assert.NoDirExists(t, stale)
	assert.DirExists(t, kept)
	_ = orphan.Wait()
	assert.True(t, gone(orphan.Process.Pid), "what ran in the stale cgroup was ended")
}

func TestParseCgroupLayout(t *testing.T) {
	hybrid := `25 30 0:23 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
30 25 0:28 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
31 25 0:29 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
32 25 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
`
	own := "9:pids:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/\n"
	lay := parseCgroupLayout([]byte(hybrid), []byte(own))
	assert.Equal(t, "/sys/fs/cgroup/unified", lay.v2)
	assert.Equal(t, map[string]string{"memory": "/sys/fs/cgroup/memory/process_api/abc", "pids": "/sys/fs/cgroup/pids"}, lay.v1)

	// A container: the hierarchy is mounted from the container's own
	// directory, and a mount point holds an escaped space.
	v2only := `40 35 0:33 /docker/c1 /sys/fs/cgroup\040x rw - cgroup2 cgroup2 rw
`
	lay = parseCgroupLayout([]byte(v2only), []byte("0::/docker/c1/worker\n"))
	assert.Equal(t, "/sys/fs/cgroup x/worker", lay.v2)
	assert.Empty(t, lay.v1)

	lay = parseCgroupLayout([]byte(v2only), []byte("0::/docker/c10\n"))
	assert.Empty(t, lay.v2, "a path outside the mounted part is not reachable")
}

// The cgroup files say which limit a hook ran into. An OOM kill while the
// hook stayed below its own limit (the host or the worker's cgroup ran out)
// is not its limit.
func TestCgroupHit(t *testing.T) {
	files := func(kv map[string]string) string {
		dir := t.TempDir()
		for name, body := range kv {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
		}
		return dir
	}
	const mem = 64 << 20
	tests := []struct {
		name      string
		cg        *hookCgroup
		wantLimit string
		wantMsg   string
	}{
		{"v1 OOM at the limit", &hookCgroup{v1: map[string]string{ctrlMemory: files(map[string]string{
			"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", "memory.failcnt": "0\n", "memory.max_usage_in_bytes": "67108864\n"})}, limits: Limits{Memory: mem}},
			LimitMemory, "memory limit 64 MiB exceeded (1 process killed by the OOM killer)"},
		{"v1 OOM below the limit", &hookCgroup{v1: map[string]string{ctrlMemory: files(map[string]string{
			"memory.oom_control": "oom_kill 2\n", "memory.failcnt": "0\n", "memory.max_usage_in_bytes": "1048576\n"})}, limits: Limits{Memory: mem}},
			"", ""},
		{"v1 refused forks", &hookCgroup{v1: map[string]string{ctrlPids: files(map[string]string{"pids.events": "max 3\n"})}, limits: Limits{Processes: 20}},
			LimitProcesses, "process limit 20 reached (3 forks refused)"},
		{"v2 OOM group kill", &hookCgroup{v2: files(map[string]string{
			"memory.events": "low 0\nhigh 0\nmax 12\noom 1\noom_kill 4\noom_group_kill 1\n", "pids.events": "max 0\n"}), limits: Limits{Memory: mem, Processes: 20}},
			LimitMemory, "memory limit 64 MiB exceeded (4 processes killed by the OOM killer)"},
		{"v2 nothing", &hookCgroup{v2: files(map[string]string{"memory.events": "max 0\noom_kill 0\n", "pids.events": "max 0\n"}), limits: Limits{Memory: mem, Processes: 20}},
			"", ""},
		{"no cgroup", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit, msg := tt.cg.hit()
			assert.Equal(t, tt.wantLimit, limit)
			assert.Equal(t, tt.wantMsg, msg)
		})
	}
}

// A limit the hook ran into makes a transient outcome of its own a final
// failure; it leaves a final status, and a cancellation, as they are.
func TestLimitInStatusMapping(t *testing.T) {
	const msg = "process limit 20 reached (3 forks refused)"
	tests := []struct {
		name       string
		r          Result
		background bool
		status     model.Status // "" = transient
	}{
		{"exit 2", Result{ExitCode: 2}, false, model.StatusFailed},
		{"killed", Result{ExitCode: 137, Signal: syscall.SIGKILL}, false, model.StatusFailed},
		{"timed out", Result{ExitCode: 143, TimedOut: true}, false, model.StatusFailed},
		{"canceled: retried", Result{ExitCode: 143, Canceled: true}, false, ""},
		{"exit 0: noresults", Result{}, false, model.StatusNoResults},
		{"background sealed", Result{ExitCode: 143, Canceled: true}, true, model.StatusSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			r.Limit, r.LimitError = LimitProcesses, msg
			decide(&r, tt.background, time.Minute)
			assert.Equal(t, tt.status, r.Status, r.Reason)
			assert.Equal(t, tt.status == "", r.Transient)
			ar := r.ArchiveResult()
			assert.Equal(t, LimitProcesses, ar.Limit, "the limit is reported whatever the status")
			if tt.status == model.StatusFailed {
				assert.Equal(t, r.Reason, ar.Error, "a final failure without a record carries its reason")
				assert.True(t, strings.HasPrefix(ar.Error, msg+"; "), "the limit comes first: %s", ar.Error)
			}
		})
	}
}
