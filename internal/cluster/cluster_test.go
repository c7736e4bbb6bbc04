//go:build dev || cluster

package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/bench/benchkit"
)

// suite is the cluster every test shares: PostgreSQL and one Temporal
// server. Each test has its own Redis, pool and worker processes. When it
// is nil every test skips, saying why (skipReason).
var (
	suite      *Cluster
	skipReason = "the cluster suite does not run in -short mode"
)

// EnvRequirePostgres, set to 1 (CI sets it), makes a missing PostgreSQL a
// failure of the suite instead of a skip.
const EnvRequirePostgres = "ARCHIVEFLOW_REQUIRE_POSTGRES"

// deadline bounds every wait of a test on a loaded 2-core machine.
const deadline = 3 * time.Minute

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips
	}
	// The suite runs under the README's test command (-tags dev) as well
	// as alone (-tags cluster). PostgreSQL is the one thing it needs that
	// Go does not bring: without it the suite skips, saying so, unless
	// EnvRequirePostgres asks for a failure.
	if _, err := postgresBin(); err != nil {
		if os.Getenv(EnvRequirePostgres) == "1" {
			fmt.Fprintf(os.Stderr, "cluster suite: %v (%s=1)\n", err, EnvRequirePostgres)
			os.Exit(1)
		}
		skipReason = "cluster suite skipped: " + err.Error()
		fmt.Println(skipReason)
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	begin := time.Now()
	dir, err := os.MkdirTemp("", "archiveflow-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster suite:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// Building is most of a cold run; it may take what -timeout leaves
	// after the suite's own few minutes, then fails cleanly (no orphan
	// compiler or server left behind by the timeout's panic).
	ctx, cancel := context.WithTimeout(context.Background(), buildBudget())
	defer cancel()
	bins, err := Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster suite: build:", err)
		return 1
	}
	fmt.Printf("cluster suite: built temporal-server, temporal-sql-tool, workers, starter in %s\n", bins.Took.Round(time.Millisecond))
	startCtx, cancelStart := context.WithTimeout(context.Background(), deadline)
	defer cancelStart()
	c, err := Start(startCtx, bins, dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster suite: start:", err)
		return 1
	}
	fmt.Printf("cluster suite: %s\n", c)
	suite = c
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster suite: stop:", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "Temporal server log (last lines):\n%s\n", c.Temporal.Proc().Tail(30))
	}
	fmt.Printf("cluster suite: %s in all\n", time.Since(begin).Round(time.Second))
	return code
}

// buildBudget is the time the binaries may take to build: the test binary's
// -timeout less 5 minutes for the tests, or 30 minutes without one.
func buildBudget() time.Duration {
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			return max(d-5*time.Minute, time.Minute)
		}
	}
	return 30 * time.Minute
}

// cluster returns the shared cluster, skipping in -short mode, and makes
// sure its Temporal server runs (a failed drill may have left it down).
func cluster(t *testing.T) *Cluster {
	t.Helper()
	if suite == nil {
		t.Skip(skipReason)
	}
	if p := suite.Temporal.Proc(); p == nil || !p.Running() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		require.NoError(t, suite.Temporal.Start(ctx))
	}
	return suite
}

// newEnv is an Env on the shared cluster with hooks from plugins.
func newEnv(t *testing.T, plugins string, vars ...string) *Env {
	c := cluster(t)
	return NewEnv(t, c.Bins, c.Temporal, c.Namespace, EnvOptions{Plugins: plugins, Vars: vars})
}

// hook writes an executable sh hook PLUGIN/NAME under root.
func hook(t *testing.T, root, plugin, name, body string) {
	t.Helper()
	_, err := benchkit.WriteHook(root, plugin, name, body)
	require.NoError(t, err)
}

// Hook bodies.
const (
	succeeded = `echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'`
	// identSh sets $ident: the hook's cwd is ARCHIVE_DIR/snapshots/IDENT/PLUGIN.
	identSh = `ident=$(basename "$(dirname "$PWD")")` + "\n"
	// waitOpenSh waits (at most 3 min) for the file $CLUSTER_EVENTS/open.
	waitOpenSh = `i=0; while [ ! -e "$CLUSTER_EVENTS/open" ] && [ $i -lt 3600 ]; do sleep 0.05; i=$((i+1)); done` + "\n"
)

