//go:build dev

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
	"github.com/archiveflow/archiveflow/workflows"
)

// requireProcessLimit skips the test unless this host can hold a hook to a
// process limit: one needs a writable cgroup (or a worker that is not
// root, which RLIMIT_NPROC binds). It runs a small hook that forks more
// than its limit through the runner and looks at what the runner reports.
func requireProcessLimit(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "forks.sh")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\nfor i in 1 2 3 4 5 6; do sleep 2 & done\nwait\n"), 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := procs.Run(ctx, procs.Spec{Path: path, Dir: filepath.Join(dir, "run"), Stem: "forks",
		Timeout: 30 * time.Second, Grace: time.Second, LineCap: 1 << 16,
		Limits: procs.Limits{Processes: 3}, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	if res.Limit != procs.LimitProcesses {
		t.Skipf("this host does not hold a hook to a process limit (no writable cgroup, worker is root): %s", res.Reason)
	}
}

// TestLimitsEndRunawayHooks is issue 17's acceptance for resource limits,
// through the whole stack: with hooks.limits set in the configuration, a
// hook that allocates without bound and one that forks without bound end
// failed, each naming its limit, and are not retried; a hook of the same
// step, which runs from before they run away until both are gone ("outlived
// both"), succeeds, the later step runs, the job finishes, and the worker
// (this process) goes on and stops cleanly.
func TestLimitsEndRunawayHooks(t *testing.T) {
	const maxAttempts = 5
	requireProcessLimit(t)
	root := t.TempDir()
	events := filepath.Join(t.TempDir(), "events")
	// hog and bomb write their pid, then wait for normal to run before
	// they run away; both are bounded (512 MiB, 300 sleeping processes) so
	// that a host where a limit failed to apply is not sunk by the test.
	writeHook(t, root, "hog", "on_Snapshot__10_hog.sh", waitForFileSh+`echo $$ > "$E2E_EVENTS.hog"
wait_for "$E2E_EVENTS.normal"
head -c 536870912 /dev/zero | tail > /dev/null
`)
	writeHook(t, root, "bomb", "on_Snapshot__10_bomb.sh", waitForFileSh+`echo $$ > "$E2E_EVENTS.bomb"
wait_for "$E2E_EVENTS.normal"
i=0
while [ $i -lt 300 ]; do
	sleep 60 &
	i=$((i+1))
done
wait
`)
	// normal starts with them and ends only once both are gone.
	writeHook(t, root, "normal", "on_Snapshot__10_normal.sh", waitForFileSh+`wait_for "$E2E_EVENTS.hog"
wait_for "$E2E_EVENTS.bomb"
touch "$E2E_EVENTS.normal"
for p in "$(cat "$E2E_EVENTS.hog")" "$(cat "$E2E_EVENTS.bomb")"; do
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done
	kill -0 "$p" 2>/dev/null && { echo '{"type":"ArchiveResult","status":"failed","error":"a runaway hook is still alive"}'; exit 0; }
done
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"outlived both"}'
`)
	writeHook(t, root, "later", "on_Snapshot__60_later.sh", `echo '{"type":"ArchiveResult","status":"succeeded"}'
`)

	s := NewStack(t, server, root, func(c *config.Config) {
		c.Hooks.Limits = config.HookLimits{MaxMemory: "64MiB", MaxProcesses: 20}
		// A limit is final: it must not use up the retries. (An attempt may
		// still be cancelled and retried when the Temporal server misses a
		// heartbeat on a loaded machine, so the test does not insist on 1.)
		c.Retry.MaximumAttempts = maxAttempts
	})
	s.StartPools(t, hookEnv(events))
	job := s.Submit(t, "http://127.0.0.1:1/limits", nil)
	var st workflows.Status
	require.NoError(t, s.Wait(t, job, drillDeadline))
	require.NoError(t, job.Run.Get(context.Background(), &st))
	assert.Equal(t, model.StateFinished, st.State)

	res := resultsByHook(st)
	hog, bomb, normal := res["hog"], res["bomb"], res["normal"]
	assert.Equal(t, model.StatusFailed, hog.Status, hog.Error)
	assert.Equal(t, procs.LimitMemory, hog.Limit)
	assert.Contains(t, hog.Error, "memory limit 64 MiB")
	assert.Less(t, hog.Attempts, maxAttempts, "the limit ended the hook for good")
	assert.Equal(t, model.StatusFailed, bomb.Status, bomb.Error)
	assert.Equal(t, procs.LimitProcesses, bomb.Limit)
	assert.Contains(t, bomb.Error, "process limit 20 reached")
	assert.Less(t, bomb.Attempts, maxAttempts, "the limit ended the hook for good")

	assert.Equal(t, model.StatusSucceeded, normal.Status, normal.Error)
	assert.Equal(t, "outlived both", normal.OutputStr)
	assert.Empty(t, normal.Limit)
	assert.Equal(t, model.StatusSucceeded, res["later"].Status, "the worker ran the next step")

	// Redis counts both failures once, and the hook events say why.
	ctx := context.Background()
	h, err := s.Redis.HGetAll(ctx, job.Ident).Result()
	require.NoError(t, err)
	assert.Equal(t, "2", h["hooks_failed"])
	assert.Equal(t, "2", h["hooks_succeeded"])
	keys, err := s.Redis.Keys(ctx, "events_archive:*").Result()
	require.NoError(t, err)
	var evs []string
	for _, k := range keys {
		evs = append(evs, s.Redis.LRange(ctx, k, 0, -1).Val()...)
	}
	joined := strings.Join(evs, "\n")
	assert.Contains(t, joined, "memory limit 64 MiB")
	assert.Contains(t, joined, "process limit 20 reached")

	// Nothing of the bomb is left.
	require.Eventually(t, func() bool {
		return len(processesWithEnv("E2E_EVENTS="+events)) == 0
	}, 10*time.Second, 20*time.Millisecond, "hook processes left running: %v", processesWithEnv("E2E_EVENTS="+events))
}
