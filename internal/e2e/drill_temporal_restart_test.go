//go:build dev

package e2e

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/devserver"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// restartableServer is a persistent dev server the test stops and starts
// again on the same data dir and frontend port.
type restartableServer struct {
	mu   sync.Mutex
	cur  *devserver.Server
	opts devserver.Options
}

func startRestartable(t *testing.T) *restartableServer {
	t.Helper()
	r := &restartableServer{opts: devserver.Options{DataDir: t.TempDir(), UIPort: devserver.NoUI, Log: zap.NewNop()}}
	r.start(t)
	_, port, err := net.SplitHostPort(r.cur.HostPort())
	require.NoError(t, err)
	r.opts.FrontendPort, err = strconv.Atoi(port)
	require.NoError(t, err)
	// Registered before the stack's cleanups, so it runs after them.
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.cur != nil {
			assert.NoError(t, r.cur.Stop())
		}
	})
	return r
}

func (r *restartableServer) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, r.opts)
	require.NoError(t, err, "start dev server on %s", r.opts.DataDir)
	r.mu.Lock()
	r.cur = srv
	r.mu.Unlock()
}

// restart stops the server and starts it again on the same data dir and
// port, returning how long the frontend was down.
func (r *restartableServer) restart(t *testing.T) time.Duration {
	t.Helper()
	r.mu.Lock()
	old := r.cur
	r.cur = nil
	r.mu.Unlock()
	begin := time.Now()
	require.NoError(t, old.Stop())
	r.start(t)
	require.Equal(t, old.HostPort(), r.cur.HostPort(), "restarted on the same frontend address")
	return time.Since(begin)
}

// TestDrillTemporalRestart is fault drill 2 of issue 7: the embedded
// Temporal server (persistent SQLite) is stopped and started again while a
// hook runs. The workers reconnect by themselves, the job resumes from
// its history and completes, every hook ran to success and Redis counts
// each exactly once.
func TestDrillTemporalRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a Temporal server")
	}
	rsrv := startRestartable(t)
	root := t.TempDir()
	ok := `echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'` + "\n"
	writeHook(t, root, "first", "on_Snapshot__00_first.sh", ok)
	writeHook(t, root, "slow", "on_Snapshot__10_slow.sh", waitForFileSh+`touch "$E2E_EVENTS.started"
wait_for "$E2E_EVENTS.restarted"
`+ok)
	writeHook(t, root, "bg", "on_Snapshot__20_bg.bg.sh", `trap 'exit 0' TERM
touch "$E2E_EVENTS.bg"
echo started # ready: the next hooks are launched
while :; do sleep 0.1; done
`)
	// "after" waits for bg to run, so the seal finds it running.
	writeHook(t, root, "after", "on_Snapshot__50_after.sh", waitForFileSh+`wait_for "$E2E_EVENTS.bg"
`+ok)

	s := NewStack(t, rsrv.cur, root, nil)
	events := filepath.Join(t.TempDir(), "events")
	s.StartPools(t, hookEnv(events))
	job := s.Submit(t, "http://127.0.0.1:1/temporal-restart", nil)

	waitForFile(t, events+".started", "hook slow")
	down := rsrv.restart(t)
	t.Logf("Temporal frontend was down for %s", down.Round(time.Millisecond))
	touch(t, events+".restarted")

	var st workflows.Status
	require.NoError(t, s.Wait(t, job, drillDeadline))
	require.NoError(t, job.Run.Get(context.Background(), &st))
	assert.Equal(t, model.StateFinished, st.State)
	res := resultsByHook(st)
	require.Len(t, res, 4, "every hook has a result")
	for plugin, r := range res {
		assert.Equal(t, model.StatusSucceeded, r.Status, "hook %s: attempts %d, error %q", plugin, r.Attempts, r.Error)
	}

	ctx := context.Background()
	h, err := s.Redis.HGetAll(ctx, job.Ident).Result()
	require.NoError(t, err)
	assert.Equal(t, "finished", h["state"])
	assert.Equal(t, "9", h["current_step"])
	assert.Equal(t, "4", h["hooks_total"])
	assert.Equal(t, "4", h["hooks_succeeded"], "no double-counted hooks after the restart")
	assert.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val())
	assert.Equal(t, "4", s.Redis.HGet(ctx, "event_counters", "all").Val())
	assert.EqualValues(t, 1, s.Redis.SCard(ctx, "state:finished").Val())
	assert.EqualValues(t, 0, s.Redis.SCard(ctx, "state:active").Val())
	assert.Empty(t, processesWithEnv("E2E_EVENTS="+events), "hook processes left running")
}
