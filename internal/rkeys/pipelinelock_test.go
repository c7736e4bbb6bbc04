package rkeys

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// A lock names a job that runs; an unlock for another job leaves it.
func TestPipelineLock(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/locked")
	require.ErrorIs(t, e.store.LockPipeline(ctx, "p1", PipelineLock{Ident: j.Ident}), ErrJobNotFound)
	require.NoError(t, e.store.CreateJob(ctx, j))
	_, ok, err := e.store.PipelineLockOf(ctx, "p1")
	require.NoError(t, err)
	assert.False(t, ok, "no lock yet")

	require.NoError(t, e.store.LockPipeline(ctx, "p1", PipelineLock{Ident: j.Ident, UntilFinished: true, By: "op"}))
	l, ok, err := e.store.PipelineLockOf(ctx, "p1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, PipelineLock{Ident: j.Ident, UntilFinished: true, By: "op", At: l.At}, l)
	assert.Equal(t, t0.Unix(), l.At.Unix())

	cleared, err := e.store.UnlockPipeline(ctx, "p1", "otherjob")
	require.NoError(t, err)
	assert.False(t, cleared, "a lock on another job stays")
	cleared, err = e.store.UnlockPipeline(ctx, "p1", "")
	require.NoError(t, err)
	assert.True(t, cleared)
	_, ok, err = e.store.PipelineLockOf(ctx, "p1")
	require.NoError(t, err)
	assert.False(t, ok)

	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	require.ErrorIs(t, e.store.LockPipeline(ctx, "p1", PipelineLock{Ident: j.Ident}), ErrJobFinal, "an ended job takes no lock")
	require.ErrorIs(t, e.store.LockPipeline(ctx, "", PipelineLock{Ident: j.Ident}), ErrInvalid)
}

// LockedHostQueues finds the routed-page queue of the shared queue's pool
// on each live pipeline locked to the job (its host queue when its record
// lists none), and nothing for other jobs or queues.
func TestLockedHostQueues(t *testing.T) {
	e := newEnv(t, Options{PipelineTTL: time.Minute})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/locked-crawl")
	require.NoError(t, e.store.CreateJob(ctx, j))
	p1, p2 := testPipeline(t), testPipeline(t)
	p1.TaskQueues = []string{"default", "default@w1-1", "default@w1-1/pages", "shots", "shots@w1-1"}
	p2.ID, p2.PID, p2.TaskQueues = PipelineID("worker2", "worker2.example", 7), 7, []string{"default", "default@w2-7"}
	for _, p := range []Pipeline{p1, p2} {
		require.NoError(t, e.store.RegisterPipeline(ctx, p))
	}
	qs, err := e.store.LockedHostQueues(ctx, j.Ident, "default")
	require.NoError(t, err)
	assert.Empty(t, qs, "no lock")

	require.NoError(t, e.store.LockPipeline(ctx, p1.ID, PipelineLock{Ident: j.Ident}))
	qs, err = e.store.LockedHostQueues(ctx, j.Ident, "default")
	require.NoError(t, err)
	assert.Equal(t, []string{"default@w1-1/pages"}, qs)
	qs, err = e.store.LockedHostQueues(ctx, j.Ident, "shots")
	require.NoError(t, err)
	assert.Equal(t, []string{"shots@w1-1"}, qs, "a record without a routed-page queue: the host queue")
	qs, err = e.store.LockedHostQueues(ctx, "otherjob", "default")
	require.NoError(t, err)
	assert.Empty(t, qs)
}
