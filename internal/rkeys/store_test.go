package rkeys

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

func TestCreateJobWritesLayout(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://Example.com")
	j.Note = "test run"
	j.Settings.UserAgent = "archiveflow-test/1"
	twice(t, e, func() error { return e.store.CreateJob(ctx, j) })

	h := e.rdb.HGetAll(ctx, j.Ident).Val()
	want := map[string]string{
		"url": "http://example.com/", "fetch_depth": "shallow", "slug": "example.com-shallow",
		"log_key": j.Ident + "_log", "ignore_patterns_set_key": j.Ident + "_ignores",
		"started_by": "alice", "started_in": "cli", "note": "test run", "user_agent": "archiveflow-test/1",
		"queued_at": strconv.FormatInt(t0.Unix(), 10), "concurrency": "2", "delay_min": "250", "delay_max": "375",
		"settings_age": "0", "log_score": "0", "heartbeat": "0", "bytes_downloaded": "0", "items_queued": "0",
		"items_downloaded": "0", "error_count": "0", "r1xx": "0", "r2xx": "0", "r3xx": "0", "r4xx": "0", "r5xx": "0", "runk": "0",
		"last_analyzed_log_entry": "0", "last_broadcasted_log_entry": "0", "last_trimmed_log_entry": "0",
		"state": "pending", "current_step": "0", "hooks_total": "20", "hooks_succeeded": "0", "hooks_failed": "0",
		"hooks_skipped": "0", "hooks_noresults": "0", "workflow_id": j.WorkflowID, "run_id": "run-1", "task_queue": "default",
		"ts": strconv.FormatInt(t0.Unix(), 10),
	}
	for k, v := range want {
		assert.Equal(t, v, h[k], "field %s", k)
	}
	for _, absent := range []string{"started_at", "finished_at", "aborted", "failed", "abort_requested", "pipeline_id"} {
		assert.NotContains(t, h, absent, "ArchiveBot treats any present %s as true/set", absent)
	}
	assert.ElementsMatch(t, j.Settings.Ignores, e.rdb.SMembers(ctx, j.Ident+"_ignores").Val())
	assert.Equal(t, []string{j.Ident}, e.rdb.LRange(ctx, "pending", 0, -1).Val())
	assert.Equal(t, []string{j.Ident}, e.rdb.SMembers(ctx, "state:pending").Val())
	assert.Equal(t, float64(t0.Unix()), e.rdb.ZScore(ctx, "time-index", j.Ident).Val())
	assert.Zero(t, e.rdb.Exists(ctx, "scheduled").Val())
	assert.Equal(t, time.Duration(-1), e.rdb.TTL(ctx, j.Ident).Val(), "a live job never expires")
}

func TestCreateJobScheduled(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/later")
	j.NotBefore = t0.Add(time.Hour)
	require.NoError(t, e.store.CreateJob(ctx, j))
	assert.Equal(t, float64(t0.Add(time.Hour).Unix()), e.rdb.ZScore(ctx, "scheduled", j.Ident).Val())
	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	assert.Zero(t, e.rdb.Exists(ctx, "scheduled").Val(), "starting the job unschedules it")
}

func TestCreateJobRefusesDuplicates(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))

	other := j
	other.WorkflowID = "another-submission"
	err := e.store.CreateJob(ctx, other)
	require.ErrorIs(t, err, ErrJobExists)
	assert.Contains(t, err.Error(), "still running")
	other.Replace = true
	require.ErrorIs(t, e.store.CreateJob(ctx, other), ErrJobExists, "a running job is never replaced")

	_, err = e.store.AppendLog(ctx, j.Ident, "b1", []Packet{Stdout(t0, "old")})
	require.NoError(t, err)
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	other.Replace = false
	err = e.store.CreateJob(ctx, other)
	require.ErrorIs(t, err, ErrJobExists)
	assert.Contains(t, err.Error(), "retained")

	other.Replace = true
	require.NoError(t, e.store.CreateJob(ctx, other))
	v, err := e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, model.StatePending, v.State)
	assert.Zero(t, v.LogScore)
	assert.Zero(t, v.TTL, "the fresh job has no expiry")
	assert.Zero(t, e.rdb.Exists(ctx, j.Ident+"_log").Val(), "the old log is gone")
	assert.Zero(t, e.rdb.ZScore(ctx, "scheduled-purge", j.Ident).Val())
	assert.Empty(t, e.rdb.SMembers(ctx, "state:finished").Val())
	assert.Equal(t, "1", e.rdb.Get(ctx, "jobs_completed").Val(), "history counters stay")
}