func urls(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("http://127.0.0.1:1/%s/%d", prefix, i)
	}
	return out
}

// counters reads a Redis hash of integers.
func counters(t *testing.T, rdb *redis.Client, key string) map[string]int64 {
	t.Helper()
	h, err := rdb.HGetAll(context.Background(), key).Result()
	require.NoError(t, err)
	out := map[string]int64{}
	for k, v := range h {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out
}

func get(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	return v
}

// perProcessEvents sums the event_counters:HOST:PID hashes, returning the
// sum and how many processes wrote.
func perProcessEvents(t *testing.T, rdb *redis.Client) (map[string]int64, int) {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "event_counters:*").Result()
	require.NoError(t, err)
	sum := map[string]int64{}
	for _, k := range keys {
		for f, n := range counters(t, rdb, k) {
			sum[f] += n
		}
	}
	return sum, len(keys)
}

// failedEvents lists the events_archive entries of hooks that did not
// succeed, for failure messages.
func failedEvents(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "events_archive:*").Result()
	require.NoError(t, err)
	var out []string
	for _, k := range keys {
		evs, err := rdb.LRange(ctx, k, 0, -1).Result()
		require.NoError(t, err)
		for _, ev := range evs {
			if !strings.Contains(ev, `"succeeded"`) {
				out = append(out, ev)
			}
		}
	}
	return out
}

// assertFinalCounters checks the job-level counters of n finished jobs.
func assertFinalCounters(t *testing.T, rdb *redis.Client, n int) {
	t.Helper()
	ctx := context.Background()
	assert.Equal(t, strconv.Itoa(n), get(t, rdb, "jobs_completed"), "jobs_completed")
	assert.Empty(t, get(t, rdb, "jobs_failed"), "jobs_failed")
	assert.Empty(t, get(t, rdb, "jobs_aborted"), "jobs_aborted")
	assert.EqualValues(t, n, rdb.SCard(ctx, "state:finished").Val(), "state:finished")
	for _, s := range []string{"pending", "active", "draining", "aborted", "failed"} {
		assert.EqualValues(t, 0, rdb.SCard(ctx, "state:"+s).Val(), "state:%s", s)
	}
	assert.EqualValues(t, n, rdb.LLen(ctx, "finish_notifications").Val(), "finish_notifications")
}

// assertAllSucceeded checks that the n final jobs of a drill finished, each
// with all its hooks succeeded and counted exactly once, in its job hash
// and in the global counters.
func assertAllSucceeded(t *testing.T, e *Env, final []Job, n, hooks int) {
	t.Helper()
	require.Len(t, final, n)
	for _, j := range final {
		assert.Equal(t, "finished", j.State, "job %s", j.Ident)
		assert.EqualValues(t, hooks, j.HooksTotal, "job %s hooks_total", j.Ident)
		assert.EqualValues(t, hooks, j.HooksSucceeded, "job %s hooks_succeeded: each hook counted once", j.Ident)
		assert.Equal(t, 9, j.CurrentStep, "job %s current_step", j.Ident)
	}
	assertFinalCounters(t, e.Redis, n)
	total := int64(hooks * n)
	assert.Equal(t, map[string]int64{"all": total, "succeeded": total}, counters(t, e.Redis, "event_counters"),
		"hooks that did not succeed: %v", failedEvents(t, e.Redis))
}

