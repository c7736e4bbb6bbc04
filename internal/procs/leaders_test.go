package procs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// A hook's setsid daemon is still found and killed while another hook runs
// beside it, and the other hook — whose leader is in the first hook's birth
// window, skipped by the marker scan — is left alone and ends normally.
func TestSetsidDaemonKilledBesideAnotherHook(t *testing.T) {
	t.Parallel()
	other := specFor(t, writeHook(t, "other.sh", `echo $$ > other.pid.tmp; mv other.pid.tmp other.pid
while [ ! -e go ]; do sleep 0.01; done
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"other"}'`))
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	otherDone := make(chan Result, 1)

	s := specFor(t, writeHook(t, "daemon.sh", `touch started
while [ ! -e "$OTHER_DIR/other.pid" ]; do sleep 0.01; done
setsid sh -c 'echo $$ > daemon.pid.tmp; mv daemon.pid.tmp daemon.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
# Until the daemon is sleep: its mv may still be alive when daemon.pid appears.
while [ "$(cat /proc/$(cat daemon.pid 2>/dev/null)/comm 2>/dev/null)" != sleep ]; do sleep 0.01; done
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"forked"}'`))
	s.Env = append(s.Env, "OTHER_DIR="+other.Dir)
	s.Grace = 300 * time.Millisecond
	// The daemon hook's window opens first, so the other hook's leader,
	// started after it, is inside it.
	go func() {
		waitFile(t, filepath.Join(s.Dir, "started")) // the daemon hook runs: its window is open
		res, err := Run(ctx, other)
		assert.NoError(t, err)
		otherDone <- res
	}()
	res := runSpec(t, s)
	require.Equal(t, model.StatusSucceeded, res.Status, res.Reason)
	daemon := readPID(t, filepath.Join(s.Dir, "daemon.pid"))
	assert.True(t, gone(daemon), "daemon %d left the group but carries the marker and must be dead", daemon)
	assert.Equal(t, 1, res.Leftovers, "only the daemon: the other hook's leader is not this hook's")

	otherPID := readPID(t, filepath.Join(other.Dir, "other.pid"))
	assert.False(t, gone(otherPID), "the other hook's leader %d must be left running", otherPID)
	require.NoError(t, os.WriteFile(filepath.Join(other.Dir, "go"), nil, 0o644))
	ores := <-otherDone
	assert.Equal(t, model.StatusSucceeded, ores.Status, ores.Reason)
	assert.Equal(t, 0, ores.Leftovers)
	_, registered := leaders.Load(otherPID)
	assert.False(t, registered, "a leader is unregistered when its run ends")
}

// Only the live leader instance Run registered is skipped: a process that
// reuses its pid (another start time) is read like any other, so a marked
// process is never hidden behind a stale entry.
func TestMarkerScanSkipsOnlyRegisteredLeaderInstance(t *testing.T) {
	marker := MarkerEnv + "=" + strings.Repeat("e", 32)
	_, pf := leftover(t, marker)
	kv := []byte(marker)

	found, err := markedProcesses(kv, pf.Proc.StartTime, nil)
	require.NoError(t, err)
	assert.Contains(t, found, pf.Proc)

	leaders.Store(pf.Proc.PID, pf.Proc.StartTime+1) // the pid's earlier owner
	found, err = markedProcesses(kv, pf.Proc.StartTime, nil)
	leaders.Delete(pf.Proc.PID)
	require.NoError(t, err)
	assert.Contains(t, found, pf.Proc, "a reused pid is not the registered leader")

	leaders.Store(pf.Proc.PID, pf.Proc.StartTime)
	found, err = markedProcesses(kv, pf.Proc.StartTime, nil)
	leaders.Delete(pf.Proc.PID)
	require.NoError(t, err)
	assert.NotContains(t, found, pf.Proc, "the registered leader instance itself is skipped")
}

// An environment larger than the scan's first buffer is read whole: a
// marker at its end is found.
func TestMarkerFoundAtEndOfLargeEnvironment(t *testing.T) {
	t.Parallel()
	env := make([]string, 0, 2001)
	for i := range 2000 {
		env = append(env, "BIG_"+strings.Repeat("x", 8)+"_"+strings.Repeat("v", 40)+string(rune('a'+i%26)))
	}
	marker := MarkerEnv + "=" + strings.Repeat("d", 32)
	_, pf := leftover(t, append(env, marker)...)
	assert.True(t, hasEnv(pf.Proc, []byte(marker)), "marker after ~100 KB of environment")
	assert.False(t, hasEnv(pf.Proc, []byte(MarkerEnv+"="+strings.Repeat("c", 32))))
}