func TestCreateJobValidation(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	base := testJob(t, "http://example.com/")
	tests := []struct {
		name   string
		mutate func(*Job)
		want   string
	}{
		{"no ident", func(j *Job) { j.Ident = "" }, "ident: must not be empty"},
		{"no url", func(j *Job) { j.URL = "" }, "url: must not be empty"},
		{"bad depth", func(j *Job) { j.FetchDepth = "deep" }, `fetch_depth "deep": must be shallow or inf`},
		{"no op", func(j *Job) { j.WorkflowID = ""; j.CreateOp = "" }, "repeat-safety key"},
		{"bad settings", func(j *Job) { j.Settings.DelayMaxMS = 1 }, "delay_max 1 ms"},
		{"bad ignore", func(j *Job) { j.Settings.Ignores = []string{"(["} }, `ignore pattern "(["`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := base
			tc.mutate(&j)
			err := e.store.CreateJob(ctx, j)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.Empty(t, dump(t, e.rdb), "rejected jobs write nothing")
}

func TestSetStateMovesIndexes(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))

	steps := []struct {
		state            model.JobState
		pending, working []string
	}{
		{model.StateActive, []string{}, []string{j.Ident}},
		{model.StateDraining, []string{}, []string{j.Ident}},
		{model.StatePending, []string{j.Ident}, []string{}},
		{model.StateActive, []string{}, []string{j.Ident}},
	}
	for _, s := range steps {
		e.clock.Add(time.Second)
		twice(t, e, func() error { return e.store.SetState(ctx, j.Ident, s.state) })
		assert.Equal(t, string(s.state), e.rdb.HGet(ctx, j.Ident, "state").Val())
		for _, st := range model.JobStates {
			members := e.rdb.SMembers(ctx, "state:"+string(st)).Val()
			if st == s.state {
				assert.Equal(t, []string{j.Ident}, members, "state:%s", st)
			} else {
				assert.Empty(t, members, "state:%s", st)
			}
		}
		assert.Equal(t, s.pending, e.rdb.LRange(ctx, "pending", 0, -1).Val())
		assert.Equal(t, s.working, e.rdb.LRange(ctx, "working", 0, -1).Val())
	}
	startedAt := e.rdb.HGet(ctx, j.Ident, "started_at").Val()
	assert.Equal(t, unixFloat(t0.Add(time.Second)), startedAt, "started_at is set once, on first activation, as float seconds")

	require.ErrorContains(t, e.store.SetState(ctx, j.Ident, model.StateFinished), "final states are written by Finish")
	require.ErrorContains(t, e.store.SetState(ctx, j.Ident, "bogus"), `job state "bogus"`)
	require.ErrorIs(t, e.store.SetState(ctx, "nosuchjob", model.StateActive), ErrJobNotFound)
	assert.Zero(t, e.rdb.Exists(ctx, "nosuchjob").Val(), "no ghost hash")

	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	require.ErrorIs(t, e.store.SetState(ctx, j.Ident, model.StateActive), ErrJobFinal)
}

func TestStepHooksRunAndHeartbeat(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))

	twice(t, e, func() error { return e.store.SetStep(ctx, j.Ident, 7) })
	twice(t, e, func() error { return e.store.SetHooksTotal(ctx, j.Ident, 33) })
	twice(t, e, func() error {
		return e.store.SetRun(ctx, j.Ident, RunInfo{RunID: "run-2", PipelineID: "abc123"})
	})
	twice(t, e, func() error { return e.store.RequestAbort(ctx, j.Ident) })
	require.NoError(t, e.store.Heartbeat(ctx, j.Ident))
	require.NoError(t, e.store.Heartbeat(ctx, j.Ident))

	v, err := e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, 7, v.CurrentStep)
	assert.EqualValues(t, 33, v.HooksTotal)
	assert.Equal(t, "run-2", v.RunID)
	assert.Equal(t, j.WorkflowID, v.WorkflowID, "empty RunInfo fields are left unchanged")
	assert.Equal(t, "pipeline:abc123", v.PipelineID)
	assert.True(t, v.AbortRequested)
	assert.EqualValues(t, 2, v.Heartbeat)

	require.ErrorContains(t, e.store.SetStep(ctx, j.Ident, 10), "step 10: must be 0..9")
	require.ErrorContains(t, e.store.SetRun(ctx, j.Ident, RunInfo{}), "nothing to set")
	for _, err := range []error{
		e.store.SetStep(ctx, "gone", 1), e.store.Heartbeat(ctx, "gone"), e.store.SetHooksTotal(ctx, "gone", 1),
	} {
		require.ErrorIs(t, err, ErrJobNotFound)
	}
	assert.Zero(t, e.rdb.Exists(ctx, "gone").Val(), "writes to a missing job never create a ghost hash")
}

