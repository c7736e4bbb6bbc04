package procs

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

const sweepGrace = 300 * time.Millisecond

// leftover starts `sleep 300` in its own process group, as a crashed runner
// would have left a hook, with extra environment entries.
func leftover(t *testing.T, env ...string) (*exec.Cmd, pidFile) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	st, err := readStat(cmd.Process.Pid)
	require.NoError(t, err)
	var cmdline []string
	require.Eventually(t, func() bool {
		cmdline, err = readCmdline(cmd.Process.Pid)
		return err == nil && len(cmdline) == 2 && cmdline[0] == "sleep"
	}, testDeadline, 5*time.Millisecond)
	return cmd, pidFile{Proc: procRef{PID: cmd.Process.Pid, StartTime: st.StartTime}, Cmdline: cmdline}
}

func putPIDFile(t *testing.T, dir, id string, pf pidFile) string {
	t.Helper()
	path := filepath.Join(dir, "on_Snapshot__10_x."+id+".pid")
	b, err := pf.encode()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

func TestSweepPidReuseSafety(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*pidFile)
		killed bool
	}{
		{"matching start time and cmdline: killed", func(*pidFile) {}, true},
		{"different start time: pid reused, spared", func(p *pidFile) { p.Proc.StartTime++ }, false},
		{"different cmdline: pid reused, spared", func(p *pidFile) { p.Cmdline = []string{"sleep", "301"} }, false},
		{"recorded argv is a suffix of the cmdline: killed", func(p *pidFile) { p.Cmdline = p.Cmdline[1:] }, true},
		{"empty recorded cmdline: spared", func(p *pidFile) { p.Cmdline = []string{} }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			dir := filepath.Join(root, "snap", "plugin")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			_, pf := leftover(t)
			tc.mutate(&pf)
			path := putPIDFile(t, dir, "0123456789abcdef0123456789abcdef", pf)

			rep, err := SweepGrace(root, sweepGrace, zaptest.NewLogger(t))
			require.NoError(t, err)
			assert.Equal(t, 1, rep.PIDFiles)
			assert.Equal(t, []string{path}, rep.Removed)
			assert.NoFileExists(t, path)
			if tc.killed {
				assert.Equal(t, []int{pf.Proc.PID}, rep.Killed)
				assert.True(t, gone(pf.Proc.PID), "leftover must be dead")
			} else {
				assert.Empty(t, rep.Killed)
				assert.False(t, gone(pf.Proc.PID), "a process not matching its pid file must be left alone")
			}
		})
	}
}

func TestSweepSkipsFilesOfLiveRunners(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	_, pf := leftover(t)
	_, owner := leftover(t) // a live "other worker" process
	pf.Owner = owner.Proc
	other := putPIDFile(t, root, "11111111111111111111111111111111", pf)

	_, pf2 := leftover(t)
	pf2.Owner = selfRef()
	const liveID = "22222222222222222222222222222222"
	mine := putPIDFile(t, root, liveID, pf2)
	active.Store(liveID, struct{}{})
	defer active.Delete(liveID)

	rep, err := SweepGrace(root, sweepGrace, zaptest.NewLogger(t))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{other, mine}, rep.Skipped)
	assert.Empty(t, rep.Killed)
	assert.FileExists(t, other)
	assert.FileExists(t, mine)
	assert.False(t, gone(pf.Proc.PID))
	assert.False(t, gone(pf2.Proc.PID))
}

func TestSweepStaleAndGarbageFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	stale := putPIDFile(t, root, "33333333333333333333333333333333",
		pidFile{Proc: procRef{PID: dead.Process.Pid, StartTime: 1}, Cmdline: []string{"true"}})
	garbage := filepath.Join(root, "h.44444444444444444444444444444444.pid")
	require.NoError(t, os.WriteFile(garbage, []byte("not a pid\n"), 0o644))
	unrelated := filepath.Join(root, "h.pid")
	require.NoError(t, os.WriteFile(unrelated, []byte("1\n"), 0o644))

	rep, err := SweepGrace(root, sweepGrace, zaptest.NewLogger(t))
	require.NoError(t, err)
	assert.Equal(t, 2, rep.PIDFiles)
	assert.ElementsMatch(t, []string{stale, garbage}, rep.Removed)
	require.Len(t, rep.Errors, 1)
	assert.Contains(t, rep.Errors[0], "must be a positive pid")
	assert.FileExists(t, unrelated, "files not shaped like runner pid files are not touched")
}

func TestSweepKillsMarkedChildrenOfDeadLeader(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	const id = "55555555555555555555555555555555"
	_, child := leftover(t, MarkerEnv+"="+id)
	_, bystander := leftover(t, MarkerEnv+"=66666666666666666666666666666666")
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	putPIDFile(t, root, id, pidFile{Proc: procRef{PID: dead.Process.Pid, StartTime: child.Proc.StartTime - 1}, Cmdline: []string{"true"}})

	rep, err := SweepGrace(root, sweepGrace, zaptest.NewLogger(t))
	require.NoError(t, err)
	assert.Empty(t, rep.Killed, "the leader is gone")
	assert.True(t, gone(child.Proc.PID), "a process carrying the attempt marker is terminated")
	assert.False(t, gone(bystander.Proc.PID), "another attempt's process is left alone")
}

func TestSweepMissingRoot(t *testing.T) {
	rep, err := SweepGrace(filepath.Join(t.TempDir(), "nope"), DefaultGrace, nil)
	require.NoError(t, err)
	assert.Zero(t, rep.PIDFiles)
}
