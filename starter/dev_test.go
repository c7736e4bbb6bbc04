//go:build dev

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/devredis"
	"github.com/archiveflow/archiveflow/internal/devserver"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/webui"
	"github.com/archiveflow/archiveflow/workflows"
)

// These tests run the CLI against the real embedded stack: an in-process
// Temporal server, a real redis-server when installed, the real worker
// pools and shell-script hooks. They link the Temporal server, hence the
// build tag:  go test -race -tags dev ./starter/

const eventually = 2 * time.Minute

// stackEnv is one running stack and the flags that reach it.
type stackEnv struct {
	st    *devStack
	cfg   *config.Config
	flags []string
	gates string // a file GATES/IDENT lets that job's "slow" hook finish
}

var (
	stackOnce sync.Once
	shared    *stackEnv
	stackErr  error
	stackRoot string // the shared stack's directory: TestMain removes it
)

const gateHook = `#!/bin/sh
id=""
for a in "$@"; do case "$a" in --snapshot-id=*) id="${a#--snapshot-id=}";; esac; done
echo "slow hook waiting for its gate" >&2
while [ ! -e "$ARCHIVEFLOW_TEST_GATES/$id" ]; do sleep 0.05; done
if [ "$(cat "$ARCHIVEFLOW_TEST_GATES/$id")" = fail ]; then
  echo '{"type":"ArchiveResult","status":"failed","error":"gate said fail"}'
  exit 0
fi
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"gate opened"}'
`

const fetchHook = `#!/bin/sh
case "$*" in *doomed-*) echo '{"type":"ArchiveResult","status":"failed","error":"told to fail"}'; exit 0;; esac
case "$*" in *titled-*) echo '{"type":"Snapshot","title":"Tïtled by a hook"}';; esac
echo "fetch hook says hello" >&2
printf 'page' > page.txt
echo '{"type":"Response","url":"http://example.invalid/","status":200,"bytes":4}'
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"page.txt"}'
`

func writeHook(t testing.TB, root, plugin, name, body string) {
	dir := filepath.Join(root, plugin)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755))
}

// startSharedStack starts one stack for the package's tests (the Temporal
// server takes seconds to start; each test uses its own URLs).
func startSharedStack(t *testing.T) *stackEnv {
	t.Helper()
	stackOnce.Do(func() {
		root, err := os.MkdirTemp("", "starter-dev-test-")
		if err != nil {
			stackErr = err
			return
		}
		stackRoot = root
		plugins, gates := filepath.Join(root, "plugins"), filepath.Join(root, "gates")
		writeHook(t, plugins, "fetch", "on_Snapshot__10_fetch.sh", fetchHook)
		writeHook(t, plugins, "slow", "on_Snapshot__20_slow.sh", gateHook)
		if stackErr = os.MkdirAll(gates, 0o755); stackErr != nil {
			return
		}
		os.Setenv("ARCHIVEFLOW_TEST_GATES", gates) // inherited by the hooks
		c := config.Default()
		c.ArchiveDir = filepath.Join(root, "archive")
		c.Plugins.Dirs = []string{plugins}
		c.Plugins.Builtin = false // the fixture hooks only
		c.Retry.InitialInterval, c.Retry.MaximumInterval = 100*time.Millisecond, 100*time.Millisecond
		c.Redis.RetainAborted = time.Hour // keep aborted jobs readable by the test
		c.Hooks.PassEnv = []string{"ARCHIVEFLOW_TEST_GATES"}
		inv := &invocation{cfg: &c, log: zap.NewNop()}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		st, err := startStack(ctx, inv,
			devredis.Options{DataDir: filepath.Join(root, "redis")},
			devserver.Options{DataDir: filepath.Join(root, "temporal"), UIPort: 0})
		if err != nil {
			stackErr = err
			return
		}
		// The stack's UI listens on a free port: the CLI finds it in the
		// stack's Redis (no ARCHIVEFLOW_TEMPORAL_UI_URL), as a user's does.
		shared = &stackEnv{st: st, cfg: &c, gates: gates, flags: []string{
			"--temporal-address", c.Temporal.HostPort, "--redis-url", c.Redis.URL,
			"--archive-dir", c.ArchiveDir, "--plugins-dir", plugins,
		}}
	})
	require.NoError(t, stackErr)
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.st.stop()
	}
	// Nothing of the tests stays on disk: the shared stack's data and the
	// built starter binary (hundreds of MB per run).
	for _, dir := range []string{stackRoot, binDir} {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

func (e *stackEnv) run(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLI(t, "", append(args, e.flags...)...)
}

func (e *stackEnv) open(t *testing.T, id string) {
	require.NoError(t, os.WriteFile(filepath.Join(e.gates, id), nil, 0o644))
}

// jobSeq makes every job URL unique within the process, so the tests pass
// again under -count=N: the shared stack's Redis keeps finished jobs.
var jobSeq atomic.Int64

// jobURL returns a fresh URL for a test's job.
func jobURL(name string) string {
	return fmt.Sprintf("http://example.invalid/%s-%d", name, jobSeq.Add(1))
}

func identOf(t *testing.T, url string) string {
	id, _, err := ident.FromURL(url)
	require.NoError(t, err)
	return id
}

func (e *stackEnv) status(t *testing.T, id string) jobJSON {
	t.Helper()
	res := e.run(t, "status", id, "--json")
	require.Equal(t, exitOK, res.code, res.stderr)
	var j jobJSON
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &j))
	return j
}

