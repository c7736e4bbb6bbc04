package rkeys

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// TestRetryAtIndexesAWaitingJobUntilItEnds: a running job waiting for a
// later retry is in the retry_at set with its due time (and in its hash);
// clearing takes it out, finishing takes it out, and a final job is never
// indexed again.
func TestRetryAtIndexesAWaitingJobUntilItEnds(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	due := t0.Add(10 * time.Minute)
	key := e.store.Keys().RetryAt()

	twice(t, e, func() error { return e.store.SetRetryAt(ctx, j.Ident, due) })
	score, err := e.rdb.ZScore(ctx, key, j.Ident).Result()
	require.NoError(t, err)
	assert.Equal(t, float64(due.Unix()), score)
	assert.Equal(t, strconv.FormatInt(due.Unix(), 10), e.rdb.HGet(ctx, j.Ident, FieldRetryAt).Val())
	v, err := e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.True(t, v.RetryAt.Equal(due.Truncate(time.Second)), "the job's view says when it is due: %s", v.RetryAt)

	twice(t, e, func() error { return e.store.SetRetryAt(ctx, j.Ident, time.Time{}) })
	assert.Zero(t, e.rdb.ZCard(ctx, key).Val())
	assert.Zero(t, e.rdb.HExists(ctx, j.Ident, FieldRetryAt).Val())
	v, err = e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.True(t, v.RetryAt.IsZero())

	require.NoError(t, e.store.SetRetryAt(ctx, j.Ident, due))
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	assert.Zero(t, e.rdb.ZCard(ctx, key).Val(), "a final job waits for nothing")
	assert.Zero(t, e.rdb.HExists(ctx, j.Ident, FieldRetryAt).Val())

	err = e.store.SetRetryAt(ctx, j.Ident, due)
	require.True(t, errors.Is(err, ErrJobFinal), "got %v", err)
	assert.Zero(t, e.rdb.ZCard(ctx, key).Val())
	require.True(t, errors.Is(e.store.SetRetryAt(ctx, "nosuchjob", due), ErrJobNotFound))
}
