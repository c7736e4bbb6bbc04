//go:build dev

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// flakyHook is sh that fails transiently (exit 1, no record) on its first
// fails runs, counted in the file tries, each run printing one Response;
// then it succeeds. fails < 0: it never succeeds.
func flakyHook(tries string, fails int) string {
	return `n=$(( $(cat "` + tries + `" 2>/dev/null || echo 0) + 1 )); echo $n > "` + tries + `"
echo '{"type":"Response","url":"http://127.0.0.1:1/x","status":200,"bytes":10}'
if [ ` + strconv.Itoa(fails) + ` -lt 0 ] || [ $n -le ` + strconv.Itoa(fails) + ` ]; then echo "try $n fails" >&2; exit 1; fi
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"try '$n'"}'
`
}

// retryLaterStack is a stack of the hooks in plugins and one that
// succeeds (plugin ok), whose hooks get attempts in-run and one short
// later retry per delay.
func retryLaterStack(t *testing.T, plugins string, attempts int, delays ...time.Duration) *Stack {
	writeHook(t, plugins, "ok", "on_Snapshot__10_ok.sh", `echo '{"type":"ArchiveResult","status":"succeeded","output_str":"fine"}'`)
	s := NewStack(t, SharedServer(t), plugins, func(c *config.Config) {
		c.Retry.MaximumAttempts = attempts
		c.Hooks.RetryLater = delays
	})
	s.StartPools(t, nil)
	return s
}

// finalStatus waits for j's workflow, following its later retries' runs,
// and returns the job's final status.
func finalStatus(t *testing.T, s *Stack, j Job) workflows.Status {
	t.Helper()
	require.NoError(t, s.Wait(t, j, 90*time.Second))
	var st workflows.Status
	require.NoError(t, j.Run.Get(t.Context(), &st), "Get follows the later retries' runs")
	return st
}

// A hook failing transiently three times (its three in-run attempts) is
// retried later by itself and succeeds: while it waits the job is in the
// retry_at set and the hook shows as waiting; the counters count each
// hook once (a waiting result is not final, nothing of it is counted).
func TestRetryLaterRetriesAFailingHookByItself(t *testing.T) {
	plugins := t.TempDir()
	tries := filepath.Join(t.TempDir(), "tries")
	writeHook(t, plugins, "flaky", "on_Snapshot__20_flaky.sh", flakyHook(tries, 3))
	s := retryLaterStack(t, plugins, 3, 2*time.Second)
	j := s.Submit(t, "http://example.invalid/retry-later", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The wait: indexed in retry_at, the hook waiting in the status.
	var waiting workflows.HookStatus
	require.Eventually(t, func() bool {
		if s.Redis.ZScore(ctx, "retry_at", j.Ident).Err() != nil {
			return false
		}
		v, err := s.Client.QueryWorkflow(ctx, j.Ident, "", workflows.QueryStatus)
		if err != nil {
			return false
		}
		var st workflows.Status
		if v.Get(&st) != nil || len(st.Hooks) != 2 {
			return false
		}
		waiting = st.Hooks[1]
		return waiting.Phase == workflows.PhaseWaiting
	}, 60*time.Second, 20*time.Millisecond, "the hook never waited for a later retry")
	require.NotNil(t, waiting.Result.RetryAt)
	v, err := s.Store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Zero(t, v.HooksFailed, "a waiting hook is not counted failed")
	assert.False(t, v.State.Final(), "a job whose hook waits has not ended")

	st := finalStatus(t, s, j)
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, model.StatusSucceeded, resultsByHook(st)["flaky"].Status)
	assert.Equal(t, "try 4", resultsByHook(st)["flaky"].OutputStr)
	data, err := os.ReadFile(tries)
	require.NoError(t, err)
	assert.Equal(t, "4\n", string(data), "three in-run attempts, then one later")

	v, err = s.Store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateFinished, v.State)
	assert.EqualValues(t, 2, v.HooksSucceeded)
	assert.Zero(t, v.HooksFailed)
	assert.EqualValues(t, 1, v.ItemsDownloaded, "the final attempt's fetch, as for an in-run retry")
	assert.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val())
	ev := s.Redis.HGetAll(ctx, "event_counters").Val()
	assert.Equal(t, "2", ev["all"], "one event per hook")
	assert.Empty(t, ev["failed"])
	assert.Zero(t, s.Redis.ZCard(ctx, "retry_at").Val())
}