func (e *stackEnv) waitState(t *testing.T, id, state string) {
	t.Helper()
	require.Eventually(t, func() bool { return string(e.status(t, id).State) == state }, eventually, 50*time.Millisecond,
		"job %s never reached %s", id, state)
}

func TestSubmitWaitArchivesEndToEndAndReadCommandsShowIt(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("wait")
	id := identOf(t, url)
	e.open(t, id)

	res := e.run(t, "submit", url, "--wait")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "submitted "+id)
	require.NotEqual(t, config.Default().Temporal.UIURL, e.cfg.Temporal.UIURL, "the stack's UI is elsewhere")
	assert.Contains(t, res.stdout, "Web UI: "+e.cfg.Temporal.UIURL+"/namespaces/default/workflows/"+id, "the link points at the stack's UI")
	assert.Contains(t, res.stdout, id+"  FINISHED")
	assert.Contains(t, res.stdout, "hooks: 2 total, 2 succeeded")
	outputs := filepath.Join(e.cfg.ArchiveDir, "snapshots", id)
	assert.Contains(t, res.stdout, "files:   "+outputs)
	assert.Contains(t, res.stdout, "wacz:    not written: no WARC in "+outputs, "no hook recorded a WARC: the seal says so")
	assert.FileExists(t, filepath.Join(outputs, "fetch", "page.txt"))
	assert.Regexp(t, `(?m)^  1     fetch\s+succeeded  1\s+\d+\.\ds\s+page\.txt$`, res.stdout, "the results table")
	assert.Regexp(t, `(?m)^  2     slow\s+succeeded  1\s+\d+\.\ds\s+gate opened$`, res.stdout)
	assert.NotContains(t, res.stdout, "\x1b[", "not a terminal: plain lines, nothing redrawn")

	// status of the finished job: Redis' counts and the closed workflow's
	// per-hook results.
	j := e.status(t, id)
	assert.Equal(t, "finished", string(j.State))
	assert.Equal(t, e.cfg.Temporal.UIURL+"/namespaces/default/workflows/"+id, j.UI, "status links the stack's UI")
	assert.EqualValues(t, 2, j.HooksSucceeded)
	assert.Equal(t, url, j.URL)
	assert.Equal(t, "temporal", j.HooksSource)
	require.Len(t, j.Hooks, 2)
	assert.Equal(t, "fetch", j.Hooks[0].Plugin)
	assert.Equal(t, model.StatusSucceeded, j.Hooks[0].Status)
	assert.Equal(t, 1, j.Hooks[0].Attempts)
	assert.Equal(t, "page.txt", j.Hooks[0].Output)
	res = e.run(t, "status", id)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Regexp(t, `(?m)^  STEP  HOOK\s+STATUS\s+TRIES  TIME  OUTPUT / ERROR$`, res.stdout)
	assert.Regexp(t, `(?m)^  2     slow\s+succeeded  1\s+\d+\.\ds\s+gate opened$`, res.stdout)

	// Temporal unreachable: status still answers from Redis and says so.
	res = runCLI(t, "", "status", id, "--temporal-address", closedAddr(t), "--redis-url", e.cfg.Redis.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "state:    finished")
	assert.Contains(t, res.stdout, "results:  per-hook results unavailable: Temporal is unreachable")

	// One hook's own files, where the worker keeps them.
	res = e.run(t, "logs", id, "--hook", "fetch")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Regexp(t, `(?m)^==> `+regexp.QuoteMeta(filepath.Join(outputs, "fetch", "on_Snapshot__10_fetch."))+`[0-9a-f]{32}\.stdout\.log <==$`, res.stdout)
	assert.Contains(t, res.stdout, `{"type":"ArchiveResult","status":"succeeded","output_str":"page.txt"}`)
	assert.Contains(t, res.stdout, "fetch hook says hello", "its stderr file too")
	elsewhere := runCLI(t, "", "logs", id, "--hook", "fetch", "--archive-dir", t.TempDir(), "--redis-url", e.cfg.Redis.URL)
	assert.Equal(t, exitNotFound, elsewhere.code)
	assert.Contains(t, elsewhere.stderr, "hook logs stay on the worker host that ran the job")
	assert.Contains(t, elsewhere.stderr, "pipeline ")

	res = e.run(t, "list", "--state", "finished")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, id)

	res = e.run(t, "logs", id)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "fetch hook says hello")

	res = e.run(t, "pipelines", "--json")
	require.Equal(t, exitOK, res.code, res.stderr)
	var p struct{ Pipelines []pipelineJSON }
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &p))
	require.NotEmpty(t, p.Pipelines)
	assert.Contains(t, p.Pipelines[0].TaskQueues, "archiveflow")
	assert.Equal(t, &logBacklogJSON{}, p.Pipelines[0].LogOutbox, "the workers report their (empty) job-log outbox")

	// The same URL again: refused while retained, allowed with --force.
	res = e.run(t, "submit", url)
	assert.Equal(t, exitConflict, res.code, res.stderr)
	assert.Contains(t, res.stderr, "already ran (finished")
	assert.Contains(t, res.stderr, "--force")
	res = e.run(t, "submit", url, "--force", "--wait", "--json")
	require.Equal(t, exitOK, res.code, res.stderr)
	var out struct{ Jobs []outcome }
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	require.Len(t, out.Jobs, 1)
	assert.Equal(t, "finished", string(out.Jobs[0].State))
	require.Len(t, out.Jobs[0].Hooks, 2, "--json carries the results table")
	assert.Equal(t, "slow", out.Jobs[0].Hooks[1].Plugin)
	assert.Equal(t, "gate opened", out.Jobs[0].Hooks[1].Output)
}