// TestFiftyJobsAcrossTwoWorkerProcesses submits 50 jobs with the starter
// to two worker processes. Each job runs six hooks covering every status
// (one of them fails once and is retried), and every counter in Redis is
// exact: per job, per process and in total.
func TestFiftyJobsAcrossTwoWorkerProcesses(t *testing.T) {
	root := t.TempDir()
	hook(t, root, "ok", "on_Snapshot__00_ok.sh", succeeded)
	hook(t, root, "fetch", "on_Snapshot__10_fetch.sh", `printf 'page' > page.txt
echo '{"type":"Response","url":"http://127.0.0.1:1/","status":200,"bytes":4}'
`+succeeded)
	// Fails its first attempt (exit 3, no record: transient), then succeeds.
	hook(t, root, "flaky", "on_Snapshot__20_flaky.sh", `if [ ! -e tried ]; then : > tried; exit 3; fi
`+succeeded)
	hook(t, root, "none", "on_Snapshot__30_none.sh", "exit 0")
	hook(t, root, "skip", "on_Snapshot__40_skip.sh", "exit 10")
	hook(t, root, "soft", "on_Snapshot__50_soft.sh", `echo '{"type":"ArchiveResult","status":"failed","error":"soft failure"}'`)

	e := newEnv(t, root)
	w1 := e.StartWorker(t, "w1")
	w2 := e.StartWorker(t, "w2")
	const n = 50
	begin := time.Now()
	jobs := e.Submit(t, urls("fifty", n))
	for _, j := range jobs {
		assert.Equal(t, e.Pool.TaskQueue, j.TaskQueue)
	}
	// 300 hooks: on the shared machine at load 25 this took 2.5 min once.
	final := e.WaitFinal(t, n, 2*deadline)
	t.Logf("%d jobs × 6 hooks on 2 worker processes: %s from submit to the last final state", n, time.Since(begin).Round(time.Millisecond))

	for _, j := range final {
		assert.Equal(t, "finished", j.State, "job %s", j.Ident)
		assert.EqualValues(t, 6, j.HooksTotal, "job %s hooks_total", j.Ident)
		assert.EqualValues(t, 3, j.HooksSucceeded, "job %s hooks_succeeded", j.Ident)
		assert.EqualValues(t, 1, j.HooksNoResults, "job %s hooks_noresults", j.Ident)
		assert.EqualValues(t, 1, j.HooksSkipped, "job %s hooks_skipped", j.Ident)
		assert.EqualValues(t, 1, j.HooksFailed, "job %s hooks_failed", j.Ident)
		assert.EqualValues(t, 4, j.Bytes, "job %s bytes_downloaded (page.txt)", j.Ident)
		h := counters(t, e.Redis, j.Ident)
		assert.EqualValues(t, 1, h["items_downloaded"], "job %s items_downloaded", j.Ident)
		assert.EqualValues(t, 1, h["r2xx"], "job %s r2xx", j.Ident)
	}
	assertFinalCounters(t, e.Redis, n)
	want := map[string]int64{"all": 6 * n, "succeeded": 3 * n, "noresults": n, "skipped": n, "failed": n}
	assert.Equal(t, want, counters(t, e.Redis, "event_counters"), "event_counters")
	sum, writers := perProcessEvents(t, e.Redis)
	assert.Equal(t, want, sum, "event_counters:HOST:PID summed over the processes")
	assert.GreaterOrEqual(t, writers, 2, "both worker processes recorded results")

	// Both processes ran jobs: their hosts' archives hold snapshots.
	for _, w := range []*Worker{w1, w2} {
		snaps, _ := os.ReadDir(filepath.Join(w.ArchiveDir, "snapshots"))
		assert.NotEmpty(t, snaps, "worker %s ran no snapshot", w.Name)
	}
}

