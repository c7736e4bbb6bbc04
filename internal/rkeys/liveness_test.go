package rkeys

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQueueAlive(t *testing.T) {
	e := newEnv(t, Options{PipelineTTL: time.Second})
	ctx := ctxT(t)
	p := testPipeline(t)
	p.TaskQueues = []string{"default", "default@worker1-4242"}
	other := testPipeline(t)
	other.ID, other.Hostname, other.PID = PipelineID("worker2", "worker2.example", 7), "worker2", 7
	other.TaskQueues = []string{"default", "default@worker2-7"}

	alive := func(queue string) bool {
		t.Helper()
		ok, err := e.store.QueueAlive(ctx, queue)
		require.NoError(t, err)
		return ok
	}
	assert.False(t, alive("default@worker1-4242"), "no pipeline registered yet")

	require.NoError(t, e.store.RegisterPipeline(ctx, p))
	require.NoError(t, e.store.RegisterPipeline(ctx, other))
	assert.True(t, alive("default@worker1-4242"), "the live record lists the host queue")
	assert.True(t, alive("default"), "shared queue served by both")
	assert.False(t, alive("default@worker9-1"), "unknown queue")
	assert.False(t, alive("default@worker1"), "a prefix of a listed queue is not that queue")

	require.NoError(t, e.store.UnregisterPipeline(ctx, other))
	assert.False(t, alive("default@worker2-7"), "a cleanly stopped worker is not alive")
	assert.True(t, alive("default@worker1-4242"))

	e.srv.FastForward(1100 * time.Millisecond)
	require.Eventually(t, func() bool { return !alive("default@worker1-4242") },
		30*time.Second, 50*time.Millisecond, "a crashed worker's record expires")
	assert.Equal(t, []string{"pipeline:" + p.ID}, e.rdb.SMembers(ctx, "pipelines").Val(),
		"QueueAlive only reads: the stale member is left for ListPipelines to prune")
}

func TestQueueAliveMalformedRecord(t *testing.T) {
	e := newEnv(t, Options{PipelineTTL: 30 * time.Second})
	ctx := ctxT(t)
	p := testPipeline(t)
	p.TaskQueues = []string{"default@worker1-4242"}
	require.NoError(t, e.store.RegisterPipeline(ctx, p))
	require.NoError(t, e.rdb.SAdd(ctx, "pipelines", "pipeline:abcd").Err())
	require.NoError(t, e.rdb.HSet(ctx, "pipeline:abcd", "task_queues", "not json").Err())

	ok, err := e.store.QueueAlive(ctx, "default@worker1-4242")
	require.NoError(t, err, "another record lists the queue")
	assert.True(t, ok)

	ok, err = e.store.QueueAlive(ctx, "default@worker2-7")
	require.Error(t, err, "cannot tell: the malformed record might serve the queue")
	assert.False(t, ok)
	assert.True(t, IsMalformed(err))
	assert.Contains(t, err.Error(), "pipeline:abcd field task_queues")

	_, err = e.store.QueueAlive(ctx, "")
	assert.ErrorContains(t, err, "task queue must not be empty")
}

func TestQueueAliveRedisDown(t *testing.T) {
	e := newEnv(t, Options{})
	require.NoError(t, e.rdb.Close())
	_, err := e.store.QueueAlive(ctxT(t), "default@worker1-4242")
	assert.ErrorContains(t, err, "queue alive default@worker1-4242: list pipelines")
}

func TestQueueLeaseIsTheRecordsRemainingTTL(t *testing.T) {
	e := newEnv(t, Options{PipelineTTL: 30 * time.Second})
	ctx := ctxT(t)
	p := testPipeline(t)
	p.TaskQueues = []string{"default@worker1-4242"}
	lease, err := e.store.QueueLease(ctx, "default@worker1-4242")
	require.NoError(t, err)
	assert.Zero(t, lease, "no record")

	require.NoError(t, e.store.RegisterPipeline(ctx, p))
	lease, err = e.store.QueueLease(ctx, "default@worker1-4242")
	require.NoError(t, err)
	assert.InDelta(t, float64(30*time.Second), float64(lease), float64(2*time.Second), "a fresh record has the whole TTL left")

	e.srv.FastForward(20 * time.Second)
	lease, err = e.store.QueueLease(ctx, "default@worker1-4242")
	require.NoError(t, err)
	assert.InDelta(t, float64(10*time.Second), float64(lease), float64(2*time.Second), "20 s later, 10 s are left")

	require.NoError(t, e.rdb.Persist(ctx, "pipeline:"+p.ID).Err())
	lease, err = e.store.QueueLease(ctx, "default@worker1-4242")
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, lease, "a record without expiry counts as freshly refreshed")
}