func TestRunningJobCanBeSteeredAndAborted(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("steer")
	id := identOf(t, url)

	res := e.run(t, "submit", url, "--concurrency", "1", "--host-steps")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Eventually(t, func() bool { return e.status(t, id).CurrentStep == 2 }, eventually, 50*time.Millisecond)
	// Steps 1 and 2 run as one host-steps segment (--host-steps): status
	// still shows each hook as it is, the first done
	// with its result, the second running (the segment's heartbeat). The
	// workflow itself learns the first result only when the segment ends:
	// when the gated hook times out (hooks.timeout, 60 s), so the poll's
	// deadline is well inside that.
	require.Eventually(t, func() bool {
		j := e.status(t, id)
		return len(j.Hooks) == 2 && j.Hooks[0].Phase == workflows.PhaseDone && j.Hooks[0].Status == model.StatusSucceeded &&
			j.Hooks[0].Output == "page.txt" && j.Hooks[1].Phase == workflows.PhaseRunning
	}, 30*time.Second, 50*time.Millisecond, "per-hook progress inside a host-steps segment")

	res = e.run(t, "submit", url)
	assert.Equal(t, exitConflict, res.code)
	assert.Contains(t, res.stderr, "is already active: abort it first")

	res = e.run(t, "set", id, "concurrency=3", "delay_min=10", "delay_max=20ms")
	require.Equal(t, exitOK, res.code, res.stderr)
	j := e.status(t, id)
	assert.Equal(t, 3, j.Settings.Concurrency)
	assert.Equal(t, 10, j.Settings.DelayMinMS)
	assert.Equal(t, 20, j.Settings.DelayMaxMS)

	res = e.run(t, "set", id, "delay_max=1")
	assert.Equal(t, exitUsage, res.code, "delay_max below the job's delay_min")
	assert.Contains(t, res.stderr, "delay_max 1 ms: must be >= delay_min (10 ms)")

	res = e.run(t, "ignore", "add", id, `\.pdf$`)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Equal(t, []string{`\.pdf$`}, e.status(t, id).Settings.Ignores)
	res = e.run(t, "ignore", "add", id, `\.pdf$`)
	assert.Equal(t, exitConflict, res.code)
	res = e.run(t, "ignore", "rm", id, `\.pdf$`)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Empty(t, e.status(t, id).Settings.Ignores)
	res = e.run(t, "ignore", "rm", id, "never-added")
	assert.Equal(t, exitNotFound, res.code)

	res = e.run(t, "abort", id, "--reason", "test")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "abort requested for "+id)
	e.waitState(t, id, "aborted")

	for _, args := range [][]string{{"abort", id}, {"set", id, "concurrency=1"}} {
		res = e.run(t, args...)
		assert.Equal(t, exitConflict, res.code, "%v: %s", args, res.stderr)
		assert.Contains(t, res.stderr, "is already aborted")
	}
}

