package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/outbox"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// newRedisStore returns a RedisStore on a fresh Redis, its rkeys.Store and
// a raw client of the same server.
func newRedisStore(t *testing.T) (*RedisStore, *rkeys.Store, *redis.Client) {
	t.Helper()
	srv := testredis.Start(t)
	c := srv.Client()
	cfg := config.Default()
	opts := backend.StoreOptions(&cfg)
	opts.Host, opts.PID = "host-1", 42
	rs, err := rkeys.NewStore(c, opts, zap.NewNop())
	require.NoError(t, err)
	return &RedisStore{Redis: rs, PipelineID: "abcdef"}, rs, c
}

// Every write the workflow repeats on retry leaves Redis as one write would.
func TestRedisStoreWritesAreRepeatSafe(t *testing.T) {
	ctx := context.Background()
	s, rs, rdb := newRedisStore(t)
	const ident = "job1"
	require.NoError(t, rs.CreateJob(ctx, rkeys.Job{Ident: ident, URL: "https://example.com/", FetchDepth: "shallow",
		Settings: model.Settings{Concurrency: 2}, WorkflowID: ident}))
	a, err := activities.NewPool(s, s, nil, "q@host", zap.NewNop())
	require.NoError(t, err)

	twice := func(f func() error) {
		t.Helper()
		require.NoError(t, f())
		require.NoError(t, f())
	}
	twice(func() error {
		return a.SetJobState(ctx, activities.JobStateInput{Ident: ident, State: model.StateActive, WorkflowID: ident, RunID: "run1", TaskQueue: "q@host", Key: "k"})
	})
	twice(func() error { return a.SetStep(ctx, activities.StepInput{Ident: ident, Step: 3, HooksTotal: 4}) })
	res := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__30_wget.sh", Step: 3, Status: model.StatusSucceeded,
		Attempts: 1, OutputBytes: 100, StartedAt: time.Now(), EndedAt: time.Now()}
	responses := []model.Response{{Status: 200, Bytes: 10}, {Status: 404, Bytes: 1}}
	twice(func() error {
		return s.RecordResult(ctx, activities.ResultInput{Ident: ident, Result: res, Key: "run1/step-3/wget/x", Responses: responses})
	})
	twice(func() error {
		return a.RecordResult(ctx, activities.ResultInput{Ident: ident, Result: res, Key: "run1/step-3/wget/x"})
	})
	twice(func() error {
		return a.ApplySettings(ctx, activities.SettingsInput{Ident: ident, Settings: model.Settings{Concurrency: 5, Ignores: []string{`\.css$`}}, Version: 1, Key: "s1"})
	})
	entries := []activities.LogEntry{
		{Kind: activities.LogStdout, Time: time.Now(), Hook: "wget/x", Message: "hello"},
		{Kind: activities.LogDownload, Time: time.Now(), Hook: "wget/x", Response: &model.Response{URL: "https://example.com/", Status: 200}},
	}
	twice(func() error { return s.AppendLog(ctx, ident, "run1/act/attempt-1", 0, entries) })
	require.NoError(t, s.Heartbeat(ctx, ident))

	v, err := rs.GetJob(ctx, ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateActive, v.State)
	assert.Equal(t, 3, v.CurrentStep)
	assert.EqualValues(t, 4, v.HooksTotal)
	assert.EqualValues(t, 1, v.HooksSucceeded, "a result repeated under its key counts once")
	assert.EqualValues(t, 1, v.ItemsDownloaded, "the 200, not the 404")
	assert.EqualValues(t, 11, v.BytesDownloaded, "bytes fetched (both answers), not the output's 100")
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
		return a.FinishJob(ctx, activities.FinishInput{Ident: ident, State: model.StateFailed, Error: "every hook failed", Key: "run1/finish"})
	})
	assert.Equal(t, "1", rdb.Get(ctx, rs.Keys().JobsCounter(model.StateFailed)).Val(), "jobs_failed is bumped once")
	v, err = rs.GetJob(ctx, ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateFailed, v.State)

	// A final job cannot be moved again: no retry can fix that.
	err = a.SetJobState(ctx, activities.JobStateInput{Ident: ident, State: model.StateActive, Key: "k2"})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.ErrTypeNotWritable, appErr.Type())
	assert.True(t, appErr.NonRetryable())
}

