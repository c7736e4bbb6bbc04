package pools

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/diskguard"
	"github.com/archiveflow/archiveflow/internal/pipelinelock"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// mnbot's tags on task queues: a match_only pool polls only its tag
// queues, a tagged one its own queue too; an ArchiveBot pipeline has its
// nickname as a tag (the jobs it claims from pending:NAME).
func TestSharedQueuesFollowTagsAndMatchOnly(t *testing.T) {
	p := config.Pool{Name: "p", TaskQueue: "q", Slots: 2}
	assert.Equal(t, []string{"q"}, SharedQueues(p))
	p.Tags = []string{"big", "gpu"}
	assert.Equal(t, []string{"q", "q#big", "q#gpu"}, SharedQueues(p))
	p.MatchOnly = true
	assert.Equal(t, []string{"q#big", "q#gpu"}, SharedQueues(p))
	p.Tags = nil
	assert.Empty(t, SharedQueues(p), "a match_only pool without tags polls nothing (refused at start)")

	// The purge schedule's queue (the job queue by default) is polled by
	// no pool of a worker whose pools are all match_only: it says so.
	p.Tags = []string{"big"}
	assert.False(t, pollsQueue([]config.Pool{p}, "q"))
	assert.True(t, pollsQueue([]config.Pool{p, {Name: "g", TaskQueue: "q", Slots: 1}}, "q"))
	assert.True(t, pollsQueue([]config.Pool{p}, "q#big"), "purge.task_queue may name a tag queue")

	cfg := config.Default()
	ab := config.Pool{Name: "ab", TaskQueue: "abq", Slots: 1, Tags: []string{"big"}, ArchiveBot: &config.ArchiveBotPool{Nickname: "mybox"}}
	assert.Equal(t, []string{"big", "mybox"}, Tags(&cfg, ab))
	assert.Equal(t, []string{"big"}, ab.Tags, "the configured tags are left as they are")
	ab.ArchiveBot.Nickname = "my box!"
	assert.Equal(t, []string{"big"}, Tags(&cfg, ab), "a nickname that cannot be a tag is none")
}

// The shared queues of a pool share its slots; its routed-page queue has
// as many of its own (an idle poller holds a slot: it must not starve the
// shared queues). The disk guard holds both, the claim lock only the
// shared queues'; both refuse through either.
func TestClaimingWorkersSlotsAndGates(t *testing.T) {
	p := config.Pool{Name: "p", TaskQueue: "q", Slots: 1}
	shared, routed, err := claimGates{}.slots(p)
	require.NoError(t, err)
	assert.Equal(t, 1, shared.MaxSlots())
	require.NotNil(t, shared.TryReserveSlot(nil))
	assert.Nil(t, shared.TryReserveSlot(nil), "a second shared queue's worker shares the one slot")
	assert.NotNil(t, routed.TryReserveSlot(nil), "the routed-page queue's are its own")
	assert.Nil(t, routed.TryReserveSlot(nil))

	guard, err := diskguard.New(t.TempDir(), 0, nil, nil)
	require.NoError(t, err)
	srv := testredis.Start(t)
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	lock := pipelinelock.New(store, "p1", nil)
	lock.Set("locked")
	gates := claimGates{guard: guard, lock: lock}
	shared, routed, err = gates.slots(p)
	require.NoError(t, err)
	assert.Nil(t, shared.TryReserveSlot(nil), "locked: no shared slot")
	permit := routed.TryReserveSlot(nil)
	require.NotNil(t, permit, "locked: the routed pages run")
	routed.ReleaseSlot(nil)
	guard.Hold("maintenance", "host-wide maintenance")
	assert.Nil(t, routed.TryReserveSlot(nil), "the guard holds the routed pages")
	lock.Set("")
	assert.Nil(t, shared.TryReserveSlot(nil), "and the shared queues")

	opts, err := gates.options(WorkerOptions(&config.Config{}, p), routed)
	require.NoError(t, err)
	assert.NotNil(t, opts.Tuner)
	assert.Zero(t, opts.MaxConcurrentActivityExecutionSize)
	assert.Len(t, opts.Interceptors, 2, "the lock's refusal and the guard's")
	assert.Equal(t, "q@w-1/pages", PageQueue(p, "w-1"))
}