// TestStatusOfAnExpiredJobIsTemporalsRecord: once a job's hash has expired
// from Redis (an aborted one after 5 s, as ArchiveBot's), status still
// says how it ended, from the workflow Temporal retains, and says so; an
// ident neither knows is exit 3 naming both.
func TestStatusOfAnExpiredJobIsTemporalsRecord(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("expired")
	id := identOf(t, url)
	require.Equal(t, exitOK, e.run(t, "submit", url).code)
	require.Eventually(t, func() bool { return e.status(t, id).CurrentStep == 2 }, eventually, 50*time.Millisecond)
	require.Equal(t, exitOK, e.run(t, "abort", id, "--reason", "gone soon").code)
	e.waitState(t, id, "aborted")
	ctx := context.Background()
	require.NoError(t, e.st.b.Redis.PExpire(ctx, id, time.Millisecond).Err(), "the hash expires, as after redis.retain_aborted")
	require.Eventually(t, func() bool { return e.st.b.Redis.Exists(ctx, id).Val() == 0 }, eventually, 10*time.Millisecond)

	res := e.run(t, "status", id)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, id+"  "+url)
	assert.Contains(t, res.stdout, "note:     Redis no longer has the job (its hash expired after its retention, or was purged): this is Temporal's record of its workflow (")
	assert.Contains(t, res.stdout, "state:    aborted (snapshot): aborted: gone soon")
	assert.Regexp(t, `(?m)^  1     fetch\s+succeeded  1\s+\d+\.\ds\s+page\.txt$`, res.stdout, "the hooks' results table")
	assert.Contains(t, res.stdout, "Web UI:   "+e.cfg.Temporal.UIURL+"/namespaces/default/workflows/"+id)
	j := e.status(t, id)
	assert.Equal(t, sourceTemporal, j.Source)
	assert.Equal(t, "aborted", string(j.State))
	assert.Equal(t, url, j.URL)
	assert.Equal(t, id, j.WorkflowID)
	assert.NotEmpty(t, j.RunID)
	assert.False(t, j.FinishedAt.IsZero(), "the workflow's close time")
	assert.EqualValues(t, 1, j.HooksSucceeded, "fetch ran; slow was cut by the abort")
	require.Len(t, j.Hooks, 2)
	assert.Equal(t, model.StatusSucceeded, j.Hooks[0].Status)

	// The commands that need the Redis record say how the job ended, which
	// retention expired the record, and what to do instead.
	ended := "job " + id + " (" + url + ") ended aborted at " + j.FinishedAt.UTC().Format(time.RFC3339) +
		", and its Redis record is gone: redis.retain_aborted keeps it 5s after the end (or starter purge removed it); starter status " + id + " shows Temporal's record of the job; "
	for _, c := range []struct {
		args []string
		todo string
	}{
		{[]string{"unabort", id}, "un-abort needs that record: raise redis.retain_aborted to un-abort later, or submit the URL again with --force"},
		{[]string{"retry", id}, "a retry needs that record: submit the URL again with --force to archive it afresh"},
		{[]string{"logs", id}, "its log went with it (a hook's files stay: starter logs " + id + " --hook HOOK on its host)"},
	} {
		res = e.run(t, c.args...)
		assert.Equal(t, exitNotFound, res.code, "%v: %s", c.args, res.stdout)
		assert.Equal(t, "starter "+c.args[0]+": "+ended+c.todo+"\n", res.stderr, c.args)
	}

	// Temporal unreachable: still not found, and why it could not look further.
	res = runCLI(t, "", "status", id, "--temporal-address", closedAddr(t), "--redis-url", e.cfg.Redis.URL)
	assert.Equal(t, exitNotFound, res.code, res.stdout)
	assert.Contains(t, res.stderr, "job "+id+": not found in Redis")
	assert.Contains(t, res.stderr, "Temporal, which may still retain its workflow, is unreachable")

	never := identOf(t, jobURL("never-submitted"))
	res = e.run(t, "status", never)
	assert.Equal(t, exitNotFound, res.code, res.stdout)
	assert.Contains(t, res.stderr, "job "+never+": not found in Redis (never submitted, or expired after its retention); Temporal retains no workflow "+never+" either")
}