func TestRedisStoreMissingJobIsNotRetryable(t *testing.T) {
	s, _, _ := newRedisStore(t)
	a, err := activities.NewPool(s, s, nil, "q@host", zap.NewNop())
	require.NoError(t, err)

	err = a.SetStep(context.Background(), activities.StepInput{Ident: "nosuchjob", Step: 1, HooksTotal: 1})

	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.ErrTypeNotWritable, appErr.Type())
	assert.Contains(t, appErr.Error(), "nosuchjob")
}

// Against real Redis: a spooled batch that reached Redis before its file was
// removed is not appended twice, and a batch of a job that is gone is
// refused for good.
func TestLogDeliveryAgainstRedis(t *testing.T) {
	ctx := context.Background()
	s, rs, _ := newRedisStore(t)
	require.NoError(t, rs.CreateJob(ctx, rkeys.Job{Ident: "job1", URL: "https://example.com/", FetchDepth: "shallow",
		Settings: model.Settings{Concurrency: 1}, WorkflowID: "job1"}))
	deliver := activities.LogDelivery(s)
	b, err := json.Marshal(activities.LogBatch{Ident: "job1", Key: "run/act/attempt-1", Seq: 3,
		Entries: []activities.LogEntry{{Kind: activities.LogStdout, Time: time.Now(), Hook: "p/h", Message: "late line"}}})
	require.NoError(t, err)

	require.NoError(t, deliver(ctx, b))
	require.NoError(t, deliver(ctx, b))

	log, err := rs.ReadLog(ctx, "job1", 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)
	assert.Equal(t, "[p/h] late line", log[0].Packet.Message)

	gone, err := json.Marshal(activities.LogBatch{Ident: "nosuchjob", Key: "k", Seq: 0, Entries: []activities.LogEntry{{Kind: activities.LogStdout, Message: "x"}}})
	require.NoError(t, err)
	err = deliver(ctx, gone)
	assert.True(t, outbox.IsPermanent(err), "%v", err)
	assert.True(t, errors.Is(err, activities.ErrNotWritable))
	assert.True(t, strings.Contains(err.Error(), "nosuchjob"), "%v", err)
}

// Settings that the layout refuses (an empty ignore pattern, reachable
// through a raw set_settings signal or update) are not writable: the
// activity reports them non-retryable instead of retrying forever.
func TestRedisStoreInvalidSettingsAreNotWritable(t *testing.T) {
	ctx := context.Background()
	s, rs, _ := newRedisStore(t)
	require.NoError(t, rs.CreateJob(ctx, rkeys.Job{Ident: "job1", URL: "https://example.com/", FetchDepth: "shallow",
		Settings: model.Settings{Concurrency: 1}, WorkflowID: "job1"}))

	err := s.ApplySettings(ctx, activities.SettingsInput{Ident: "job1", Settings: model.Settings{Concurrency: 1, Ignores: []string{""}}, Version: 1, Key: "s1"})

	require.ErrorIs(t, err, activities.ErrNotWritable)
	assert.ErrorContains(t, err, `ignore pattern "": must not be empty`)
}

// The host registry reads the live pipeline:ID records and their TTL.
func TestQueueLeaseReadsPipelineRecords(t *testing.T) {
	ctx := context.Background()
	s, rs, _ := newRedisStore(t)
	p := rkeys.Pipeline{ID: rkeys.PipelineID("host-1", "host-1.example", 42), Hostname: "host-1", PID: 42,
		TaskQueues: []string{"archiveflow-default", "archiveflow-default@host-1-42"}, Status: "running"}

	lease, err := s.QueueLease(ctx, "archiveflow-default@host-1-42")
	require.NoError(t, err)
	assert.Zero(t, lease, "no pipeline registered")

	require.NoError(t, rs.RegisterPipeline(ctx, p))
	lease, err = s.QueueLease(ctx, "archiveflow-default@host-1-42")
	require.NoError(t, err)
	assert.Positive(t, lease, "a busy host keeps its record fresh")
	lease, err = s.QueueLease(ctx, "archiveflow-default@host-2-7")
	require.NoError(t, err)
	assert.Zero(t, lease, "another host's queue")

	require.NoError(t, rs.UnregisterPipeline(ctx, p))
	lease, err = s.QueueLease(ctx, "archiveflow-default@host-1-42")
	require.NoError(t, err)
	assert.Zero(t, lease, "a stopped host")
}

