//go:build dev

package e2e

import (
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

// TestBackgroundDeadlineAndHookPIDFiles (issue 25 item 6): a .bg hook that
// hangs is stopped at its plugin's timeout, long before the seal would
// stop it; a hook that double-forks a daemon out of its group and
// environment and names it in x.pid leaves nothing behind.
func TestBackgroundDeadlineAndHookPIDFiles(t *testing.T) {
	root := t.TempDir()
	events := filepath.Join(t.TempDir(), "events")
	writeHook(t, root, "hang", "on_Snapshot__10_hang.bg.sh", `echo started
while :; do sleep 0.1; done
`)
	require.NoError(t, os.WriteFile(filepath.Join(root, "hang", "config.json"),
		[]byte(`{"type":"object","properties":{"HANG_TIMEOUT":{"type":"integer","default":2}}}`), 0o644))
	writeHook(t, root, "fork", "on_Snapshot__20_fork.sh", `S=$(command -v sleep)
setsid env -i /bin/sh -c 'echo $$ > x.pid.tmp; mv x.pid.tmp x.pid; exec '"$S"' 600' </dev/null >/dev/null 2>&1 &
while [ ! -s x.pid ]; do sleep 0.01; done
cp x.pid "$E2E_EVENTS.daemon"
echo '{"type":"ArchiveResult","status":"succeeded"}'
`)
	// The seal comes after "last", which waits longer than hang's timeout.
	writeHook(t, root, "last", "on_Snapshot__50_last.sh", `sleep 4
echo '{"type":"ArchiveResult","status":"succeeded"}'
`)
	s := NewStack(t, server, root, func(c *config.Config) { c.Retry.MaximumAttempts = 1 })
	s.StartPools(t, hookEnv(events))
	job := s.Submit(t, "http://127.0.0.1:1/bg-deadline", nil)
	require.NoError(t, s.Wait(t, job, time.Minute))
	var st workflows.Status
	require.NoError(t, job.Run.Get(context.Background(), &st))

	res := resultsByHook(st)
	assert.Equal(t, model.StatusFailed, res["hang"].Status)
	assert.Contains(t, res["hang"].Error, "timed out after 2s", "stopped at its timeout, not by the seal")
	assert.Equal(t, model.StatusSucceeded, res["fork"].Status)
	b, err := os.ReadFile(events + ".daemon")
	require.NoError(t, err)
	daemon, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !alive(daemon) }, 10*time.Second, 20*time.Millisecond,
		"the daemon named in x.pid outlived its hook")
}