func TestRecordResultCountsOnce(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run("own="+strconv.FormatBool(own), func(t *testing.T) {
			e := newEnv(t, Options{OwnResponseCounters: Bool(own), EventsTTL: time.Hour})
			ctx := ctxT(t)
			j := testJob(t, "http://example.com/")
			require.NoError(t, e.store.CreateJob(ctx, j))
			res := model.ArchiveResult{
				Plugin: "wget", Hook: "on_Snapshot__50_wget.sh", Step: 5, Status: model.StatusSucceeded,
				OutputStr: "saved 3 files", Attempts: 2, StartedAt: t0, EndedAt: t0.Add(1500 * time.Millisecond), OutputBytes: 12345,
			}
			resp := []model.Response{
				{URL: "http://example.com/", Status: 200, Bytes: 100},
				{URL: "http://example.com/a", Status: 301},
				{URL: "http://example.com/b", Status: 404},
				{URL: "http://example.com/c", Status: 503},
				{URL: "http://example.com/d", Status: 0},
				{URL: "http://example.com/e", Status: 102},
			}
			applied := 0
			twice(t, e, func() error {
				ok, err := e.store.RecordResult(ctx, j.Ident, "op-1", res, resp)
				if ok {
					applied++
				}
				return err
			})
			assert.Equal(t, 1, applied, "exactly one of the two calls applies")

			h := e.rdb.HGetAll(ctx, j.Ident).Val()
			assert.Equal(t, "1", h["hooks_succeeded"])
			assert.Equal(t, "100", h["bytes_downloaded"], "bytes fetched, not the output files' 12345")
			assert.Equal(t, "2", h["items_queued"], "the 2xx and 3xx: downloaded as soon as counted")
			assert.Equal(t, "2", h["items_downloaded"], "the 2xx and 3xx")
			wantR := map[string]string{"r1xx": "1", "r2xx": "1", "r3xx": "1", "r4xx": "1", "r5xx": "1", "runk": "1", "error_count": "3"}
			for k, v := range wantR {
				if own {
					assert.Equal(t, v, h[k], k)
				} else {
					assert.Equal(t, "0", h[k], "%s is left to ArchiveBot's analyzer", k)
				}
			}
			if own {
				// The hash keeps no total; the view sums the classes.
				v, err := e.store.GetJob(ctx, j.Ident)
				require.NoError(t, err)
				assert.Equal(t, model.ResponseCounts{Count: 6, R1xx: 1, R2xx: 1, R3xx: 1, R4xx: 1, R5xx: 1, Runk: 1, Errors: 3}, v.Responses)
			}

			evKey := "events_archive:2024050607"
			evs := e.rdb.LRange(ctx, evKey, 0, -1).Val()
			require.Len(t, evs, 1)
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(evs[0]), &ev))
			assert.Equal(t, j.Ident, ev["entity"])
			assert.Equal(t, "on_Snapshot__50_wget.sh", ev["check"])
			assert.Equal(t, "service", ev["type"])
			assert.Equal(t, "ok", ev["state"])
			assert.Equal(t, "succeeded: saved 3 files", ev["summary"])
			assert.EqualValues(t, t0.Add(1500*time.Millisecond).Unix(), ev["time"])
			assert.EqualValues(t, 1500, ev["duration_ms"])
			ttl := e.rdb.TTL(ctx, evKey).Val()
			assert.True(t, ttl > 59*time.Minute && ttl <= time.Hour, "events expire EventsTTL after the last event, got %s", ttl)
			for _, k := range []string{"event_counters", "event_counters:worker1:4242"} {
				assert.Equal(t, map[string]string{"all": "1", "succeeded": "1"}, e.rdb.HGetAll(ctx, k).Val(), k)
			}

			// A second, different result is counted.
			res.Status = model.StatusFailed
			ok, err := e.store.RecordResult(ctx, j.Ident, "op-2", res, nil)
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, "1", e.rdb.HGet(ctx, j.Ident, "hooks_failed").Val())
			assert.Equal(t, "2", e.rdb.HGet(ctx, "event_counters", "all").Val())
		})
	}
}