// A crawl finished at a limit is finished with the limit named in the job
// hash and its log; a limit with another final state is refused for good.
func TestFinishJobAtALimit(t *testing.T) {
	ctx := context.Background()
	s, rs, _ := newRedisStore(t)
	const ident = "crawl1"
	require.NoError(t, rs.CreateJob(ctx, rkeys.Job{Ident: ident, URL: "https://example.com/", FetchDepth: model.FetchInf,
		Settings: model.Settings{Concurrency: 2, MaxPages: 100}, WorkflowID: ident}))
	require.NoError(t, rs.SetState(ctx, ident, model.StateActive))
	err := s.FinishJob(ctx, activities.FinishInput{Ident: ident, State: model.StateFailed, Key: "f", Limit: "page limit 100 reached"})
	require.ErrorIs(t, err, activities.ErrNotWritable)
	for range 2 {
		require.NoError(t, s.FinishJob(ctx, activities.FinishInput{Ident: ident, State: model.StateFinished, Key: "f", Limit: "page limit 100 reached"}))
	}
	v, err := rs.GetJob(ctx, ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateFinished, v.State)
	assert.Equal(t, "page limit 100 reached", v.Limit)
	entries, err := rs.ReadLog(ctx, ident, 0, 10)
	require.NoError(t, err)
	var lines []string
	for _, e := range entries {
		lines = append(lines, e.Packet.Message)
	}
	assert.Contains(t, strings.Join(lines, "\n"), "archiveflow: job finished: page limit 100 reached")
}

// A page attempt's hook results are events once, with the outcome the
// frontier applies: a repeated Complete (a retried activity) adds none.
func TestCompleteRecordsThePageHooksEventsOnce(t *testing.T) {
	ctx := context.Background()
	const ident = "crawl1"
	cs, c := newCrawlJob(t, ident, model.Settings{Concurrency: 2})
	seed, err := cs.SeedCrawl(ctx, activities.SeedCrawlInput{Ident: ident, URL: "https://example.com/", MaxDepth: 1, PageAttempts: 3, Token: "t"})
	require.NoError(t, err)
	require.NotNil(t, seed.Page)
	now := time.Now()
	tally := activities.PageTally{PageURL: seed.Page.URL, Results: []model.ArchiveResult{
		{Plugin: "pagefetch", Hook: "on_Snapshot__21_pagefetch.sh", Status: model.StatusSucceeded, StartedAt: now, EndedAt: now},
		{Plugin: "title", Hook: "on_Snapshot__54_title.sh", Status: model.StatusNoResults, StartedAt: now, EndedAt: now},
	}}
	for range 2 {
		_, err := cs.Complete(ctx, ident, seed.Page.ID, seed.Page.Attempt, activities.PageSucceeded, "", time.Time{}, tally)
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]string{"all": "2", "succeeded": "1", "noresults": "1"}, c.HGetAll(ctx, "event_counters").Val())
	keys := c.Keys(ctx, "events_archive:*").Val()
	require.Len(t, keys, 1)
	evs := c.LRange(ctx, keys[0], 0, -1).Val()
	require.Len(t, evs, 1, "the noresults hook's warning; the ok one is only counted (redis.page_events problems)")
	assert.Contains(t, evs[0], `"page":"https://example.com/"`)
	assert.Contains(t, evs[0], `"state":"warning"`)
}

