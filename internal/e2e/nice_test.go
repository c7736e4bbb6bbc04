//go:build dev

package e2e

import (
	"fmt"
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

// orderHook appends "PATH STEP" to $E2E_EVENTS when it starts. The
// blocker's hooks and A's and B's first hooks hold the pool's one slot
// until the test creates their gate file in $E2E_RELEASE; the second
// hooks of A and B end at once. The test opens each gate when the queue holds what the next check
// needs, so the order is the queue's (by priority, FIFO within one), not a
// race between a hook's run time and a workflow scheduling its next hook.
const orderHook = `url=""
for a in "$@"; do case "$a" in --url=*) url="${a#--url=}";; esac; done
path="/${url#http://*/}"
echo "$path $STEP" >> "$E2E_EVENTS"
case "${path}_$STEP" in
/blocker_first|/blocker_second|/a_first|/b_first)
  while [ ! -e "$E2E_RELEASE/${path#/}_$STEP" ]; do sleep 0.05; done;;
esac
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'
`

// TestNiceReordersWaitingJobsOnAOneSlotPool is issue 25 item 8: on a pool
// with one slot, jobs A then B (both nice 0) wait behind a job holding the
// slot; `starter set B nice=-10` (the binary) raises B's priority live, so
// the work B starts from then on runs before A's waiting work: B's second
// hook, scheduled after the change, before A's, scheduled before it.
// Without the change the queue is FIFO and A's second hook runs first.
// status and list show the nice, the hash keeps it.
//
// The slot's order, each hook held by its gate until the queue holds what
// the next one needs: the blocker's first hook; A's first hook; B's first
// hook, during which B's nice changes (none of B's work waits then, so
// what the change does to waiting work does not matter); the blocker's
// second hook, queued before A's second one, which holds the slot until
// A's and B's second hooks were both scheduled; then those two, by
// priority.
func TestNiceReordersWaitingJobsOnAOneSlotPool(t *testing.T) {
	root := t.TempDir()
	for _, h := range []struct{ name, step string }{{"on_Snapshot__10_first.sh", "first"}, {"on_Snapshot__20_second.sh", "second"}} {
		writeHook(t, root, "order", h.name, "STEP="+h.step+"\n"+orderHook)
	}
	dir := t.TempDir()
	events, release := filepath.Join(dir, "events"), filepath.Join(dir, "release")
	require.NoError(t, os.Mkdir(release, 0o755))
	// A hook that waits for its host longer than job.host_timeout is
	// requeued: scheduled again, behind what is queued then and with the
	// job's priority then. The stack's 5 s would reorder the queue while
	// the test holds the slot; the default does not.
	s := NewStack(t, server, root, func(c *config.Config) {
		c.Pools[0].Slots = 1
		c.Job.HostTimeout = config.Default().Job.HostTimeout
	})
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
	// The queue's order is when a task was scheduled, not when its job
	// was submitted: B is submitted once A's first hook waits.
	var a, b Job
	waiting := func(id, hook string) bool {
		d, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return false
		}
		for _, p := range d.GetPendingActivities() {
			if strings.Contains(p.GetActivityId(), hook) {
				return true
			}
		}
		return false
	}
	// queue says what waits and what ran, for a failure's message.
	queue := func() string {
		var w strings.Builder
		for _, id := range []string{blocker.Ident, a.Ident, b.Ident} {
			d, _ := s.Client.DescribeWorkflowExecution(ctx, id, "")
			for _, p := range d.GetPendingActivities() {
				fmt.Fprintf(&w, "%s %s; ", p.GetActivityId(), p.GetState())
			}
		}
		return fmt.Sprintf("pending: %s started: %v", w.String(), started())
	}
	until := func(cond func() bool, what string) {
		t.Helper()
		if !assert.Eventually(t, cond, 60*time.Second, 20*time.Millisecond, what) {
			t.Fatal(queue())
		}
	}
	open := func(gate string) { require.NoError(t, os.WriteFile(filepath.Join(release, gate), nil, 0o644)) }
	a = s.Submit(t, "http://127.0.0.1:9/a", nil)
	until(func() bool { return waiting(a.Ident, "first") }, "A's first hook waits for the slot")
	b = s.Submit(t, "http://127.0.0.1:9/b", nil)
	until(func() bool { return waiting(b.Ident, "first") }, "B's first hook waits for the slot")

	open("blocker_first")
	until(func() bool { return waiting(blocker.Ident, "second") }, "the blocker's second hook is queued")
	open("a_first")
	until(func() bool { return slices.Contains(started(), "/b_first") }, "B's first hook runs")
	require.Equal(t, []string{"/blocker_first", "/a_first", "/b_first"}, started(), "the queue's order: %s", queue())
	until(func() bool { return waiting(a.Ident, "second") }, "A's second hook waits")

	res := runStarter(t, bin, s, "set", b.Ident, "nice=-10")
	require.Zero(t, res.code, res.stderr)
	assert.Contains(t, res.stdout, b.Ident+" nice -10 (priority 1)")
	assert.Equal(t, "-10", s.Redis.HGet(ctx, b.Ident, "nice").Val())
	assert.Equal(t, "0", s.Redis.HGet(ctx, a.Ident, "nice").Val())
	res = runStarter(t, bin, s, "set", b.Ident, "nice=20")
	assert.NotZero(t, res.code)
	assert.Contains(t, res.stderr, "nice=20: nice 20: must be between -20 and 19")

	open("b_first")
	// B's second hook may take the slot before the blocker's second one
	// when B's workflow schedules it before the worker asks for its next
	// task; either way A's waits.
	until(func() bool {
		return slices.Contains(started(), "/blocker_second") && (waiting(b.Ident, "second") || slices.Contains(started(), "/b_second"))
	}, "the blocker holds the slot again and B's second hook was scheduled")
	open("blocker_second")
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
