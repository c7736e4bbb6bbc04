package rkeys

import (
	"testing"

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
