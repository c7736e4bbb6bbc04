//go:build dev

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/proccheck"
	"github.com/archiveflow/archiveflow/workflows"
)

// server is the tests' shared Temporal server, in a process of its own
// (StartServerProcess): this binary is built with -race.
var server *ServerProcess

func TestMain(m *testing.M) {
	flag.Parse()
	drillsSideBySide()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := StartServerProcess(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start Temporal dev server: %v\n", err)
		RemoveBuilds()
		os.Exit(1)
	}
	server = srv
	// No hook process may outlive the tests (internal/proccheck).
	code := proccheck.Main(m, os.Stderr)
	if err := srv.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop Temporal dev server: %v\n", err)
	}
	RemoveBuilds()
	os.Exit(code)
}

// hookEnv returns the hooks' environment with E2E_EVENTS and the test marker.
func hookEnv(events string) []string {
	return append(os.Environ(), "E2E_EVENTS="+events)
}

func resultsByHook(st workflows.Status) map[string]model.ArchiveResult {
	out := map[string]model.ArchiveResult{}
	for _, h := range st.Hooks {
		if h.Result != nil {
			out[h.Plugin] = *h.Result
		}
	}
	return out
}

// TestStepsParallelismBackgroundAndSeal checks DESIGN §4's step semantics
// with hooks that record their start and end times.
func TestStepsParallelismBackgroundAndSeal(t *testing.T) {
	root := t.TempDir()
	fg := recordFn + `rec start; sleep "$NAP"; rec end
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'
`
	writeHook(t, root, "a", "on_Snapshot__10_a.sh", "HOOK=a NAP=1\n"+fg)
	writeHook(t, root, "b", "on_Snapshot__11_b.sh", "HOOK=b NAP=1\n"+fg)
	writeHook(t, root, "bg", "on_Snapshot__20_bg.bg.sh", "HOOK=bg\n"+recordFn+`echo $$ > "$E2E_EVENTS.bgpid"
trap 'rec term; exit 0' TERM
rec start
echo started # ready: the next hooks are launched
while :; do sleep 0.1; done
`)
	writeHook(t, root, "c", "on_Snapshot__30_c.sh", "HOOK=c NAP=0.5\n"+fg)
	writeHook(t, root, "d", "on_Snapshot__31_d.sh", "HOOK=d NAP=0.5\n"+fg)
	writeHook(t, root, "probe", "on_Snapshot__60_probe.sh", "HOOK=probe\n"+recordFn+`rec start
if kill -0 "$(cat "$E2E_EVENTS.bgpid")" 2>/dev/null; then rec bg-alive; else rec bg-dead; fi
rec end
`)
	writeHook(t, root, "z", "on_Snapshot__90_z.sh", "HOOK=z NAP=0.2\n"+fg)

	s := NewStack(t, server, root, nil)
	events := filepath.Join(t.TempDir(), "events")
	s.StartPools(t, hookEnv(events))
	job := s.Submit(t, "http://127.0.0.1:1/steps", nil)
	var st workflows.Status
	require.NoError(t, s.Wait(t, job, 2*time.Minute))
	require.NoError(t, job.Run.Get(context.Background(), &st))
	assert.Equal(t, model.StateFinished, st.State)

	evs := readEvents(t, events)
	// Hooks of one step overlap in time.
	assert.Less(t, find(t, evs, "a", "start"), find(t, evs, "b", "end"))
	assert.Less(t, find(t, evs, "b", "start"), find(t, evs, "a", "end"))
	assert.Less(t, find(t, evs, "c", "start"), find(t, evs, "d", "end"))
	assert.Less(t, find(t, evs, "d", "start"), find(t, evs, "c", "end"))
	// No hook of step N+1 starts before every foreground hook of step N ended.
	steps := [][]string{{"a", "b"}, {"c", "d"}, {"probe"}, {"z"}}
	for i := 1; i < len(steps); i++ {
		for _, later := range steps[i] {
			for j := 0; j < i; j++ {
				for _, earlier := range steps[j] {
					assert.GreaterOrEqual(t, find(t, evs, later, "start"), find(t, evs, earlier, "end"),
						"%s (step group %d) started before %s ended", later, i, earlier)
				}
			}
		}
	}
	// The background hook started in step 2 ran on through step 6 and got
	// SIGTERM at the seal, after step 9.
	assert.True(t, has(evs, "probe", "bg-alive"), "background hook alive in step 6: %v", evs)
	assert.GreaterOrEqual(t, find(t, evs, "bg", "start"), find(t, evs, "b", "end"))
	assert.GreaterOrEqual(t, find(t, evs, "bg", "term"), find(t, evs, "z", "end"))
	res := resultsByHook(st)
	assert.Equal(t, model.StatusSucceeded, res["bg"].Status, "bg stopped by the seal, exit 0 → succeeded")
	assert.Equal(t, model.StatusSucceeded, res["a"].Status)
	assert.Equal(t, model.StatusNoResults, res["probe"].Status)
	// Nothing of the snapshot is alive after the workflow completed.
	pid, err := os.ReadFile(events + ".bgpid")
	require.NoError(t, err)
	n, err := strconv.Atoi(string(pid[:len(pid)-1]))
	require.NoError(t, err)
	assert.NoDirExists(t, filepath.Join("/proc", strconv.Itoa(n)), "background hook still alive")
	assert.Empty(t, processesWithEnv("E2E_EVENTS="+events), "hook processes left running")
}

