//go:build dev

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/abbot"
)

// orderHook appends "PATH STEP" to $E2E_EVENTS when it starts; the job of
// /blocker holds its first hook (and so the pool's one slot) until
// $E2E_RELEASE exists. The other jobs' hooks work for a second: longer
// than a workflow takes to schedule its next hook once one ends, so
// whenever the slot frees, each job's next task is already waiting and
// the queue's order (FIFO within a priority) decides.
const orderHook = `url=""
for a in "$@"; do case "$a" in --url=*) url="${a#--url=}";; esac; done
path="/${url#http://*/}"
echo "$path $STEP" >> "$E2E_EVENTS"
if [ "$path" = /blocker ]; then
  [ "$STEP" = first ] && while [ ! -e "$E2E_RELEASE" ]; do sleep 0.05; done
else
  sleep 1
fi
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'
`

// TestNiceReordersWaitingJobsOnAOneSlotPool is issue 25 item 8: on a pool
// with one slot, jobs A then B (both nice 0) wait behind a job holding the
// slot; `starter set B nice=-10` (the binary) raises B's priority live, so
// the work B starts from then on (its hooks) runs before A's waiting work:
// B's second hook before A's. Without the change the queue is FIFO and A's
// second hook runs first. status and list show the nice, the hash keeps it.
func TestNiceReordersWaitingJobsOnAOneSlotPool(t *testing.T) {
	root := t.TempDir()
	for _, h := range []struct{ name, step string }{{"on_Snapshot__10_first.sh", "first"}, {"on_Snapshot__20_second.sh", "second"}} {
		writeHook(t, root, "order", h.name, "STEP="+h.step+"\n"+orderHook)
	}
	dir := t.TempDir()
	events, release := filepath.Join(dir, "events"), filepath.Join(dir, "release")
	s := NewStack(t, server, root, func(c *config.Config) { c.Pools[0].Slots = 1 })
	s.StartPools(t, append(builtinEnv(t), "E2E_EVENTS="+events, "E2E_RELEASE="+release))
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	ctx := t.Context()

	started := func() []string {
		b, _ := os.ReadFile(events)
		return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
	}
	blocker := s.Submit(t, "http://127.0.0.1:9/blocker", nil)
	require.Eventually(t, func() bool { return slices.Contains(started(), "/blocker_first") },
		60*time.Second, 20*time.Millisecond, "the blocker holds the slot")
	a := s.Submit(t, "http://127.0.0.1:9/a", nil)
	b := s.Submit(t, "http://127.0.0.1:9/b", nil)
	// Both wait with work scheduled on the pool (an activity task each)
	// before B's nice changes.
	waiting := func(id string) bool {
		d, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
		return err == nil && len(d.GetPendingActivities()) > 0
	}
	require.Eventually(t, func() bool { return waiting(a.Ident) && waiting(b.Ident) },
		60*time.Second, 20*time.Millisecond, "A and B wait for the slot")

	res := runStarter(t, bin, s, "set", b.Ident, "nice=-10")
	require.Zero(t, res.code, res.stderr)
	assert.Contains(t, res.stdout, b.Ident+" nice -10 (priority 1)")
	assert.Equal(t, "-10", s.Redis.HGet(ctx, b.Ident, "nice").Val())
	assert.Equal(t, "0", s.Redis.HGet(ctx, a.Ident, "nice").Val())
	res = runStarter(t, bin, s, "set", b.Ident, "nice=20")
	assert.NotZero(t, res.code)
	assert.Contains(t, res.stderr, "nice=20: nice 20: must be between -20 and 19")

	require.NoError(t, os.WriteFile(release, nil, 0o644))
	for _, j := range []Job{blocker, a, b} {
		require.NoError(t, s.Wait(t, j, 2*time.Minute))
	}
	order := started()
	t.Logf("hooks in start order: %v", order)
	assert.Less(t, slices.Index(order, "/b_second"), slices.Index(order, "/a_second"),
		"B's work started after the change runs before A's waiting work")
	require.Len(t, order, 6)

	res = runStarter(t, bin, s, "status", b.Ident)
	require.Zero(t, res.code, res.stderr)
	assert.Contains(t, res.stdout, "nice:     -10 (priority 1")
	res = runStarter(t, bin, s, "list")
	require.Zero(t, res.code, res.stderr)
	for _, line := range strings.Split(res.stdout, "\n") {
		if strings.HasPrefix(line, b.Ident) {
			assert.Regexp(t, `^`+b.Ident+`\s+finished\s+-10\s`, line)
		}
	}
}

// TestNiceOfABotJob: a job ArchiveBot's bot queued has no workflow while
// it waits; `starter set IDENT nice=N` writes its hash, and the pipeline
// that claims it starts the workflow with that priority (a claimed job is
// a workflow like any other: TestNiceReordersWaitingJobsOnAOneSlotPool).
// A finished job's nice is not changed.
func TestNiceOfABotJob(t *testing.T) {
	root := t.TempDir()
	writeHook(t, root, "runs", "on_Snapshot__10_runs.sh", runsHook)
	s := NewStack(t, server, root, archiveBotPool("nicebot", 2))
	events := filepath.Join(t.TempDir(), "events")
	s.StartPools(t, append(builtinEnv(t), "E2E_EVENTS="+events))
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	ctx := t.Context()
	bot := abbot.Bot{Redis: s.Redis}
	job, err := bot.Queue(ctx, "http://127.0.0.1:1/nice", abbot.Options{Shallow: true})
	require.NoError(t, err)

	res := runStarter(t, bin, s, "set", job.Ident, "nice=-5")
	require.Zero(t, res.code, res.stderr)
	assert.Equal(t, "-5", s.Redis.HGet(ctx, job.Ident, "nice").Val())
	_, err = s.Client.DescribeWorkflowExecution(ctx, job.Ident, "")
	require.Error(t, err, "no workflow before the claim")

	startPipeline(t, s, "nicebot1", nil)
	var key int32
	require.Eventually(t, func() bool {
		d, err := s.Client.DescribeWorkflowExecution(ctx, job.Ident, "")
		if err != nil {
			return false
		}
		key = d.GetWorkflowExecutionInfo().GetPriority().GetPriorityKey()
		return true
	}, 60*time.Second, 50*time.Millisecond, "the pipeline claims the job")
	assert.EqualValues(t, 2, key, "nice -5 → priority 2 from the start")
	require.Eventually(t, func() bool { return s.Redis.HGet(ctx, job.Ident, "state").Val() == "finished" },
		60*time.Second, 50*time.Millisecond, "the job finishes")
	res = runStarter(t, bin, s, "status", job.Ident)
	require.Zero(t, res.code, res.stderr)
	assert.Contains(t, res.stdout, "nice:     -5 (priority 2")
	res = runStarter(t, bin, s, "set", job.Ident, "nice=1")
	assert.NotZero(t, res.code)
	assert.Contains(t, res.stderr, "is already finished: cannot change its nice")
}