// TestRecordResultTitleTagsAndUnknownRecords: the title a hook set goes to
// the job hash (the later result's wins), its Tag records to IDENT_tags,
// its unknown records to unknown_records, each exactly once; GetJob reads
// them back, and IDENT_tags expires with the job.
func TestRecordResultTitleTagsAndUnknownRecords(t *testing.T) {
	e := newEnv(t, Options{EventsTTL: time.Hour})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	title := model.ArchiveResult{Plugin: "title", Hook: "on_Snapshot__50_title.sh", Status: model.StatusSucceeded,
		Title: "Example Page", Tags: []string{"sci-fi"}, Unknown: 2, EndedAt: t0}
	twice(t, e, func() error {
		_, err := e.store.RecordResult(ctx, j.Ident, "op-title", title, nil)
		return err
	})
	later := model.ArchiveResult{Plugin: "tagger", Hook: "on_Snapshot__60_tagger.sh", Status: model.StatusSucceeded,
		Title: "Better Title", Tags: []string{"news", "sci-fi"}, Unknown: 1, EndedAt: t0}
	_, err := e.store.RecordResult(ctx, j.Ident, "op-tagger", later, nil)
	require.NoError(t, err)
	plain := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__61_wget.sh", Status: model.StatusSucceeded, EndedAt: t0}
	_, err = e.store.RecordResult(ctx, j.Ident, "op-wget", plain, nil)
	require.NoError(t, err)

	v, err := e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, "Better Title", v.Title, "a result without a title leaves it")
	assert.Equal(t, []string{"news", "sci-fi"}, v.Tags)
	assert.Equal(t, int64(3), v.UnknownRecords)
	assert.Equal(t, "Better Title", e.rdb.HGet(ctx, j.Ident, FieldTitle).Val())

	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	tagsTTL := e.rdb.TTL(ctx, e.store.keys.Tags(j.Ident)).Val()
	assert.Positive(t, tagsTTL, "IDENT_tags expires with the job")
	assert.Equal(t, e.rdb.TTL(ctx, j.Ident).Val(), tagsTTL)
}

func TestRecordResultValidation(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	res := model.ArchiveResult{Hook: "h", Status: model.StatusSucceeded}
	_, err := e.store.RecordResult(ctx, "x", "", res, nil)
	require.ErrorContains(t, err, "op id must not be empty")
	res.Status = "great"
	_, err = e.store.RecordResult(ctx, "x", "op", res, nil)
	require.ErrorContains(t, err, `status "great"`)
	res.Status = model.StatusSucceeded
	_, err = e.store.RecordResult(ctx, "x", "op", res, nil)
	require.ErrorIs(t, err, ErrJobNotFound)
	assert.Empty(t, dump(t, e.rdb), "nothing written for a missing job")
}