// TestWorkerSIGKILLMidHook kills, with SIGKILL, the worker process running
// the most hooks while every job waits in a hook. Its jobs are re-claimed
// by the other process and finish; every hook is counted exactly once.
func TestWorkerSIGKILLMidHook(t *testing.T) {
	root := t.TempDir()
	events := t.TempDir()
	hook(t, root, "first", "on_Snapshot__00_first.sh", succeeded)
	hook(t, root, "slow", "on_Snapshot__10_slow.sh", identSh+`echo "$PPID $ident" >> "$CLUSTER_EVENTS/owners"
`+waitOpenSh+succeeded)
	hook(t, root, "after", "on_Snapshot__50_after.sh", succeeded)

	e := newEnv(t, root)
	w1 := e.StartWorker(t, "w1", "CLUSTER_EVENTS="+events)
	w2 := e.StartWorker(t, "w2", "CLUSTER_EVENTS="+events)
	const n = 6
	e.Submit(t, urls("sigkill", n))

	var owners map[string][]int // ident → pids of the workers that ran its slow hook
	require.Eventually(t, func() bool {
		owners = readOwners(t, filepath.Join(events, "owners"))
		return len(owners) == n
	}, deadline, 50*time.Millisecond, "every job reaches the slow hook")
	held := map[int]int{}
	for _, pids := range owners {
		held[pids[0]]++
	}
	victim, survivor := w1, w2
	if held[w2.Pid()] > held[w1.Pid()] {
		victim, survivor = w2, w1
	}
	require.Positive(t, held[victim.Pid()], "the victim runs hooks: %v (w1 %d, w2 %d)", held, w1.Pid(), w2.Pid())
	t.Logf("SIGKILL %s (pid %d), running %d of %d slow hooks; %s (pid %d) runs %d",
		victim.Name, victim.Pid(), held[victim.Pid()], n, survivor.Name, survivor.Pid(), held[survivor.Pid()])
	victim.Kill()
	killed := time.Now()
	require.NoError(t, os.WriteFile(filepath.Join(events, "open"), nil, 0o644))

	final := e.WaitFinal(t, n, deadline)
	t.Logf("all %d jobs final %s after the SIGKILL", n, time.Since(killed).Round(time.Millisecond))
	assertAllSucceeded(t, e, final, n, 3)
	owners = readOwners(t, filepath.Join(events, "owners"))
	for ident, pids := range owners {
		if pids[0] == victim.Pid() {
			require.GreaterOrEqual(t, len(pids), 2, "job %s: the slow hook ran again after the kill", ident)
			assert.Equal(t, survivor.Pid(), pids[len(pids)-1], "job %s: the surviving process finished it", ident)
		}
	}
}

// readOwners reads "PID IDENT" lines.
func readOwners(t *testing.T, path string) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	out := map[string][]int{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue // a line being written
		}
		pid, err := strconv.Atoi(f[0])
		require.NoError(t, err, "owners line %q", line)
		out[f[1]] = append(out[f[1]], pid)
	}
	return out
}

// TestTemporalServerKilledAndRestartedMidJob kills the Temporal server
// process with SIGKILL while every job waits in a hook, starts it again on
// the same database and ports, and lets the hooks finish: the worker
// processes reconnect by themselves and every job finishes with exact
// counters.
func TestTemporalServerKilledAndRestartedMidJob(t *testing.T) {
	root := t.TempDir()
	events := t.TempDir()
	hook(t, root, "first", "on_Snapshot__00_first.sh", succeeded)
	hook(t, root, "gate", "on_Snapshot__10_gate.sh", identSh+`: > "$CLUSTER_EVENTS/started.$ident"
`+waitOpenSh+succeeded)
	hook(t, root, "bg", "on_Snapshot__20_bg.bg.sh", identSh+`trap 'exit 0' TERM
: > "$CLUSTER_EVENTS/bg.$ident"
while :; do sleep 0.1; done`)
	// "after" waits for bg to run, so the seal finds it running.
	hook(t, root, "after", "on_Snapshot__50_after.sh", identSh+`i=0; while [ ! -e "$CLUSTER_EVENTS/bg.$ident" ] && [ $i -lt 3600 ]; do sleep 0.05; i=$((i+1)); done
`+succeeded)

	c := cluster(t)
	e := newEnv(t, root)
	e.StartWorker(t, "w1", "CLUSTER_EVENTS="+events)
	e.StartWorker(t, "w2", "CLUSTER_EVENTS="+events)
	const n = 4
	e.Submit(t, urls("temporal-restart", n))
	require.Eventually(t, func() bool {
		started, _ := filepath.Glob(filepath.Join(events, "started.*"))
		return len(started) == n
	}, deadline, 50*time.Millisecond, "every job reaches the gate hook")

	begin := time.Now()
	c.Temporal.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	require.NoError(t, c.Temporal.Start(ctx))
	t.Logf("Temporal server killed and serving again after %s", time.Since(begin).Round(time.Millisecond))
	require.NoError(t, os.WriteFile(filepath.Join(events, "open"), nil, 0o644))

	final := e.WaitFinal(t, n, deadline)
	t.Logf("all %d jobs final %s after the kill", n, time.Since(begin).Round(time.Millisecond))
	assertAllSucceeded(t, e, final, n, 4)
}
