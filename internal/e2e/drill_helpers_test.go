//go:build dev

package e2e

import (
	"context"
	"flag"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// drillDeadline bounds every wait of a drill on a loaded machine.
const drillDeadline = 3 * time.Minute

// waitForFile waits until path exists, failing the test with what after
// the deadline.
func waitForFile(t *testing.T, path, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := os.Stat(path)
		return err == nil
	}, drillDeadline, 20*time.Millisecond, "%s: %s never appeared", what, path)
}

// touch creates an empty file: the signal a drill hook polls for.
func touch(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, nil, 0o644))
}

// waitForFileSh is sh that waits (at most 120 s) for the file $1.
const waitForFileSh = `wait_for() { i=0; while [ ! -e "$1" ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done; }
`

// newStackOnRedis is NewStack wired to rs, a Redis server the test
// controls (to stop and restart it), instead of a private one.
func newStackOnRedis(t *testing.T, srv Temporal, rs *testredis.Server, pluginDir string, configure func(*config.Config)) *Stack {
	t.Helper()
	s := NewStack(t, srv, pluginDir, func(c *config.Config) {
		c.Redis.URL = rs.URL
		if configure != nil {
			configure(c)
		}
	})
	s.RedisURL = rs.URL
	return s
}

// running reports whether the job's workflow is still running.
func running(t *testing.T, c client.Client, j Job) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(ctx, j.Ident, j.Run.GetRunID())
	require.NoError(t, err)
	return d.GetWorkflowExecutionInfo().GetCloseTime() == nil
}

// volatileJobFields are job hash fields that legitimately differ between
// two runs of the same job: clocks, run and worker identities, and the
// per-test task queue.
var volatileJobFields = map[string]bool{
	"queued_at": true, "started_at": true, "finished_at": true, "heartbeat": true,
	"heartbeat_at": true, "state_changed_at": true,
	"ts": true, "run_id": true, "pipeline_id": true, "task_queue": true,
}

// volatileJSON matches JSON members holding clocks or durations.
var volatileJSON = regexp.MustCompile(`"(ts|at|time|started_at|finished_at|start_ts|end_ts|duration_ms|pipeline_id|run_id|pid|host|task_queue)":("[^"]*"|-?[0-9.e+-]+)`)

// runUUID matches a workflow run id embedded in an idempotency key.
var runUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// normJSON removes volatile members from a JSON packet so two runs compare.
func normJSON(s string) string {
	return runUUID.ReplaceAllString(volatileJSON.ReplaceAllString(s, `"$1":_`), "RUN")
}

// hexID matches worker identities, pids and hours embedded in key names.
var hexID = regexp.MustCompile(`[0-9a-f]{16,}|:\d+$`)

// checkTime is the TIMESTAMP of fleet health's per-state-change keys
// (ENTITY:CHECK:TIMESTAMP:state and siblings): when the change was
// recorded, which differs between runs.
var checkTime = regexp.MustCompile(`:\d{9,}:`)

// jobState is the Redis state a finished job leaves, normalised so that two
// runs of the same job compare equal unless something was lost or
// double-counted.
type jobState struct {
	Keys          []string
	Job           map[string]string
	Log           []string
	Events        []string // normalised for comparison
	RawEvents     []string
	EventCounters map[string]string
	Counters      map[string]string
	States        map[string][]string
}

// captureJobState reads ident's job state from rdb.
func captureJobState(t *testing.T, rdb *redis.Client, ident string) jobState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st jobState
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		if strings.HasPrefix(k, "pipeline") || strings.HasPrefix(k, "executive_instance:") {
			continue // worker liveness, not job state
		}
		if strings.HasPrefix(k, "events_archive:") {
			evs, err := rdb.LRange(ctx, k, 0, -1).Result()
			require.NoError(t, err, "events list %s", k)
			for _, e := range evs {
				st.RawEvents = append(st.RawEvents, e)
				st.Events = append(st.Events, normJSON(e))
			}
		}
		if strings.HasSuffix(k, ":check_latency") {
			continue // written only when an outcome reached Redis a second or more late: an outage's, by design
		}
		st.Keys = append(st.Keys, hexID.ReplaceAllString(checkTime.ReplaceAllString(k, ":TIME:"), "#"))
	}
	sort.Strings(st.Keys)
	sort.Strings(st.Events)

	job, err := rdb.HGetAll(ctx, ident).Result()
	require.NoError(t, err)
	st.Job = map[string]string{}
	for f, v := range job {
		if !volatileJobFields[f] {
			st.Job[f] = v
		}
	}
	logs, err := rdb.ZRange(ctx, ident+"_log", 0, -1).Result()
	require.NoError(t, err)
	for _, l := range logs {
		st.Log = append(st.Log, normJSON(l))
	}
	sort.Strings(st.Log)
	st.EventCounters, err = rdb.HGetAll(ctx, "event_counters").Result()
	require.NoError(t, err)
	st.Counters = map[string]string{}
	for _, k := range []string{"jobs_completed", "jobs_failed", "jobs_aborted"} {
		st.Counters[k] = rdb.Get(ctx, k).Val()
	}
	st.States = map[string][]string{}
	for _, s := range []string{"pending", "active", "draining", "finished", "aborted", "failed"} {
		m, err := rdb.SMembers(ctx, "state:"+s).Result()
		require.NoError(t, err)
		sort.Strings(m)
		st.States[s] = m
	}
	return st
}

// drillsAtOnce is how many waiting drills (waitingDrill) run side by side
// unless -test.parallel says otherwise. Each used 0.25 to 0.65 of a core
// alone (2 cores, -race, 2026-11-27): three keep a 2-core machine busy
// without starving their heartbeats.
const drillsAtOnce = 3

// drillsSideBySide sets -test.parallel to drillsAtOnce unless the command
// line set it (TestMain, after flag.Parse).
func drillsSideBySide() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(drillsAtOnce))
	}
}

// waitingDrill marks a drill that spends most of its time waiting (for a
// killed worker's heartbeat timeout, an outage, a restart): it runs beside
// the other waiting drills once the package's other tests are done,
// drillsAtOnce at a time. A test that asserts how soon something happens,
// or runs Chromium, is not one.
func waitingDrill(t *testing.T) {
	t.Parallel()
}