func TestWaitExitsOneWhenTheJobIsAborted(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("aborted-while-waiting")
	id := identOf(t, url)
	done := make(chan cliResult, 1)
	go func() { done <- e.run(t, "submit", url, "--wait") }()
	require.Eventually(t, func() bool {
		r := e.run(t, "status", id, "--json")
		return r.code == exitOK && strings.Contains(r.stdout, `"current_step": 2`)
	}, eventually, 50*time.Millisecond)
	require.Equal(t, exitOK, e.run(t, "abort", id).code)
	res := <-done
	assert.Equal(t, exitJobFailed, res.code, res.stdout)
	assert.Contains(t, res.stdout, id+"  ABORTED")
	assert.Contains(t, res.stderr, "1 of 1 job(s) did not finish successfully")
}

func TestLogsFollowStreamsUntilTheJobEnds(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("follow")
	id := identOf(t, url)
	require.Equal(t, exitOK, e.run(t, "submit", url).code)
	e.waitState(t, id, "active")

	done := make(chan cliResult, 1)
	go func() { done <- e.run(t, "logs", "-f", id) }()
	require.Eventually(t, func() bool { return e.status(t, id).CurrentStep == 2 }, eventually, 50*time.Millisecond)
	e.open(t, id)
	select {
	case res := <-done:
		require.Equal(t, exitOK, res.code, res.stderr)
		assert.Contains(t, res.stdout, "fetch hook says hello")
		assert.Contains(t, res.stdout, "slow hook waiting for its gate")
	case <-time.After(eventually):
		t.Fatal("logs -f did not end when the job finished")
	}
}

