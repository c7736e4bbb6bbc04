//go:build dev

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/abbot"
	"github.com/archiveflow/archiveflow/internal/devredis"
	"github.com/archiveflow/archiveflow/internal/devserver"
	"github.com/archiveflow/archiveflow/internal/model"
)

// TestDevServesArchiveBotPipelines: a pool configured as an ArchiveBot
// pipeline is served by `starter dev` as by `workers`: a job ArchiveBot's
// bot queues (`!ao`) is claimed and archived by the embedded stack, and
// the stack's first lines say the pool is an ArchiveBot pipeline.
func TestDevServesArchiveBotPipelines(t *testing.T) {
	root := t.TempDir()
	plugins := filepath.Join(root, "plugins")
	writeHook(t, plugins, "ok", "on_Snapshot__10_ok.sh", "#!/bin/sh\n"+`echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'`)
	c := config.Default()
	c.ArchiveDir = filepath.Join(root, "archive")
	c.Plugins.Dirs, c.Plugins.Builtin = []string{plugins}, false
	c.Pools[0].ArchiveBot = &config.ArchiveBotPool{Nickname: "devab"}
	c.ArchiveBot.PollInterval = 100 * time.Millisecond
	assert.Contains(t, poolNames(&c), c.Pools[0].Name+"→"+c.Pools[0].TaskQueue+" (ArchiveBot pipeline devab)")

	inv := &invocation{cfg: &c, log: zap.NewNop()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := startStack(ctx, inv, devredis.Options{DataDir: filepath.Join(root, "redis")},
		devserver.Options{DataDir: filepath.Join(root, "temporal"), UIPort: 0})
	require.NoError(t, err)
	t.Cleanup(st.stop)

	job, err := abbot.Bot{Redis: st.b.Redis}.Queue(ctx, "http://127.0.0.1:1/devab", abbot.Options{Shallow: true})
	require.NoError(t, err)
	var state model.JobState
	require.Eventually(t, func() bool {
		v, err := st.b.Store.GetJob(ctx, job.Ident)
		state = v.State
		return err == nil && state.Final()
	}, 2*time.Minute, 100*time.Millisecond, "the bot's job is claimed and ends")
	assert.Equal(t, model.StateFinished, state)
	_, err = os.Stat(filepath.Join(c.ArchiveDir, "snapshots", job.Ident, "ok"))
	assert.NoError(t, err, "the pool ran the job's hook")
}
