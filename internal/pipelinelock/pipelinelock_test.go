package pipelinelock

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

func newStore(t *testing.T) *rkeys.Store {
	srv := testredis.Start(t)
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	return store
}

func createJob(t *testing.T, store *rkeys.Store, ident string) {
	ctx := context.Background()
	require.NoError(t, store.CreateJob(ctx, rkeys.Job{Ident: ident, URL: "https://example.com/" + ident, FetchDepth: model.FetchShallow,
		StartedBy: "t", StartedIn: "test", WorkflowID: ident}))
	require.NoError(t, store.SetState(ctx, ident, model.StateActive))
}

// The gate is closed while the lock holds; a lock --until-finished is
// cleared once its job has ended, an indefinite one only by unlock.
func TestWatcherFollowsTheLock(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	w := New(store, "p1", nil)
	w.Check(ctx)
	assert.Empty(t, w.Reason(), "no lock: open")

	createJob(t, store, "jobaaaaaaaaaaaaaaaaaaaaaaaa")
	require.NoError(t, store.LockPipeline(ctx, "p1", rkeys.PipelineLock{Ident: "jobaaaaaaaaaaaaaaaaaaaaaaaa", UntilFinished: true}))
	w.Check(ctx)
	assert.Equal(t, "locked to job jobaaaaaaaaaaaaaaaaaaaaaaaa (until the job ends or starter unlock): taking no other work", w.Reason())
	assert.Equal(t, "jobaaaaaaaaaaaaaaaaaaaaaaaa", w.Locked())
	other := New(store, "p2", nil)
	other.Check(ctx)
	assert.Empty(t, other.Reason(), "another pipeline is not locked")

	require.NoError(t, store.Finish(ctx, "jobaaaaaaaaaaaaaaaaaaaaaaaa", model.StateFinished))
	w.Check(ctx)
	assert.Empty(t, w.Reason(), "the job ended: the lock is cleared")
	assert.Empty(t, w.Locked())
	_, ok, err := store.PipelineLockOf(ctx, "p1")
	require.NoError(t, err)
	assert.False(t, ok, "cleared in Redis")

	createJob(t, store, "jobbbbbbbbbbbbbbbbbbbbbbbbb")
	require.NoError(t, store.LockPipeline(ctx, "p1", rkeys.PipelineLock{Ident: "jobbbbbbbbbbbbbbbbbbbbbbbbb"}))
	require.NoError(t, store.Finish(ctx, "jobbbbbbbbbbbbbbbbbbbbbbbbb", model.StateAborted))
	w.Check(ctx)
	assert.Contains(t, w.Reason(), "until starter unlock", "an indefinite lock outlives its job")
	_, err = store.UnlockPipeline(ctx, "p1", "")
	require.NoError(t, err)
	w.Check(ctx)
	assert.Empty(t, w.Reason())
}
