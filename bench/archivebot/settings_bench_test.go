//go:build dev && bench

package archivebotbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/abbot"
	"github.com/archiveflow/archiveflow/internal/abpipeline"
	"github.com/archiveflow/archiveflow/internal/e2e"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// appliedRunner reports the concurrency of every set_settings update the
// pipeline completed (the workflow has applied it and Redis has it).
type appliedRunner struct {
	abpipeline.Runner
	applied chan int
}

func (r *appliedRunner) SetSettings(ctx context.Context, ident, updateID string, s model.Settings) error {
	err := r.Runner.SetSettings(ctx, ident, updateID, s)
	if err == nil {
		r.applied <- s.Concurrency
	}
	return err
}

// BenchmarkBotSettingsDelay measures the delay from the bot's `!con` (HSET,
// HINCRBY settings_age, PUBLISH, as lib/job.rb) to the running workflow
// having applied the new concurrency through its set_settings update
// ("bot"), against the same update sent directly, as `starter set` does
// ("direct", the floor), in the same run.
func BenchmarkBotSettingsDelay(b *testing.B) {
	srv := e2e.SharedServer(b)
	root := b.TempDir()
	dir := filepath.Join(root, "slow")
	require.NoError(b, os.MkdirAll(dir, 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(dir, "on_Snapshot__10_slow.sh"), []byte("#!/bin/sh\nsleep 3600\n"), 0o755))
	s := e2e.NewStack(b, srv, root, func(c *config.Config) {
		c.Pools[0].ArchiveBot = &config.ArchiveBotPool{Nickname: "bench"}
		c.ArchiveBot.PollInterval = 100 * time.Millisecond
		c.Hooks.Timeout = 2 * time.Hour
	})
	s.StartPools(b, nil)
	inner := &abpipeline.TemporalRunner{Config: s.Config, Client: s.Client, Pool: s.Config.Pools[0]}
	runner := &appliedRunner{Runner: inner, applied: make(chan int, 16)}
	ab := s.Config.ArchiveBot
	p, err := abpipeline.New(s.Store, runner, abpipeline.Options{
		Nickname: "bench", PipelineID: "bench1", TaskQueue: s.Config.Pools[0].TaskQueue, MaxJobs: 1,
		PollInterval: ab.PollInterval, ClaimLease: ab.ClaimLease, WatchInterval: ab.WatchInterval,
	}, zaptest.NewLogger(b, zaptest.Level(zap.InfoLevel)))
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })

	bot := abbot.Bot{Redis: s.Redis}
	// A URL (ident) of its own per run: the shared server outlives the stack.
	job, err := bot.Queue(ctx, fmt.Sprintf("http://127.0.0.1:1/bench/%d", time.Now().UnixNano()), abbot.Options{Shallow: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Client.TerminateWorkflow(context.Background(), job.Ident, "", "benchmark done") })
	require.Eventually(b, func() bool {
		v, err := s.Store.GetJob(ctx, job.Ident)
		return err == nil && v.State == model.StateActive
	}, 5*time.Minute, 10*time.Millisecond, "the job runs")
	// The watcher's first look at the job settles before measuring.
	time.Sleep(2 * ab.WatchInterval)
	for len(runner.applied) > 0 {
		<-runner.applied
	}

	var botTotal, directTotal time.Duration
	b.ResetTimer()
	for i := range b.N {
		n := 10 + i%2
		t0 := time.Now()
		require.NoError(b, bot.SetConcurrency(ctx, job.Ident, n))
		for got := range runner.applied {
			if got == n {
				break
			}
		}
		botTotal += time.Since(t0)

		set := model.Settings{Concurrency: 20 + i%2, DelayMinMS: 250, DelayMaxMS: 375}
		t0 = time.Now()
		h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: job.Ident, UpdateName: workflows.UpdateSetSettings, Args: []any{set},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		require.NoError(b, err)
		require.NoError(b, h.Get(ctx, nil))
		directTotal += time.Since(t0)
	}
	b.StopTimer()
	botMS := float64(botTotal.Microseconds()) / 1000 / float64(b.N)
	directMS := float64(directTotal.Microseconds()) / 1000 / float64(b.N)
	b.ReportMetric(botMS, "bot-ms/op")
	b.ReportMetric(directMS, "direct-ms/op")
	b.ReportMetric(botMS/directMS, "bot/direct")
}
