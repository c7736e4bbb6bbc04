package pools

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/slotgate"
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

// The shared queues of a pool share its slots: one supplier of the pool's
// size; one queue without a gate keeps the worker's own slots.
func TestSharedQueuesShareThePoolsSlots(t *testing.T) {
	p := config.Pool{Name: "p", TaskQueue: "q", Slots: 1}
	s, err := sharedSlots(p, 1, nil)
	require.NoError(t, err)
	assert.Nil(t, s)
	s, err = sharedSlots(p, 2, nil)
	require.NoError(t, err)
	require.NotNil(t, s)
	assert.Equal(t, 1, s.MaxSlots())
	require.NotNil(t, s.TryReserveSlot(nil))
	assert.Nil(t, s.TryReserveSlot(nil), "the second queue's worker shares the one slot")

	var lock slotgate.Switch
	lock.Set("locked")
	s, err = sharedSlots(p, 1, []slotgate.Gate{&lock})
	require.NoError(t, err)
	assert.Nil(t, s.TryReserveSlot(nil), "a closed gate: no slot")
	opts, err := gatedOptions(WorkerOptions(&config.Config{}, p), s)
	require.NoError(t, err)
	assert.NotNil(t, opts.Tuner)
	assert.Zero(t, opts.MaxConcurrentActivityExecutionSize)
}
