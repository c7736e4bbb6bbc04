package pools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/outbox"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// The pipeline record shows the job-log outbox's backlog, so an operator
// sees log batches that have not reached Redis yet and ones refused for good.
func TestPipelineReportsLogOutboxBacklog(t *testing.T) {
	srv := testredis.Start(t)
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	archive := t.TempDir()
	pipe, err := NewRedisPipeline(store, "w1", archive)
	require.NoError(t, err)
	ctx := context.Background()
	key := "pipeline:" + pipe.ID()

	require.NoError(t, pipe.Register(ctx, []string{"default"}))
	assert.False(t, srv.Client().HExists(ctx, key, "log_outbox_pending").Val(), "no outbox watched yet")

	dir := filepath.Join(archive, "outbox")
	ob, err := outbox.Open(dir, func(context.Context, []byte) error { return errors.New("redis down") }, zaptest.NewLogger(t), outbox.Options{})
	require.NoError(t, err)
	require.NoError(t, ob.Put([]byte("batch 1")))
	require.NoError(t, ob.Put([]byte("batch 2")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "rejected"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rejected", "0001.item"), []byte("refused"), 0o644))
	pipe.WatchLogOutbox(ob)

	require.NoError(t, pipe.Refresh(ctx))
	h := srv.Client().HGetAll(ctx, key).Val()
	assert.Equal(t, "2", h["log_outbox_pending"])
	assert.Equal(t, "1", h["log_outbox_rejected"])
}