// When the last later retry fails too, the job is final with the hook
// failed (counted once), in the snapshot's index, and out of retry_at.
func TestRetryLaterEndsFailedAfterTheLastDelay(t *testing.T) {
	plugins := t.TempDir()
	tries := filepath.Join(t.TempDir(), "tries")
	writeHook(t, plugins, "flaky", "on_Snapshot__20_flaky.sh", flakyHook(tries, -1))
	s := retryLaterStack(t, plugins, 1, time.Second, time.Second)
	j := s.Submit(t, "http://example.invalid/retry-later-fails", nil)
	st := finalStatus(t, s, j)
	ctx := t.Context()
	assert.Equal(t, model.StateFinished, st.State)
	flaky := resultsByHook(st)["flaky"]
	assert.Equal(t, model.StatusFailed, flaky.Status)
	assert.Nil(t, flaky.RetryAt)
	data, err := os.ReadFile(tries)
	require.NoError(t, err)
	assert.Equal(t, "3\n", string(data), "one in-run attempt, then two later ones")

	v, err := s.Store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateFinished, v.State)
	assert.EqualValues(t, 1, v.HooksSucceeded)
	assert.EqualValues(t, 1, v.HooksFailed)
	assert.EqualValues(t, 1, v.ItemsDownloaded)
	assert.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val())
	ev := s.Redis.HGetAll(ctx, "event_counters").Val()
	assert.Equal(t, "2", ev["all"])
	assert.Equal(t, "1", ev["failed"])
	assert.Zero(t, s.Redis.ZCard(ctx, "retry_at").Val())
	assert.Zero(t, s.Redis.HExists(ctx, j.Ident, "retry_at").Val())
	assert.True(t, s.Redis.SIsMember(ctx, "state:finished", j.Ident).Val(), "in the finished jobs' index")

	var doc struct {
		ArchiveResults []model.ArchiveResult `json:"archive_results"`
	}
	b, err := os.ReadFile(filepath.Join(s.SnapDir(j), "index.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	byPlugin := map[string]model.ArchiveResult{}
	for _, r := range doc.ArchiveResults {
		byPlugin[r.Plugin] = r
	}
	assert.Equal(t, model.StatusFailed, byPlugin["flaky"].Status, "the snapshot's index has the hook failed")
	assert.Equal(t, model.StatusSucceeded, byPlugin["ok"].Status)
}

// A hook exiting 1 after printing a Snapshot link, a Tag and a partial
// ArchiveResult keeps all three (the result's output and file, the
// records in its stdout log) and is retried: in the run, then later.
func TestPartialSuccessIsKeptAndRetried(t *testing.T) {
	plugins := t.TempDir()
	tries := filepath.Join(t.TempDir(), "tries")
	writeHook(t, plugins, "partial", "on_Snapshot__20_partial.sh", `echo x >> "`+tries+`"
echo half > partial.html
echo '{"type":"Snapshot","url":"https://example.com/found"}'
echo '{"type":"Tag","name":"partial-tag"}'
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"partial.html"}'
exit 1
`)
	s := retryLaterStack(t, plugins, 2, time.Second)
	j := s.Submit(t, "http://example.invalid/partial", nil)
	st := finalStatus(t, s, j)
	ctx := t.Context()
	res := resultsByHook(st)["partial"]
	assert.Equal(t, model.StatusFailed, res.Status, "every try exited 1")
	assert.Equal(t, "partial.html", res.OutputStr, "the partial ArchiveResult is kept")
	assert.Contains(t, res.Error, "partial")
	require.NotEmpty(t, res.Outputs)
	assert.Equal(t, "partial.html", res.Outputs[0].Path)
	data, err := os.ReadFile(tries)
	require.NoError(t, err)
	assert.Equal(t, "x\nx\nx\nx\n", string(data), "two attempts in the run, two after the later delay")

	logs, err := filepath.Glob(filepath.Join(s.SnapDir(j), "partial", "on_Snapshot__20_partial.*.stdout.log"))
	require.NoError(t, err)
	require.Len(t, logs, 4, "each attempt's records are kept")
	for _, l := range logs {
		b, err := os.ReadFile(l)
		require.NoError(t, err)
		assert.Contains(t, string(b), `"url":"https://example.com/found"`)
		assert.Contains(t, string(b), `"name":"partial-tag"`)
	}
	v, err := s.Store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.EqualValues(t, 1, v.HooksFailed)
}