func TestFinishExactlyOnce(t *testing.T) {
	tests := []struct {
		state   model.JobState
		counter string
		flag    string
		ttl     time.Duration
	}{
		{model.StateFinished, "jobs_completed", "", 48 * time.Hour},
		{model.StateAborted, "jobs_aborted", "aborted", 5 * time.Second},
		{model.StateFailed, "jobs_failed", "failed", 48 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(string(tc.state), func(t *testing.T) {
			e := newEnv(t, Options{})
			ctx := ctxT(t)
			j := testJob(t, "http://example.com/")
			require.NoError(t, e.store.CreateJob(ctx, j))
			require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
			_, err := e.store.AppendLog(ctx, j.Ident, "b", []Packet{Stdout(t0, "hi")})
			require.NoError(t, err)
			_, err = e.store.RecordResult(ctx, j.Ident, "op", model.ArchiveResult{Hook: "h", Status: model.StatusSucceeded}, nil)
			require.NoError(t, err)
			e.clock.Add(10 * time.Second)

			twice(t, e, func() error { return e.store.Finish(ctx, j.Ident, tc.state) })

			assert.Equal(t, "1", e.rdb.Get(ctx, tc.counter).Val())
			h := e.rdb.HGetAll(ctx, j.Ident).Val()
			assert.Equal(t, string(tc.state), h["state"])
			assert.Equal(t, strconv.FormatInt(t0.Add(10*time.Second).Unix(), 10), h["finished_at"])
			for _, f := range []string{"aborted", "failed"} {
				if f == tc.flag {
					assert.Equal(t, "true", h[f])
				} else {
					assert.NotContains(t, h, f)
				}
			}
			assert.Empty(t, e.rdb.LRange(ctx, "working", 0, -1).Val())
			assert.Empty(t, e.rdb.LRange(ctx, "pending", 0, -1).Val())
			assert.Equal(t, []string{j.Ident}, e.rdb.SMembers(ctx, "state:"+string(tc.state)).Val())
			assert.Empty(t, e.rdb.SMembers(ctx, "state:active").Val())
			assert.Equal(t, float64(t0.Add(10*time.Second).Add(tc.ttl).Unix()), e.rdb.ZScore(ctx, "scheduled-purge", j.Ident).Val())

			notes := e.rdb.LRange(ctx, "finish_notifications", 0, -1).Val()
			require.Len(t, notes, 1)
			var info map[string]any
			require.NoError(t, json.Unmarshal([]byte(notes[0]), &info))
			assert.Equal(t, tc.state == model.StateAborted, info["aborted"], "aborted is a JSON boolean as in ArchiveBot's info")
			assert.Equal(t, "http://example.com/", info["url"])
			assert.Equal(t, "shallow", info["fetch_depth"])
			assert.Equal(t, "alice", info["started_by"])
			assert.Equal(t, "cli", info["started_in"])
			assert.Equal(t, strconv.FormatInt(t0.Unix(), 10), info["queued_at"])
			assert.Equal(t, j.Ident, info["ident"])

			for _, k := range []string{j.Ident, j.Ident + "_log", j.Ident + "_ignores", j.Ident + "_ops", j.Ident + "_logbatches"} {
				ttl := e.rdb.TTL(ctx, k).Val()
				assert.True(t, ttl > tc.ttl-2*time.Second && ttl <= tc.ttl, "%s ttl %s, want ~%s", k, ttl, tc.ttl)
			}
		})
	}
}

func TestFinishedJobExpires(t *testing.T) {
	e := newEnv(t, Options{Retention: Retention{Aborted: time.Second}})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	_, err := e.store.AppendLog(ctx, j.Ident, "", []Packet{Stdout(t0, "x")})
	require.NoError(t, err)
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateAborted))
	e.srv.FastForward(1100 * time.Millisecond)
	require.Eventually(t, func() bool {
		return e.rdb.Exists(ctx, j.JobKeysFor(e.store)...).Val() == 0
	}, 30*time.Second, 50*time.Millisecond, "every key of the aborted job expires after its retention")

	// A Finish retried after expiry neither recreates nor recounts.
	require.ErrorIs(t, e.store.Finish(ctx, j.Ident, model.StateAborted), ErrJobNotFound)
	assert.Equal(t, "1", e.rdb.Get(ctx, "jobs_aborted").Val())
	_, err = e.store.AppendLog(ctx, j.Ident, "", []Packet{Stdout(t0, "late")})
	require.ErrorIs(t, err, ErrJobNotFound)
	assert.Zero(t, e.rdb.Exists(ctx, j.JobKeysFor(e.store)...).Val())
}

// JobKeysFor lists the job's keys under the store's namespace.
func (j Job) JobKeysFor(s *Store) []string { return s.Keys().JobKeys(j.Ident) }

func TestSettingsAndIgnores(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	ps := e.rdb.Subscribe(ctx, "archivebot:job:"+j.Ident)
	_, err := ps.Receive(ctx)
	require.NoError(t, err)
	msgs := ps.Channel()

	st := model.Settings{Concurrency: 4, DelayMinMS: 0, DelayMaxMS: 100, UserAgent: "UA/2", Ignores: []string{"a", "b", "a"}}
	age, err := e.store.SetSettings(ctx, j.Ident, st)
	require.NoError(t, err)
	assert.EqualValues(t, 1, age)
	select {
	case m := <-msgs:
		assert.Equal(t, "1", m.Payload, "the job channel carries the new settings_age")
	case <-ctx.Done():
		t.Fatal("no settings_age publication")
	}
	twice(t, e, func() error {
		age, err := e.store.SetSettings(ctx, j.Ident, st)
		if err == nil && age != 0 {
			t.Errorf("identical settings bumped settings_age to %d", age)
		}
		return err
	})
	h := e.rdb.HGetAll(ctx, j.Ident).Val()
	assert.Equal(t, "4", h["concurrency"])
	assert.Equal(t, "0", h["delay_min"])
	assert.Equal(t, "100", h["delay_max"])
	assert.Equal(t, "UA/2", h["user_agent"])
	assert.Equal(t, "1", h["settings_age"])
	assert.ElementsMatch(t, []string{"a", "b"}, e.rdb.SMembers(ctx, j.Ident+"_ignores").Val())

	st.Ignores = []string{"b", `\.png$`}
	age, err = e.store.SetSettings(ctx, j.Ident, st)
	require.NoError(t, err)
	assert.EqualValues(t, 2, age, "a changed ignore set bumps settings_age")
	age, err = e.store.SetSettings(ctx, j.Ident, st)
	require.NoError(t, err)
	assert.Zero(t, age, "the same set changes nothing")
	assert.ElementsMatch(t, []string{"b", `\.png$`}, e.rdb.SMembers(ctx, j.Ident+"_ignores").Val())

	st.UserAgent = ""
	st.Ignores = nil
	age, err = e.store.SetSettings(ctx, j.Ident, st)
	require.NoError(t, err)
	assert.EqualValues(t, 3, age)
	assert.NotContains(t, e.rdb.HGetAll(ctx, j.Ident).Val(), "user_agent")
	assert.Zero(t, e.rdb.Exists(ctx, j.Ident+"_ignores").Val())

	for _, bad := range []model.Settings{{Concurrency: -1}, {Ignores: []string{"(["}}, {Ignores: []string{""}}} {
		_, err = e.store.SetSettings(ctx, j.Ident, bad)
		require.ErrorIs(t, err, ErrInvalid, "settings %+v", bad)
		require.ErrorContains(t, err, "set settings of job "+j.Ident)
	}
	_, err = e.store.SetSettings(ctx, "gone", st)
	require.ErrorIs(t, err, ErrJobNotFound)
}

