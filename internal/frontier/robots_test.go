package frontier

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeepRobotsFirstWinsAndExpiresWithTheFrontier(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	const origin = "http://h.example"
	_, err := e.f.KeepRobots(ctx, job, origin, "a")
	require.ErrorIs(t, err, ErrNoFrontier, "no frontier: nothing kept")
	requireNoKeys(t, e, "a refused keep writes nothing")

	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 3})
	_, ok, err := e.f.Robots(ctx, job, origin)
	require.NoError(t, err)
	assert.False(t, ok)
	kept, err := e.f.KeepRobots(ctx, job, origin, "first")
	require.NoError(t, err)
	assert.Equal(t, "first", kept)
	kept, err = e.f.KeepRobots(ctx, job, origin, "second")
	require.NoError(t, err)
	assert.Equal(t, "first", kept, "a second fetch's record gives way to the kept one")
	v, ok, err := e.f.Robots(ctx, job, origin)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "first", v)

	key := e.keys.Job(job) + "_frontier_robots"
	keys, err := e.f.JobKeys(ctx, job)
	require.NoError(t, err)
	assert.Contains(t, keys, key)
	require.NoError(t, e.f.Expire(ctx, job, time.Hour))
	ttl, err := e.rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl)

	// A record kept after the crawl ended takes the frontier's TTL.
	require.NoError(t, e.rdb.Del(ctx, key).Err())
	_, err = e.f.KeepRobots(ctx, job, "http://other.example", "late")
	require.NoError(t, err)
	ttl, err = e.rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl)

	require.NoError(t, e.f.Delete(ctx, job, 10))
	requireNoKeys(t, e, "deleted with the frontier")
}
