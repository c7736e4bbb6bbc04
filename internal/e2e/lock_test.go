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

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// heldHook is a hook that says it started (a line with the job's ident in
// $E2E_EVENTS.started) and runs until the file $E2E_EVENTS.release-IDENT
// exists.
const heldHook = `for a in "$@"; do case "$a" in --snapshot-id=*) ID="${a#--snapshot-id=}";; esac; done
echo "$ID" >> "$E2E_EVENTS.started"
while [ ! -e "$E2E_EVENTS.release-$ID" ]; do sleep 0.1; done
echo '{"type":"ArchiveResult","status":"succeeded"}'
`

// TestLockPinsAPipeline is issue 25.9's claim lock: a worker process
// locked to a running job (`starter lock NICK IDENT --until-finished`)
// takes no other job — a job submitted meanwhile is not claimed, its hook
// never starts — and says why in its pipeline record; when the locked job
// ends the lock clears by itself and the waiting job runs. A lock without
// --until-finished outlives its job until `starter unlock`.
func TestLockPinsAPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workers and starter binaries")
	}
	workersBin := BuildWorkers(t)
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	root := t.TempDir()
	writeHook(t, root, "held", "on_Snapshot__00_held.sh", heldHook)
	events := filepath.Join(t.TempDir(), "events")
	s := NewStack(t, server, root, func(c *config.Config) { c.Hooks.Timeout = 3 * time.Minute })
	StartWorker(t, workersBin, s.Config, "w1", "E2E_EVENTS="+events, "ARCHIVEFLOW_WORKER_STATS_INTERVAL=300ms")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := func(ident string) bool {
		b, _ := os.ReadFile(events + ".started")
		return strings.Contains(string(b), ident)
	}
	release := func(ident string) { touch(t, events+".release-"+ident) }
	state := func(ident string) model.JobState {
		v, err := s.Store.GetJob(ctx, ident)
		require.NoError(t, err)
		return v.State
	}
	notClaiming := func() string {
		ps, err := s.Store.ListPipelines(ctx)
		require.NoError(t, err)
		for _, p := range ps {
			if p.Fields["nickname"] == "w1" {
				return p.Fields[rkeys.FieldNotClaiming]
			}
		}
		return "(no pipeline w1)"
	}

	a := submitJSON(t, bin, s, "http://127.0.0.1:1/locked-a")
	require.Eventually(t, func() bool { return started(a) }, time.Minute, 50*time.Millisecond, "job a runs")
	res := runStarter(t, bin, s, "lock", "w1", a, "--until-finished")
	require.Equal(t, 0, res.code, "starter lock: %s%s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "locked to job "+a)
	require.Eventually(t, func() bool { return strings.Contains(notClaiming(), "locked to job "+a) }, 30*time.Second, 50*time.Millisecond,
		"the pipeline record says it is locked")
	res = runStarter(t, bin, s, "pipelines")
	assert.Contains(t, res.stdout, "locked to job "+a)

	b := submitJSON(t, bin, s, "http://127.0.0.1:1/locked-b")
	require.Never(t, func() bool { return started(b) }, 5*time.Second, 100*time.Millisecond,
		"the locked pipeline takes no other job")
	assert.NotEqual(t, model.StateFinished, state(b))
	release(a)
	// a ends: the lock --until-finished clears by itself and b runs.
	require.Eventually(t, func() bool { return started(b) }, time.Minute, 50*time.Millisecond, "b runs once a has ended")
	assert.True(t, state(a).Final())
	require.Eventually(t, func() bool { return notClaiming() == "" }, 30*time.Second, 50*time.Millisecond, "the record says it claims again")

	// An indefinite lock outlives its job until starter unlock.
	res = runStarter(t, bin, s, "lock", "w1", b)
	require.Equal(t, 0, res.code, "starter lock: %s%s", res.stdout, res.stderr)
	require.Eventually(t, func() bool { return strings.Contains(notClaiming(), "locked to job "+b) }, 30*time.Second, 50*time.Millisecond)
	release(b)
	require.Eventually(t, func() bool { return state(b).Final() }, time.Minute, 50*time.Millisecond, "b ends")
	c := submitJSON(t, bin, s, "http://127.0.0.1:1/locked-c")
	require.Never(t, func() bool { return started(c) }, 3*time.Second, 100*time.Millisecond,
		"the lock stays after its job ended")
	assert.Contains(t, notClaiming(), "locked to job "+b)
	res = runStarter(t, bin, s, "unlock", "w1")
	require.Equal(t, 0, res.code, "starter unlock: %s%s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "unlocked")
	release(c)
	require.Eventually(t, func() bool { return state(c) == model.StateFinished }, time.Minute, 50*time.Millisecond, "c runs once unlocked")
	for _, id := range []string{a, b} {
		assert.Equal(t, model.StateFinished, state(id), "job %s", id)
	}

	res = runStarter(t, bin, s, "lock", "w1", c)
	assert.Equal(t, 4, res.code, "an ended job takes no lock: %s", res.stderr)
	res = runStarter(t, bin, s, "lock", "nosuchpipeline", c)
	assert.Equal(t, 3, res.code, "an unknown pipeline: %s", res.stderr)
}
