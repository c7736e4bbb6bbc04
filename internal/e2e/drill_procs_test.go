//go:build dev

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// readPids reads the pids hooks appended to path, one per line.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "pid file %s", path)
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err, "pid file %s holds %q", path, f)
		pids = append(pids, pid)
	}
	require.NotEmpty(t, pids, "pid file %s is empty", path)
	return pids
}

// TestDrillNothingSurvives is fault drill 4 of issue 7: hooks that resist
// being stopped (one ignores SIGTERM, one double-forks a setsid daemon
// that ignores SIGTERM and writes a pid file, one never exits, and a
// background one ignores SIGTERM at the seal) cannot outlive their
// snapshot: once the workflow has completed no process of theirs is left,
// found by scanning /proc for the hooks' environment marker and by the
// pids they wrote.
func TestDrillNothingSurvives(t *testing.T) {
	root := t.TempDir()
	events := filepath.Join(t.TempDir(), "events")
	stubborn := `trap '' TERM
echo $$ >> "$E2E_EVENTS.pids"
while :; do sleep 0.1; done
`
	writeHook(t, root, "ignoreterm", "on_Snapshot__10_ignoreterm.sh", stubborn)
	writeHook(t, root, "forever", "on_Snapshot__11_forever.sh", `echo $$ >> "$E2E_EVENTS.pids"
while :; do sleep 0.1; done
`)
	// The daemon leaves the hook's process group and session (setsid,
	// double fork), ignores SIGTERM and records its pid both in the plugin
	// dir (as real daemons do) and for the test; the hook itself exits 0
	// at once with a result.
	writeHook(t, root, "daemon", "on_Snapshot__12_daemon.sh", waitForFileSh+`( setsid sh -c 'trap "" TERM; echo $$ > daemon.pid; echo $$ >> "$E2E_EVENTS.pids"; while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 & )
wait_for daemon.pid
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"daemon started"}'
`)
	writeHook(t, root, "bgstubborn", "on_Snapshot__20_bgstubborn.bg.sh", `touch "$E2E_EVENTS.bg"
echo started # ready: the next hooks are launched
`+stubborn)
	// "later" waits for the background hook to run, so the seal finds it
	// running.
	writeHook(t, root, "later", "on_Snapshot__50_later.sh", waitForFileSh+`wait_for "$E2E_EVENTS.bg"
echo '{"type":"ArchiveResult","status":"succeeded"}'
`)

	s := NewStack(t, server, root, func(c *config.Config) {
		c.Hooks.Timeout = 2 * time.Second
		c.Hooks.Grace = time.Second
		c.Retry.MaximumAttempts = 1
	})
	s.StartPools(t, hookEnv(events))
	job := s.Submit(t, "http://127.0.0.1:1/nothing-survives", nil)
	var st workflows.Status
	require.NoError(t, s.Wait(t, job, drillDeadline))
	require.NoError(t, job.Run.Get(context.Background(), &st))
	assert.Equal(t, model.StateFinished, st.State)

	res := resultsByHook(st)
	for _, plugin := range []string{"ignoreterm", "forever"} {
		assert.Equal(t, model.StatusFailed, res[plugin].Status, "%s timed out: a transient failure with no attempts left", plugin)
		assert.NotEmpty(t, res[plugin].Error, "%s records why it failed", plugin)
	}
	assert.Equal(t, model.StatusSucceeded, res["daemon"].Status)
	assert.Equal(t, model.StatusSucceeded, res["later"].Status)
	assert.Equal(t, model.StatusFailed, res["bgstubborn"].Status, "a background hook that needed SIGKILL at the seal failed")

	// ignoreterm, forever, the daemon and bgstubborn each wrote a pid.
	pids := readPids(t, events+".pids")
	assert.Len(t, pids, 4, "pids written: %v", pids)
	// SIGKILL is asynchronous: a killed process may take a moment to go.
	require.Eventually(t, func() bool {
		return len(processesWithEnv("E2E_EVENTS="+events)) == 0
	}, 10*time.Second, 20*time.Millisecond, "hook processes left running: %v", processesWithEnv("E2E_EVENTS="+events))
	for _, pid := range pids {
		assert.False(t, alive(pid), "pid %d written by a hook is still alive", pid)
	}
}