// TestRetriesSoftFailureAndRedis checks the retry rules through the real
// stack and the Redis state a finished job leaves.
func TestRetriesSoftFailureAndRedis(t *testing.T) {
	root := t.TempDir()
	count := `n=$(($(cat "$E2E_EVENTS.$HOOK" 2>/dev/null || echo 0) + 1)); echo $n > "$E2E_EVENTS.$HOOK"
echo "attempt $n of $HOOK" >&2
`
	writeHook(t, root, "flaky", "on_Snapshot__10_flaky.sh", "HOOK=flaky\n"+count+`[ $n -lt 3 ] && exit 1
echo '{"type":"Response","url":"http://127.0.0.1:1/x","status":200,"bytes":10}'
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"third time"}'
`)
	writeHook(t, root, "broken", "on_Snapshot__11_broken.sh", "HOOK=broken\n"+count+"exit 1\n")
	writeHook(t, root, "soft", "on_Snapshot__12_soft.sh", "HOOK=soft\n"+count+`echo '{"type":"Response","url":"http://127.0.0.1:1/y","status":404,"bytes":5}'
echo '{"type":"ArchiveResult","status":"failed","error":"page says no"}'
`)
	writeHook(t, root, "later", "on_Snapshot__50_later.sh", "HOOK=later\n"+count+`echo '{"type":"ArchiveResult","status":"succeeded"}'
`)
	s := NewStack(t, server, root, func(c *config.Config) { c.Retry.MaximumAttempts = 3 })
	events := filepath.Join(t.TempDir(), "events")
	s.StartPools(t, hookEnv(events))
	job := s.Submit(t, "http://127.0.0.1:1/retries", nil)
	var st workflows.Status
	require.NoError(t, s.Wait(t, job, 2*time.Minute))
	require.NoError(t, job.Run.Get(context.Background(), &st))

	res := resultsByHook(st)
	assert.Equal(t, model.StatusSucceeded, res["flaky"].Status)
	assert.Equal(t, 3, res["flaky"].Attempts)
	assert.Equal(t, model.StatusFailed, res["broken"].Status)
	assert.Equal(t, 3, res["broken"].Attempts)
	assert.NotEmpty(t, res["broken"].Error)
	assert.Equal(t, model.StatusFailed, res["soft"].Status)
	assert.Equal(t, 1, res["soft"].Attempts, "a soft failure is not retried")
	assert.Equal(t, model.StatusSucceeded, res["later"].Status, "later steps run after failures")
	for hook, want := range map[string]string{"flaky": "3", "broken": "3", "soft": "1", "later": "1"} {
		got, err := os.ReadFile(events + "." + hook)
		require.NoError(t, err)
		assert.Equal(t, want+"\n", string(got), "runs of %s", hook)
	}

	// Redis: the job hash, counters, log and events, counted exactly once.
	ctx := context.Background()
	h, err := s.Redis.HGetAll(ctx, job.Ident).Result()
	require.NoError(t, err)
	assert.Equal(t, "finished", h["state"])
	assert.Equal(t, "9", h["current_step"])
	assert.Equal(t, "4", h["hooks_total"])
	assert.Equal(t, "2", h["hooks_succeeded"])
	assert.Equal(t, "2", h["hooks_failed"])
	assert.Equal(t, job.URL, h["url"])
	assert.Equal(t, "1", h["r2xx"])
	assert.Equal(t, "1", h["r4xx"])
	assert.NotEmpty(t, h["finished_at"])
	assert.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val())
	assert.EqualValues(t, 1, s.Redis.SCard(ctx, "state:finished").Val())
	assert.EqualValues(t, 0, s.Redis.SCard(ctx, "state:active").Val())
	assert.Equal(t, "4", s.Redis.HGet(ctx, "event_counters", "all").Val())
	assert.Equal(t, "2", s.Redis.HGet(ctx, "event_counters", "failed").Val())
	logLines, err := s.Redis.ZRange(ctx, job.Ident+"_log", 0, -1).Result()
	require.NoError(t, err)
	joined := fmt.Sprint(logLines)
	assert.Contains(t, joined, "attempt 3 of flaky", "stderr lines reach the job log")
	assert.Contains(t, joined, `"type":"download"`, "Response records reach the job log")
	ttl := s.Redis.TTL(ctx, job.Ident).Val()
	assert.Greater(t, ttl, time.Hour, "finished job retained with an expiry")
}

// builtinPlugins returns a plugin root holding the named plugins of the
// shipped set (plugins/), as symlinks.
func builtinPlugins(t testing.TB, names ...string) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "..", "plugins"))
	require.NoError(t, err)
	root := t.TempDir()
	for _, n := range names {
		require.NoError(t, os.Symlink(filepath.Join(src, n), filepath.Join(root, n)))
	}
	return root
}

// builtinEnv is the worker environment that lets the shipped plugins'
// wrappers exec the workers binary as ARCHIVEFLOW_BIN, as a worker host
// runs them (BuildWorkers: built once, without -race; an exec of this
// race-enabled test binary costs ten times the CPU).
func builtinEnv(t testing.TB) []string {
	t.Helper()
	return append(os.Environ(), "ARCHIVEFLOW_BIN="+BuildWorkers(t))
}