func TestIgnoresAfterFinishInheritRetention(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	j.Settings.Ignores = nil
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	_, err := e.store.SetSettings(ctx, j.Ident, model.Settings{Concurrency: 1, Ignores: []string{"late"}})
	require.NoError(t, err)
	_, err = e.store.AppendLog(ctx, j.Ident, "late-batch", []Packet{Stdout(t0, "late")})
	require.NoError(t, err)
	for _, k := range []string{j.Ident + "_ignores", j.Ident + "_log", j.Ident + "_logbatches"} {
		assert.Greater(t, e.rdb.TTL(ctx, k).Val(), time.Duration(0), "%s created after Finish must expire with the job", k)
	}
}

func TestListJobs(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	var ids []string
	for _, u := range []string{"http://a.example/", "http://b.example/", "http://c.example/"} {
		j := testJob(t, u)
		require.NoError(t, e.store.CreateJob(ctx, j))
		ids = append(ids, j.Ident)
		e.clock.Add(time.Second)
	}
	require.NoError(t, e.store.SetState(ctx, ids[1], model.StateActive))
	require.NoError(t, e.store.Finish(ctx, ids[2], model.StateFinished))
	got, err := e.store.ListJobs(ctx, model.StatePending)
	require.NoError(t, err)
	assert.Equal(t, []string{ids[0]}, got)
	require.NoError(t, e.store.SetState(ctx, ids[1], model.StatePending))
	got, err = e.store.ListJobs(ctx, model.StatePending)
	require.NoError(t, err)
	assert.Equal(t, []string{ids[0], ids[1]}, got, "ordered by queue time")
	_, err = e.store.ListJobs(ctx, "nope")
	require.Error(t, err)
}

