package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

func newRedisStore(t *testing.T) (*RedisStore, *rkeys.Store) {
	t.Helper()
	srv := testredis.Start(t)
	rs, err := rkeys.NewStore(srv.Client(), rkeys.Options{Host: "host-1", PID: 42}, zap.NewNop())
	require.NoError(t, err)
	return &RedisStore{Redis: rs, PipelineID: "abcdef"}, rs
}

// Every write the workflow repeats on retry leaves Redis as one write would.
func TestRedisStoreWritesAreRepeatSafe(t *testing.T) {
	ctx := context.Background()
	s, rs := newRedisStore(t)
	const ident = "job1"
	require.NoError(t, rs.CreateJob(ctx, rkeys.Job{Ident: ident, URL: "https://example.com/", FetchDepth: "shallow",
		Settings: model.Settings{Concurrency: 2}, WorkflowID: ident}))
	a, err := New(nil, nil, s, zap.NewNop(), Options{})
	require.NoError(t, err)

	twice := func(f func() error) {
		t.Helper()
		require.NoError(t, f())
		require.NoError(t, f())
	}
	twice(func() error {
		return a.SetJobState(ctx, JobStateInput{Ident: ident, State: model.StateActive, WorkflowID: ident, RunID: "run1", TaskQueue: "q@host", Key: "k"})
	})
	twice(func() error { return a.SetStep(ctx, StepInput{Ident: ident, Step: 3, HooksTotal: 4}) })
	res := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__30_wget.sh", Step: 3, Status: model.StatusSucceeded,
		Attempts: 1, OutputBytes: 100, StartedAt: time.Now(), EndedAt: time.Now()}
	responses := []model.Response{{Status: 200, Bytes: 10}, {Status: 404, Bytes: 1}}
	twice(func() error {
		return s.RecordResult(ctx, ResultInput{Ident: ident, Result: res, Key: "run1/step-3/wget/x", Responses: responses})
	})
	twice(func() error {
		return a.RecordResult(ctx, ResultInput{Ident: ident, Result: res, Key: "run1/step-3/wget/x"})
	})
	twice(func() error {
		return a.ApplySettings(ctx, SettingsInput{Ident: ident, Settings: model.Settings{Concurrency: 5, Ignores: []string{`\.css$`}}, Version: 1, Key: "s1"})
	})
	entries := []LogEntry{
		{Kind: LogStdout, Time: time.Now(), Hook: "wget/x", Message: "hello"},
		{Kind: LogDownload, Time: time.Now(), Hook: "wget/x", Response: &model.Response{URL: "https://example.com/", Status: 200}},
	}
	twice(func() error { return s.AppendLog(ctx, ident, "run1/act/attempt-1", 0, entries) })
	require.NoError(t, s.Heartbeat(ctx, ident))

	v, err := rs.GetJob(ctx, ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateActive, v.State)
	assert.Equal(t, 3, v.CurrentStep)
	assert.EqualValues(t, 4, v.HooksTotal)
	assert.EqualValues(t, 1, v.HooksSucceeded, "a result repeated under its key counts once")
	assert.EqualValues(t, 2, v.ItemsDownloaded)
	assert.Equal(t, 5, v.Settings.Concurrency)
	assert.Equal(t, []string{`\.css$`}, v.Settings.Ignores)
	assert.EqualValues(t, 1, v.SettingsAge, "an identical settings repeat does not bump settings_age")
	assert.EqualValues(t, 2, v.LogScore, "a repeated log batch is appended once")
	assert.Equal(t, "q@host", v.TaskQueue)
	assert.Equal(t, "pipeline:abcdef", v.PipelineID)
	log, err := rs.ReadLog(ctx, ident, 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 2)
	assert.Equal(t, "[wget/x] hello", log[0].Packet.Message)
	assert.Equal(t, 200, log[1].Packet.ResponseCode)

	twice(func() error {
		return a.FinishJob(ctx, FinishInput{Ident: ident, State: model.StateFailed, Error: "every hook failed", Key: "run1/finish"})
	})
	sum, err := rs.Summary(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, sum.Failed, "jobs_failed is bumped once")
	v, err = rs.GetJob(ctx, ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateFailed, v.State)

	// A final job cannot be moved again: no retry can fix that.
	err = a.SetJobState(ctx, JobStateInput{Ident: ident, State: model.StateActive, Key: "k2"})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, ErrTypeNotWritable, appErr.Type())
	assert.True(t, appErr.NonRetryable())
}

func TestRedisStoreMissingJobIsNotRetryable(t *testing.T) {
	s, _ := newRedisStore(t)
	a, err := New(nil, nil, s, zap.NewNop(), Options{})
	require.NoError(t, err)

	err = a.SetStep(context.Background(), StepInput{Ident: "nosuchjob", Step: 1, HooksTotal: 1})

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, ErrTypeNotWritable, appErr.Type())
	assert.Contains(t, appErr.Error(), "nosuchjob")
}