// A final result feeds the fleet's health as an outcome of this worker's
// host, exactly once across the host's write and the workflow's fallback
// write under the same key.
func TestRecordResultFeedsFleetHealthOnce(t *testing.T) {
	ctx := context.Background()
	s, rdb, cfg := newHealthStore(t)
	res := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__30_wget.sh", Step: 3, Status: model.StatusFailed, ExitCode: 127,
		Error: "wget: not found", Attempts: 3, StartedAt: time.Now(), EndedAt: time.Now()}
	a, err := activities.NewPool(s, s, nil, "q@host", zap.NewNop())
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, s.RecordResult(ctx, activities.ResultInput{Ident: "job1", Result: res, Key: "run1/step-3/wget/x"}))
		require.NoError(t, a.RecordResult(ctx, activities.ResultInput{Ident: "job1", Result: res, Key: "run1/step-3/wget/x"}))
	}
	assert.Equal(t, "critical", rdb.HGet(ctx, "check:host-a:wget", "state").Val())
	assert.Equal(t, "critical", rdb.HGet(ctx, "check:job1:on_Snapshot__30_wget.sh", "state").Val())
	assert.Equal(t, "1", rdb.HGet(ctx, "check:host-a:wget", "count").Val(), "one outcome")
	assert.EqualValues(t, 1, rdb.LLen(ctx, cfg.Flapjack.Notifications).Val(), "one problem notification")
}

// A Redis outage between the result's write and its retry (the activity's,
// or the workflow's fallback write under the same key) leaves the fleet's
// health as one write would: one outcome, one state change, one problem
// notification.
func TestFleetHealthAfterARedisOutageIsAsWithout(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	rdb := srv.Client()
	cfg := config.Default()
	cfg.Flapjack.CriticalAfter = 1
	cfg.Redis.MaxRetries = 0
	opts := backend.StoreOptions(&cfg)
	opts.Host, opts.PID = "host-1", 42
	rs, err := rkeys.NewStore(rdb, opts, zap.NewNop())
	require.NoError(t, err)
	h, err := fleethealth.FromConfig(rs, &cfg)
	require.NoError(t, err)
	s := &RedisStore{Redis: rs, PipelineID: "abcdef", Health: h, Host: "host-a"}
	require.NoError(t, rs.CreateJob(ctx, rkeys.Job{Ident: "job1", URL: "https://example.com/", FetchDepth: "shallow",
		Settings: model.Settings{Concurrency: 2}, WorkflowID: "job1"}))
	res := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__30_wget.sh", Status: model.StatusFailed, ExitCode: 8,
		Error: "wget: server error", Attempts: 1, StartedAt: time.Now(), EndedAt: time.Now(), Host: "host-a"}
	in := activities.ResultInput{Ident: "job1", Result: res, Key: "run1/step-3/wget/x"}

	require.NoError(t, srv.Stop())
	require.Error(t, s.RecordResult(ctx, in), "Redis is down")
	require.NoError(t, srv.Restart())
	require.Eventually(t, func() bool { return s.RecordResult(ctx, in) == nil }, 30*time.Second, 100*time.Millisecond)
	require.NoError(t, s.RecordResult(ctx, in), "a retry after the write changes nothing")

	assert.Equal(t, "critical", rdb.HGet(ctx, "check:host-a:wget", "state").Val())
	assert.Equal(t, "1", rdb.HGet(ctx, "check:host-a:wget", "count").Val(), "one outcome")
	assert.EqualValues(t, 1, rdb.LLen(ctx, "host-a:wget:states").Val(), "one state change")
	assert.EqualValues(t, 1, rdb.LLen(ctx, cfg.Flapjack.Notifications).Val(), "one problem notification")
	v, err := rs.GetJob(ctx, "job1")
	require.NoError(t, err)
	assert.EqualValues(t, 1, v.HooksFailed)

	// The outage between the result's write and the health's: the retry's
	// result write is a no-op, its health write the first.
	in.Key = "run1/step-3/wget/y"
	in.Result.Status, in.Result.ExitCode, in.Result.Error = model.StatusSucceeded, 0, ""
	_, err = rs.RecordResult(ctx, "job1", in.Key, in.Result, nil)
	require.NoError(t, err)
	require.NoError(t, s.RecordResult(ctx, in))
	require.NoError(t, s.RecordResult(ctx, in))
	assert.Equal(t, "ok", rdb.HGet(ctx, "check:host-a:wget", "state").Val())
	assert.Equal(t, "2", rdb.HGet(ctx, "check:host-a:wget", "count").Val())
	assert.EqualValues(t, 2, rdb.LLen(ctx, cfg.Flapjack.Notifications).Val(), "one problem, one recovery")
	v, err = rs.GetJob(ctx, "job1")
	require.NoError(t, err)
	assert.EqualValues(t, 1, v.HooksSucceeded, "the result counted once")
}

