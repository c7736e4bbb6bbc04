package rkeys

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// A finished job is purged once its retention has passed: every key of it
// and every index entry goes, and the database is as before the job (the
// jobs_* counter and finish_notifications are history and stay).
func TestPurgeJobRemovesEverythingAfterRetention(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	before := dump(t, e.rdb)
	j := testJob(t, "http://example.com/purge")
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	_, err := e.store.AppendLog(ctx, j.Ident, "b1", []Packet{Stdout(t0, "line")})
	require.NoError(t, err)
	_, err = e.store.RecordResult(ctx, j.Ident, "op1", model.ArchiveResult{Hook: "h", Status: model.StatusSucceeded}, nil)
	require.NoError(t, err)
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))

	due, err := e.store.PurgeDue(ctx, e.clock.Now(), 10)
	require.NoError(t, err)
	assert.Empty(t, due, "not due before its retention")
	purged, _, err := e.store.PurgeJob(ctx, j.Ident, e.clock.Now())
	require.NoError(t, err)
	assert.False(t, purged, "a job is never purged before its retention")

	e.clock.Add(48*time.Hour + time.Second)
	due, err = e.store.PurgeDue(ctx, e.clock.Now(), 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.Equal(t, j.Ident, due[0].Ident)
	assert.Equal(t, model.StateFinished, due[0].State)
	assert.ElementsMatch(t, []string{j.Ident, j.Ident + "_log", j.Ident + "_ignores", j.Ident + "_ops", j.Ident + "_logbatches"}, due[0].Keys)

	purged, n, err := e.store.PurgeJob(ctx, j.Ident, e.clock.Now())
	require.NoError(t, err)
	assert.True(t, purged)
	assert.Equal(t, 5, n)
	for _, k := range []string{"state:finished", "time-index", "scheduled-purge", "pending", "working"} {
		assert.Zero(t, e.rdb.Exists(ctx, k).Val(), "%s is empty (gone)", k)
	}
	for _, k := range e.store.Keys().JobKeys(j.Ident) {
		assert.Zero(t, e.rdb.Exists(ctx, k).Val(), k)
	}
	after := dump(t, e.rdb)
	assert.Contains(t, after, "jobs_completed")
	e.rdb.Del(ctx, "jobs_completed", "finish_notifications", "event_counters", "event_counters:worker1:4242", e.store.Keys().EventsArchive(t0))
	assert.Equal(t, before, dump(t, e.rdb), "nothing of the job is left")

	twice(t, e, func() error { _, _, err := e.store.PurgeJob(ctx, j.Ident, e.clock.Now()); return err })
}

// A job whose keys already expired still leaves index entries; the purge
// removes them.
func TestPurgeJobOfExpiredKeys(t *testing.T) {
	e := newEnv(t, Options{Retention: Retention{Aborted: time.Second}})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/expired")
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateAborted))
	require.Eventually(t, func() bool { return e.rdb.Exists(ctx, j.Ident).Val() == 0 }, 10*time.Second, 20*time.Millisecond)
	assert.True(t, e.rdb.SIsMember(ctx, "state:aborted", j.Ident).Val(), "the state set still holds the expired job")

	e.clock.Add(2 * time.Second)
	due, err := e.store.PurgeDue(ctx, e.clock.Now(), 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.Empty(t, due[0].State)
	assert.Empty(t, due[0].Keys)
	purged, n, err := e.store.PurgeJob(ctx, j.Ident, e.clock.Now())
	require.NoError(t, err)
	assert.True(t, purged)
	assert.Zero(t, n)
	for _, k := range []string{"state:aborted", "time-index", "scheduled-purge"} {
		assert.Zero(t, e.rdb.Exists(ctx, k).Val(), k)
	}
}

// A job submitted again or retried is not final: the purge leaves it, and
// drops only a stale scheduled-purge entry.
func TestPurgeJobLeavesALiveJob(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/live")
	require.NoError(t, e.store.CreateJob(ctx, j))
	e.rdb.ZAdd(ctx, "scheduled-purge", redisZ(float64(t0.Unix()), j.Ident))
	purged, _, err := e.store.PurgeJob(ctx, j.Ident, e.clock.Now())
	require.NoError(t, err)
	assert.False(t, purged)
	assert.Equal(t, int64(1), e.rdb.Exists(ctx, j.Ident).Val())
	assert.True(t, e.rdb.SIsMember(ctx, "state:pending", j.Ident).Val())
	assert.Zero(t, e.rdb.Exists(ctx, "scheduled-purge").Val())

	_, err = e.store.PurgeDue(ctx, t0, 0)
	require.ErrorIs(t, err, ErrInvalid)
}

