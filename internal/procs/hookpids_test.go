package procs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A hook that double-forks a daemon out of its group and out of its
// environment (so neither the group nor the marker finds it) and names it
// in x.pid, as ArchiveBox's plan asks, leaves nothing behind.
func TestHookPIDFileEndsADoubleForkedDaemon(t *testing.T) {
	s := specFor(t, writeHook(t, "daemon.sh", `S=$(command -v sleep)
setsid env -i /bin/sh -c 'echo $$ > x.pid.tmp; mv x.pid.tmp x.pid; exec '"$S"' 300' </dev/null >/dev/null 2>&1 &
while [ ! -s x.pid ]; do sleep 0.01; done`))
	res := runSpec(t, s)
	b, err := os.ReadFile(filepath.Join(s.Dir, "x.pid"))
	require.NoError(t, err)
	daemon, err := strconv.Atoi(string(b[:len(b)-1]))
	require.NoError(t, err)
	assert.True(t, gone(daemon), "the daemon named in x.pid outlived its hook")
	assert.GreaterOrEqual(t, res.Leftovers, 1)
}

// A pid file naming a process that started before the hook (a reused or
// foreign pid) is never acted on.
func TestHookPIDFileSparesAnOlderProcess(t *testing.T) {
	old := exec.Command("sleep", "300")
	require.NoError(t, old.Start())
	t.Cleanup(func() { _ = old.Process.Kill(); _ = old.Wait() })
	// Start times count in clock ticks (10 ms): the hook starts a tick later.
	st, err := readStat(old.Process.Pid)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return nowTicks() > st.StartTime }, testDeadline, time.Millisecond)
	s := specFor(t, writeHook(t, "liar.sh", "echo "+strconv.Itoa(old.Process.Pid)+" > old.pid"))
	runSpec(t, s)
	assert.False(t, gone(old.Process.Pid), "a process older than the hook was signalled through its pid file")
}

// While another attempt runs in the same directory (a plugin's launch hook
// and its tab hook share chrome/), a hook that ends does not read the pid
// files there: the process one names may serve the other. The last attempt
// to end does.
func TestHookPIDFilesWaitForTheDirectorysLastAttempt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugin")
	keeper := specFor(t, writeHook(t, "keeper.sh", `S=$(command -v sleep)
setsid env -i /bin/sh -c 'echo $$ > browser.pid.tmp; mv browser.pid.tmp browser.pid; exec '"$S"' 300' </dev/null >/dev/null 2>&1 &
while [ ! -e release ]; do sleep 0.01; done`))
	keeper.Dir = dir
	done := make(chan Result, 1)
	go func() { done <- runSpec(t, keeper) }()
	daemon := readPIDLine(t, filepath.Join(dir, "browser.pid"))

	other := specFor(t, writeHook(t, "other.sh", "true"))
	other.Dir = dir
	runSpec(t, other)
	assert.False(t, gone(daemon), "a hook sharing the directory ended the process another hook's pid file names")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), nil, 0o644))
	<-done
	assert.True(t, gone(daemon), "the directory's last attempt left the daemon named in browser.pid")
}

// readPIDLine waits for a pid file written atomically (no newline needed).
func readPIDLine(t *testing.T, path string) int {
	t.Helper()
	waitFile(t, path)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pid, err := strconv.Atoi(string(b[:len(b)-1]))
	require.NoError(t, err)
	return pid
}