func TestMalformedValues(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	tests := []struct{ field, value, want string }{
		{"bytes_downloaded", "12MB", "field bytes_downloaded = \"12MB\""},
		{"state", "sleeping", "field state = \"sleeping\""},
		{"queued_at", "yesterday", "field queued_at = \"yesterday\""},
		{"current_step", "12", "must be 0..9"},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			old := e.rdb.HGet(ctx, j.Ident, tc.field).Val()
			require.NoError(t, e.rdb.HSet(ctx, j.Ident, tc.field, tc.value).Err())
			defer e.rdb.HSet(ctx, j.Ident, tc.field, old)
			_, err := e.store.GetJob(ctx, j.Ident)
			require.Error(t, err)
			assert.True(t, IsMalformed(err))
			assert.Contains(t, err.Error(), j.Ident)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	require.NoError(t, e.rdb.ZAdd(ctx, j.Ident+"_log", redisZ(1, "not json")).Err())
	_, err := e.store.ReadLog(ctx, j.Ident, 0, 10)
	require.Error(t, err)
	assert.True(t, IsMalformed(err))
	_, err = e.store.GetJob(ctx, "unknown")
	require.ErrorIs(t, err, ErrJobNotFound)
}

func TestDeleteJobRemovesEverything(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	keep := testJob(t, "http://example.com/keep")
	require.NoError(t, e.store.CreateJob(ctx, keep))
	before := dump(t, e.rdb)

	j := testJob(t, "http://example.com/withdrawn")
	j.NotBefore = t0.Add(time.Hour)
	j.Settings.Ignores = []string{`\.iso$`}
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.NoError(t, e.store.DeleteJob(ctx, j.Ident))
	assert.Equal(t, before, dump(t, e.rdb), "only the other job's state is left")
	require.NoError(t, e.store.DeleteJob(ctx, j.Ident), "deleting twice is harmless")
}

// TestRecordResultFromSummary: the workflow records results without the
// responses (only the hook's activity holds them) but with their summary;
// the counters come out the same as from the responses themselves.
func TestRecordResultFromSummary(t *testing.T) {
	resp := []model.Response{
		{URL: "http://example.com/", Status: 200, Bytes: 100},
		{URL: "http://example.com/a", Status: 301},
		{URL: "http://example.com/b", Status: 404},
		{URL: "http://example.com/d", Status: 0},
	}
	dumps := map[string]map[string]string{}
	for _, mode := range []string{"responses", "summary"} {
		e := newEnv(t, Options{EventsTTL: time.Hour})
		ctx := ctxT(t)
		j := testJob(t, "http://example.com/")
		require.NoError(t, e.store.CreateJob(ctx, j))
		res := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__60_wget.sh", Step: 6, Status: model.StatusSucceeded,
			Attempts: 1, StartedAt: t0, EndedAt: t0.Add(time.Second)}
		var err error
		if mode == "responses" {
			_, err = e.store.RecordResult(ctx, j.Ident, "op-1", res, resp)
		} else {
			c := model.CountResponses(resp)
			res.Responses = &c
			_, err = e.store.RecordResult(ctx, j.Ident, "op-1", res, nil)
		}
		require.NoError(t, err)
		dumps[mode] = e.rdb.HGetAll(ctx, j.Ident).Val()
	}
	for _, k := range []string{"items_downloaded", "items_queued", "bytes_downloaded", "r2xx", "r3xx", "r4xx", "runk", "error_count"} {
		assert.Equal(t, dumps["responses"][k], dumps["summary"][k], k)
	}
	assert.Equal(t, "2", dumps["summary"]["items_downloaded"])
	assert.Equal(t, "100", dumps["summary"]["bytes_downloaded"])
	assert.Equal(t, "1", dumps["summary"]["r4xx"])
}

func TestRecordPageEventsCountsEveryResultAndKeepsTheProblems(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run("all="+strconv.FormatBool(all), func(t *testing.T) {
			e := newEnv(t, Options{EventsTTL: time.Hour, AllPageEvents: all})
			ctx := ctxT(t)
			j := testJob(t, "http://example.com/")
			require.NoError(t, e.store.CreateJob(ctx, j))
			before := e.rdb.HGetAll(ctx, j.Ident).Val()
			results := []model.ArchiveResult{
				{Plugin: "pagefetch", Hook: "on_Snapshot__10_pagefetch.py", Step: 1, Status: model.StatusSucceeded, OutputStr: "200 OK", Attempts: 2, StartedAt: t0, EndedAt: t0.Add(time.Second)},
				{Plugin: "title", Hook: "on_Snapshot__60_title.py", Step: 6, Status: model.StatusFailed, Error: "no <title>", Attempts: 2, StartedAt: t0, EndedAt: t0.Add(time.Second)},
			}
			require.NoError(t, e.store.RecordPageEvents(ctx, j.Ident, []PageEvents{{OpID: "job/page-7/attempt-2", URL: "http://example.com/a", Results: results}}))
			evKey := e.store.keys.EventsArchive(e.store.now())
			var evs []map[string]any
			for _, raw := range e.rdb.LRange(ctx, evKey, 0, -1).Val() {
				var ev map[string]any
				require.NoError(t, json.Unmarshal([]byte(raw), &ev))
				evs = append(evs, ev)
			}
			if all {
				require.Len(t, evs, 2)
				assert.Equal(t, "ok", evs[0]["state"])
				evs = evs[1:]
			} else {
				require.Len(t, evs, 1, "an ok page hook is counted, not archived")
			}
			assert.Equal(t, j.Ident, evs[0]["entity"])
			assert.Equal(t, "on_Snapshot__60_title.py", evs[0]["check"])
			assert.Equal(t, "http://example.com/a", evs[0]["page"])
			assert.Equal(t, "job/page-7/attempt-2/on_Snapshot__60_title.py", evs[0]["op_id"])
			assert.Equal(t, "critical", evs[0]["state"])
			assert.Equal(t, "failed: no <title>", evs[0]["summary"])
			ttl := e.rdb.TTL(ctx, evKey).Val()
			assert.True(t, ttl > 59*time.Minute && ttl <= time.Hour, "events expire EventsTTL after the last event, got %s", ttl)
			for _, k := range []string{"event_counters", "event_counters:worker1:4242"} {
				assert.Equal(t, map[string]string{"all": "2", "succeeded": "1", "failed": "1"}, e.rdb.HGetAll(ctx, k).Val(), k)
			}
			// The page pulses the job's heartbeat; its counters are the
			// frontier's to write.
			after := e.rdb.HGetAll(ctx, j.Ident).Val()
			assert.Equal(t, "1", after["heartbeat"])
			assert.NotEmpty(t, after["heartbeat_at"])
			for _, k := range []string{"heartbeat", "heartbeat_at", "ts"} {
				delete(before, k)
				delete(after, k)
			}
			assert.Equal(t, before, after)

			err := e.store.RecordPageEvents(ctx, j.Ident, []PageEvents{{OpID: "job/page-8/attempt-1", URL: "http://example.com/b",
				Results: []model.ArchiveResult{{Hook: "x.sh", Status: "bogus"}}}})
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), "x.sh")
			assert.Equal(t, "1", e.rdb.HGet(ctx, j.Ident, "heartbeat").Val(), "a page of invalid results only is not recorded")
		})
	}
}