// A retry reopens a finished job once: final state, retention, purge entry
// and jobs_* count are taken back, hooks_failed loses the hooks run again.
func TestReopenJob(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/retry")
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.ErrorIs(t, e.store.ReopenJob(ctx, j.Ident, Reopen{Op: "run-2", Hooks: 1}), ErrJobExists, "a pending job is not reopened")
	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	_, err := e.store.RecordResult(ctx, j.Ident, "ok", model.ArchiveResult{Hook: "a", Status: model.StatusSucceeded, OutputBytes: 10}, []model.Response{{URL: "http://example.com/retry", Status: 200, Bytes: 10}})
	require.NoError(t, err)
	_, err = e.store.RecordResult(ctx, j.Ident, "bad", model.ArchiveResult{Hook: "b", Status: model.StatusFailed, OutputBytes: 3}, []model.Response{{URL: "http://example.com/retry", Status: 503, Bytes: 3}})
	require.NoError(t, err)
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	require.Equal(t, "1", e.rdb.Get(ctx, "jobs_completed").Val())

	twice(t, e, func() error { return e.store.ReopenJob(ctx, j.Ident, Reopen{Op: "run-2", Hooks: 1}) })
	v, err := e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, model.StatePending, v.State)
	assert.Equal(t, int64(1), v.HooksSucceeded)
	assert.Zero(t, v.HooksFailed)
	assert.Equal(t, int64(13), v.BytesDownloaded, "bytes fetched stay: the failed run's fetch happened")
	assert.Zero(t, v.TTL, "no retention while the retry runs")
	assert.True(t, v.FinishedAt.IsZero())
	assert.Equal(t, "0", e.rdb.Get(ctx, "jobs_completed").Val())
	assert.Zero(t, e.rdb.Exists(ctx, "scheduled-purge", "state:finished").Val())
	assert.Equal(t, []string{j.Ident}, e.rdb.LRange(ctx, "pending", 0, -1).Val())

	// The retried hook succeeds: counted once, and the job once more.
	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	_, err = e.store.RecordResult(ctx, j.Ident, "bad-retry", model.ArchiveResult{Hook: "b", Status: model.StatusSucceeded, OutputBytes: 4}, []model.Response{{URL: "http://example.com/retry", Status: 200, Bytes: 4}})
	require.NoError(t, err)
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	v, err = e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, int64(2), v.HooksSucceeded)
	assert.Zero(t, v.HooksFailed)
	assert.Equal(t, int64(17), v.BytesDownloaded)
	assert.Equal(t, "1", e.rdb.Get(ctx, "jobs_completed").Val())
	assert.Equal(t, "1", e.rdb.HGet(ctx, j.Ident, "retries").Val())

	// Nothing to take off (a hook that never ran is run again): zero
	// increments are valid.
	require.NoError(t, e.store.ReopenJob(ctx, j.Ident, Reopen{Op: "run-3"}))
	require.ErrorIs(t, e.store.ReopenJob(ctx, "nojob", Reopen{Op: "x"}), ErrJobNotFound)
	require.ErrorIs(t, e.store.ReopenJob(ctx, j.Ident, Reopen{}), ErrInvalid)
}

// An un-abort reopens an aborted job as a retry does: jobs_aborted and the
// aborted flag are taken back, and the new run's end counts the job once.
func TestReopenAbortedJob(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/unabort")
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateAborted))
	require.Equal(t, "1", e.rdb.Get(ctx, "jobs_aborted").Val())
	require.Equal(t, "true", e.rdb.HGet(ctx, j.Ident, "aborted").Val())

	twice(t, e, func() error { return e.store.ReopenJob(ctx, j.Ident, Reopen{Op: "unabort-1"}) })
	v, err := e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, model.StatePending, v.State)
	assert.Zero(t, v.TTL, "no retention while the new run runs")
	assert.Equal(t, "0", e.rdb.Get(ctx, "jobs_aborted").Val())
	assert.False(t, e.rdb.HExists(ctx, j.Ident, "aborted").Val())
	assert.False(t, e.rdb.SIsMember(ctx, "state:aborted", j.Ident).Val())

	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	assert.Equal(t, "1", e.rdb.Get(ctx, "jobs_completed").Val())
	assert.Equal(t, "0", e.rdb.Get(ctx, "jobs_aborted").Val())
}