func TestDelayedSubmissionIsScheduledWithPriority(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("later")
	id := identOf(t, url)
	res := e.run(t, "submit", url, "--delay", "1h", "--nice", "10", "--json")
	require.Equal(t, exitOK, res.code, res.stderr)
	var out struct{ Jobs []submitted }
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	require.Len(t, out.Jobs, 1)
	assert.Equal(t, 5, out.Jobs[0].PriorityKey)
	assert.WithinDuration(t, time.Now().Add(time.Hour), out.Jobs[0].StartsAt, time.Minute)

	score, err := e.st.b.Redis.ZScore(context.Background(), e.st.b.Store.Keys().Scheduled(), id).Result()
	require.NoError(t, err, "job must be in the scheduled index")
	assert.InDelta(t, float64(time.Now().Add(time.Hour).Unix()), score, 60)

	desc, err := e.st.b.Temporal.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	info := desc.GetWorkflowExecutionInfo()
	assert.EqualValues(t, 5, info.GetPriority().GetPriorityKey())
	assert.Equal(t, time.Hour, info.GetExecutionTime().AsTime().Sub(info.GetStartTime().AsTime()).Round(time.Minute))
	require.NoError(t, e.st.b.Temporal.TerminateWorkflow(context.Background(), id, "", "test cleanup"))
}

func TestFailedStartLeavesNothingBehind(t *testing.T) {
	e := startSharedStack(t)
	url := jobURL("clash")
	id := identOf(t, url)
	// A workflow with the job's ident already runs in Temporal but Redis
	// has no job: the Redis job created by submit must be withdrawn.
	_, err := e.st.b.Temporal.ExecuteWorkflow(context.Background(),
		client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls-this", StartDelay: time.Hour}, "Unregistered")
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.st.b.Temporal.TerminateWorkflow(context.Background(), id, "", "test cleanup") })

	first := jobURL("first-of-two")
	res := e.run(t, "submit", first, url)
	assert.Equal(t, exitConflict, res.code, res.stderr)
	assert.Contains(t, res.stderr, "already running in Temporal")
	assert.Contains(t, res.stderr, "withdrawn")
	for _, u := range []string{url, first} {
		r := e.run(t, "status", u)
		assert.Equal(t, exitNotFound, r.code, "job of %s must be withdrawn: %s", u, r.stdout)
	}
	// Temporal keeps both workflows; neither is a job's record.
	r := e.run(t, "status", url)
	assert.Contains(t, r.stderr, "Temporal's workflow "+id+" is a Unregistered, not an archiveflow job")
	r = e.run(t, "status", first)
	assert.Contains(t, r.stderr, "its submission was withdrawn ("+withdrawnReason+")")
}

// TestWebUIListsTheJobWithSearchAttributes loads the dev stack's Web UI in
// headless Chromium and checks that the workflow list shows the job.
func TestWebUIListsTheJobWithSearchAttributes(t *testing.T) {
	browser := chromium(t)
	e := startSharedStack(t)
	url := jobURL("ui")
	id := identOf(t, url)
	e.open(t, id)
	require.Equal(t, exitOK, e.run(t, "submit", url, "--wait").code)

	// Filtering by three of the search attributes proves they are set.
	query := fmt.Sprintf(`ArchiveflowIdent=%q AND ArchiveflowURL=%q AND ArchiveflowPool="default"`, id, url)
	dom := e.webUIList(t, browser, query, id)
	assert.Contains(t, dom, "SnapshotWorkflow")
	assert.Contains(t, dom, "Completed")

	// By default each hook is its own activity: the run's Event History
	// has a RunHook row per hook, its summary the hook's file name, and no
	// host-steps segment.
	j := e.status(t, id)
	require.NotEmpty(t, j.RunID)
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	history := webui.HistoryURL(e.cfg.Temporal.UIURL, "default", id, j.RunID)
	dom, err := webui.WaitListed(ctx, browser, history, "on_Snapshot__20_slow.sh", time.Second)
	require.NoError(t, err)
	text := webui.Text(dom)
	for _, hook := range []string{"on_Snapshot__10_fetch.sh", "on_Snapshot__20_slow.sh"} {
		assert.Contains(t, text, "Activity Type RunHook Summary "+hook, "the Web UI shows %s as its own activity", hook)
	}
	assert.NotContains(t, text, "RunSteps")
}

