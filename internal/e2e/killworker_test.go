//go:build dev

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestWorkerKilledMidHook kills the worker running a hook with SIGKILL: the
// job is re-claimed by the other worker and completes, with exact counters.
// Its fleet health (issue 24) is as a run without the fault leaves it: a
// reference job run first, unfaulted, on the same workers, leaves the same
// job × hook checks (state, outcomes counted, history), the host × plugin
// checks count one outcome per hook for each job whichever host ran it,
// every history holds one state (ok), and nothing is in failed_checks or
// the notification queue.
func TestWorkerKilledMidHook(t *testing.T) {
	waitingDrill(t)
	if testing.Short() {
		t.Skip("builds the workers binary")
	}
	bin := BuildWorkers(t)
	root := t.TempDir()
	events := filepath.Join(t.TempDir(), "events")
	ok := `echo '{"type":"ArchiveResult","status":"succeeded"}'` + "\n"
	writeHook(t, root, "first", "on_Snapshot__00_first.sh", "HOOK=first\n"+recordFn+"rec done\n"+ok)
	writeHook(t, root, "slow", "on_Snapshot__10_slow.sh", "HOOK=slow\n"+recordFn+`echo "$PPID" >> "$E2E_EVENTS.owner"
rec start; sleep 3; rec end
`+ok)
	writeHook(t, root, "after", "on_Snapshot__50_after.sh", "HOOK=after\n"+recordFn+"rec done\n"+ok)

	s := NewStack(t, server, root, nil)
	w1 := StartWorker(t, bin, s.Config, "w1", "E2E_EVENTS="+events)
	w2 := StartWorker(t, bin, s.Config, "w2", "E2E_EVENTS="+events)
	ref := s.Submit(t, "http://127.0.0.1:1/unfaulted", nil)
	require.NoError(t, s.Wait(t, ref, 3*time.Minute))
	refHealth := jobHealth(t, s, ref.Ident)
	require.NoError(t, os.Remove(events+".owner"))
	job := s.Submit(t, "http://127.0.0.1:1/killed", nil)

	// Wait until a worker runs the slow hook, then SIGKILL that worker.
	var owner int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(events + ".owner")
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		owner, err = strconv.Atoi(strings.Fields(string(b))[0])
		return err == nil
	}, 90*time.Second, 50*time.Millisecond, "slow hook never started")
	victim, survivor := w1, w2
	if owner == w2.Process.Pid {
		victim, survivor = w2, w1
	}
	require.Equal(t, victim.Process.Pid, owner, "the hook's parent is a worker process")
	require.NoError(t, victim.Process.Signal(syscall.SIGKILL))

	var st workflows.Status
	require.NoError(t, s.Wait(t, job, 3*time.Minute))
	require.NoError(t, job.Run.Get(context.Background(), &st))
	assert.Equal(t, model.StateFinished, st.State)
	for _, h := range st.Hooks {
		require.NotNil(t, h.Result, "hook %s has a result", h.Plugin)
		assert.Equal(t, model.StatusSucceeded, h.Result.Status, "hook %s", h.Plugin)
	}
	owners, err := os.ReadFile(events + ".owner")
	require.NoError(t, err)
	lines := strings.Fields(string(owners))
	require.GreaterOrEqual(t, len(lines), 2, "the slow hook ran again after the kill")
	assert.Equal(t, strconv.Itoa(survivor.Process.Pid), lines[len(lines)-1], "the surviving worker finished the job")

	ctx := context.Background()
	h, err := s.Redis.HGetAll(ctx, job.Ident).Result()
	require.NoError(t, err)
	assert.Equal(t, "finished", h["state"])
	assert.Equal(t, "3", h["hooks_total"])
	assert.Equal(t, "3", h["hooks_succeeded"], "no double-counted hooks after the re-claim")
	assert.Equal(t, "0", h["hooks_failed"])
	assert.Equal(t, "2", s.Redis.Get(ctx, "jobs_completed").Val(), "the reference job and this one")
	assert.EqualValues(t, 2, s.Redis.SCard(ctx, "state:finished").Val())

	assert.Equal(t, refHealth, jobHealth(t, s, job.Ident), "the job × hook checks as without the fault")
	perPlugin := map[string]int64{}
	for _, host := range []string{"w1", "w2"} {
		for _, plugin := range []string{"first", "slow", "after"} {
			c := s.Redis.HGetAll(ctx, "check:"+host+":"+plugin).Val()
			if len(c) == 0 {
				continue // that host ran none of the plugin's outcomes
			}
			n, err := strconv.ParseInt(c["count"], 10, 64)
			require.NoError(t, err)
			perPlugin[plugin] += n
			assert.Equal(t, "ok", c["state"], "%s on %s", plugin, host)
			assert.Equal(t, []string{"ok"}, historyStates(t, s, host+":"+plugin), "%s on %s: one state, never a change", plugin, host)
		}
	}
	assert.Equal(t, map[string]int64{"first": 2, "slow": 2, "after": 2}, perPlugin,
		"one outcome per hook and job across the hosts: the killed attempt counts none, the re-claim's repeat of a recorded hook none")
	assert.Zero(t, s.Redis.ZCard(ctx, "failed_checks").Val())
	assert.Zero(t, s.Redis.LLen(ctx, s.Config.Flapjack.Notifications).Val(), "no notification")
}

// jobHealth is the fleet health's job × hook checks of ident, by hook:
// state, outcomes counted and the states of its history.
func jobHealth(t *testing.T, s *Stack, ident string) map[string]string {
	t.Helper()
	ctx := context.Background()
	hooks, err := s.Redis.ZRange(ctx, "all_checks:"+ident, 0, -1).Result()
	require.NoError(t, err)
	require.NotEmpty(t, hooks, "job %s has fleet-health checks", ident)
	out := map[string]string{}
	for _, h := range hooks {
		c := s.Redis.HGetAll(ctx, "check:"+ident+":"+h).Val()
		out[h] = c["state"] + " count=" + c["count"] + " history=" + strings.Join(historyStates(t, s, ident+":"+h), ",")
	}
	return out
}

// historyStates are the states of the check ENTITY:CHECK's history, oldest
// first (ENTITY:CHECK:states, ENTITY:CHECK:TIMESTAMP:state).
func historyStates(t *testing.T, s *Stack, check string) []string {
	t.Helper()
	ctx := context.Background()
	ts, err := s.Redis.LRange(ctx, check+":states", 0, -1).Result()
	require.NoError(t, err)
	var out []string
	for _, at := range ts {
		out = append(out, s.Redis.Get(ctx, check+":"+at+":state").Val())
	}
	return out
}