// A page sink flush records its pages' hook events in one write whose
// counters are summed: one HINCRBY per field however many pages and
// hooks, with the same final values as one page at a time, the events in
// page and hook order, and a result of an unknown status left out alone.
func TestRecordPageEventsSumsTheCountersOfManyPages(t *testing.T) {
	pages := func() []PageEvents {
		var out []PageEvents
		for i := range 5 {
			out = append(out, PageEvents{OpID: fmt.Sprintf("job/page-%d/attempt-1", i+2), URL: fmt.Sprintf("http://example.com/%d", i),
				Results: []model.ArchiveResult{
					{Plugin: "pagefetch", Hook: "pagefetch", Status: model.StatusSucceeded},
					{Plugin: "title", Hook: "title", Status: model.StatusSucceeded},
					{Plugin: "outlinks", Hook: "outlinks", Status: []model.Status{model.StatusSucceeded, model.StatusFailed}[i%2]},
				}})
		}
		return out
	}
	record := func(t *testing.T, together bool) (*env, map[string]map[string]string, []string) {
		e := newEnv(t, Options{EventsTTL: time.Hour})
		ctx := ctxT(t)
		j := testJob(t, "http://example.com/")
		require.NoError(t, e.store.CreateJob(ctx, j))
		if together {
			require.NoError(t, e.store.RecordPageEvents(ctx, j.Ident, pages()))
		} else {
			for _, p := range pages() {
				require.NoError(t, e.store.RecordPageEvents(ctx, j.Ident, []PageEvents{p}))
			}
		}
		out := map[string]map[string]string{}
		for _, k := range []string{j.Ident, "event_counters", "event_counters:worker1:4242"} {
			out[strings.ReplaceAll(k, j.Ident, "IDENT")] = e.rdb.HGetAll(ctx, k).Val()
		}
		var evs []string
		for _, raw := range e.rdb.LRange(ctx, e.store.keys.EventsArchive(e.store.now()), 0, -1).Val() {
			var ev Event
			require.NoError(t, json.Unmarshal([]byte(raw), &ev))
			evs = append(evs, ev.OpID+" "+ev.Page+" "+ev.State)
		}
		return e, out, evs
	}
	_, alone, alonEvents := record(t, false)
	e, together, events := record(t, true)
	assert.Equal(t, alone, together)
	assert.Equal(t, "5", together["IDENT"]["heartbeat"])
	assert.Equal(t, map[string]string{"all": "15", "succeeded": "13", "failed": "2"}, together["event_counters"])
	assert.Equal(t, alonEvents, events)
	assert.Equal(t, []string{"job/page-3/attempt-1/outlinks http://example.com/1 critical", "job/page-5/attempt-1/outlinks http://example.com/3 critical"}, events)
	if e.srv.Real() {
		// heartbeat, then all, succeeded and failed of each counters hash.
		calls, err := testredis.CommandCalls(ctxT(t), e.rdb)
		require.NoError(t, err)
		assert.Equal(t, int64(1+2*3), calls["hincrby"], "one HINCRBY per field for 15 results")
	}

	e = newEnv(t, Options{EventsTTL: time.Hour})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	ps := pages()[:2]
	ps[0].Results[2].Status = "bogus"
	err := e.store.RecordPageEvents(ctx, j.Ident, ps)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "http://example.com/0")
	assert.Equal(t, map[string]string{"all": "5", "succeeded": "4", "failed": "1"}, e.rdb.HGetAll(ctx, "event_counters").Val(), "the bogus result alone left out")
	assert.Equal(t, "2", e.rdb.HGet(ctx, j.Ident, "heartbeat").Val())
}