// A hook that could not start (the workflow's HookConfigError) is a hard
// failure of its host's check.
func TestAHookThatCouldNotStartIsAHardFailure(t *testing.T) {
	ctx := context.Background()
	s, rdb, _ := newHealthStore(t)
	res := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__30_wget.sh", Status: model.StatusFailed, Attempts: 1,
		Error: "run hook wget/on_Snapshot__30_wget.sh: config.json: invalid (type: " + activities.ErrTypeConfig + ", retryable: false)"}
	require.NoError(t, s.RecordResult(ctx, activities.ResultInput{Ident: "job1", Result: res, Key: "k"}))
	assert.Equal(t, "critical", rdb.HGet(ctx, "check:host-a:wget", "state").Val())
}

// newHealthStore is newRedisStore feeding a fleet health (critical after
// one hard failure) as host-a, with the job job1.
func newHealthStore(t *testing.T) (*RedisStore, *redis.Client, config.Config) {
	t.Helper()
	s, rs, rdb := newRedisStore(t)
	cfg := config.Default()
	cfg.Flapjack.CriticalAfter = 1
	h, err := fleethealth.FromConfig(rs, &cfg)
	require.NoError(t, err)
	s.Health, s.Host = h, "host-a"
	require.NoError(t, rs.CreateJob(context.Background(), rkeys.Job{Ident: "job1", URL: "https://example.com/", FetchDepth: "shallow",
		Settings: model.Settings{Concurrency: 2}, WorkflowID: "job1"}))
	return s, rdb, cfg
}

// A crawl page's hook outcomes feed the fleet's health once, with the
// outcome the frontier applies, and keep no repeat-safety key per outcome
// (a crawl has many pages).
func TestCompleteFeedsThePageHooksToFleetHealthOnce(t *testing.T) {
	ctx := context.Background()
	s, rdb, cfg := newHealthStore(t)
	f, err := frontier.New(rdb, s.Redis.Keys(), frontier.Options{})
	require.NoError(t, err)
	cs := &CrawlStore{RedisStore: s, Frontier: f, Log: zap.NewNop()}
	seed, err := cs.SeedCrawl(ctx, activities.SeedCrawlInput{Ident: "job1", URL: "https://example.com/", MaxDepth: 1, PageAttempts: 3, Token: "t"})
	require.NoError(t, err)
	require.NotNil(t, seed.Page)
	now := time.Now()
	tally := activities.PageTally{PageURL: seed.Page.URL, Results: []model.ArchiveResult{
		{Plugin: "title", Hook: "on_Snapshot__54_title.sh", Status: model.StatusFailed, ExitCode: 127, Error: "python3: not found", StartedAt: now, EndedAt: now},
	}}
	opsBefore := rdb.SCard(ctx, s.Redis.Keys().Ops("job1")).Val()
	for range 2 {
		_, err := cs.Complete(ctx, "job1", seed.Page.ID, seed.Page.Attempt, activities.PageSucceeded, "", time.Time{}, tally)
		require.NoError(t, err)
	}
	assert.Equal(t, "critical", rdb.HGet(ctx, "check:host-a:title", "state").Val())
	assert.Equal(t, "1", rdb.HGet(ctx, "check:host-a:title", "count").Val(), "one outcome")
	assert.Equal(t, "critical", rdb.HGet(ctx, "check:job1:on_Snapshot__54_title.sh", "state").Val())
	assert.EqualValues(t, 1, rdb.LLen(ctx, cfg.Flapjack.Notifications).Val(), "one problem notification")
	assert.Equal(t, opsBefore, rdb.SCard(ctx, s.Redis.Keys().Ops("job1")).Val(), "no key kept per page outcome")
}