// A hook's Snapshot record sets the job's title: status shows it, and so
// does the run's page in the Web UI (its memo, once the run has ended),
// non-ASCII intact, read in headless Chromium.
func TestWebUIShowsTheTitleAHookSet(t *testing.T) {
	browser := chromium(t)
	e := startSharedStack(t)
	url := jobURL("titled")
	id := identOf(t, url)
	e.open(t, id)
	require.Equal(t, exitOK, e.run(t, "submit", url, "--wait").code)
	const title = "Tïtled by a hook"
	assert.Equal(t, title, e.status(t, id).Title)

	j := e.status(t, id)
	require.NotEmpty(t, j.RunID)
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	page := webui.MetadataURL(e.cfg.Temporal.UIURL, "default", id, j.RunID)
	dom, err := webui.WaitListed(ctx, browser, page, "Tïtled", time.Second)
	require.NoError(t, err, "the Web UI shows the run's details")
	assert.Contains(t, webui.Text(dom), `"title" : "`+title+`"`, "the run's memo")
}

// A job that failed is a Failed workflow: the Web UI's list query for
// failed workflows finds it and shows it so, and --wait still reads the
// job's Status from the failure.
func TestWebUIShowsAFailedJobAsFailed(t *testing.T) {
	browser := chromium(t)
	e := startSharedStack(t)
	url := jobURL("doomed")
	id := identOf(t, url)
	require.NoError(t, os.WriteFile(filepath.Join(e.gates, id), []byte("fail"), 0o644))

	res := e.run(t, "submit", url, "--wait")
	assert.Equal(t, exitJobFailed, res.code, res.stdout)
	assert.Contains(t, res.stdout, id+"  FAILED")
	assert.Contains(t, res.stdout, "hooks: 2 total, 0 succeeded, 2 failed", "the Status came with the failure")
	assert.Regexp(t, `(?m)^\s*error:\s+every hook failed$`, res.stdout)
	assert.Equal(t, "failed", string(e.status(t, id).State))

	dom := e.webUIList(t, browser, fmt.Sprintf(`ArchiveflowIdent=%q AND ExecutionStatus="Failed"`, id), id)
	assert.Contains(t, dom, "Failed")
	assert.NotContains(t, dom, "Completed")
}

// chromium is the headless browser the Web UI tests use; without one they
// are skipped.
func chromium(t *testing.T) string {
	t.Helper()
	browser, err := webui.Chromium()
	if err != nil {
		t.Skip(err)
	}
	return browser
}

// webUIList loads the Web UI's workflow list for query in headless
// browser until it shows a row of workflow id, and returns the page.
func (e *stackEnv) webUIList(t *testing.T, browser, query, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	page := webui.WorkflowsURL(e.cfg.Temporal.UIURL, "default", query)
	dom, err := webui.WaitListed(ctx, browser, page, webui.WorkflowLink("default", id), time.Second)
	require.NoError(t, err, "the Web UI lists %s for %s", id, query)
	return dom
}

// The stack's first lines name a tagged pool's tag queues.
func TestPoolNamesShowTagQueues(t *testing.T) {
	c := config.Default()
	c.Pools[0].Tags = []string{"big"}
	assert.Equal(t, "default→archiveflow+archiveflow#big", poolNames(&c))
	c.Pools[0].MatchOnly = true
	assert.Equal(t, "default→archiveflow#big", poolNames(&c))
}
