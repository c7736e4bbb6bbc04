package proccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/procs"
)

// TestBelowFindsAHookProcessLeftBehind: a process with the hook marker
// working below the root is found; one without the marker, or elsewhere,
// is not; once it ends it is no longer listed.
func TestBelowFindsAHookProcessLeftBehind(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "snap", "plugin")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	start := func(cwd string, env ...string) *exec.Cmd {
		cmd := exec.Command("sleep", "30")
		cmd.Dir, cmd.Env = cwd, append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	hook := start(dir, procs.MarkerEnv+"=abc")
	start(dir)                                 // no marker: not a hook
	start(t.TempDir(), procs.MarkerEnv+"=def") // elsewhere

	require.Eventually(t, func() bool { return len(Below(root)) == 1 }, 10*time.Second, 20*time.Millisecond)
	got := Below(root)
	assert.Equal(t, hook.Process.Pid, got[0].PID)
	assert.Equal(t, dir, got[0].Dir)
	assert.Contains(t, got[0].Cmdline, "sleep 30")

	require.NoError(t, hook.Process.Kill())
	_ = hook.Wait()
	assert.Empty(t, Below(root))
}

// TestWithEnvFindsAHookByItsEnvironment: a hook process is found by a
// variable of its environment.
func TestWithEnvFindsAHookByItsEnvironment(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), procs.MarkerEnv + "=x", "E2E_EVENTS=/tmp/proccheck-test-events"}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool { return len(WithEnv("E2E_EVENTS=/tmp/proccheck-test-events")) == 1 }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, cmd.Process.Pid, WithEnv("E2E_EVENTS=/tmp/proccheck-test-events")[0].PID)
	assert.Empty(t, WithEnv("E2E_EVENTS=/elsewhere"))
}
