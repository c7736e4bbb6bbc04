package devserver

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
)

// noop is the benchmark activity: all its cost is orchestration.
func noop(context.Context) error { return nil }

// sequentialNoops runs n no-op activities one after the other.
func sequentialNoops(ctx workflow.Context, n int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	for i := 0; i < n; i++ {
		if err := workflow.ExecuteActivity(ctx, "noop").Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkActivityRoundTrip measures the orchestration floor: the time
// from one activity's completion to the next one's completion in a
// workflow that runs b.N no-op activities sequentially, on the same host
// as the embedded server. Reported as ms/activity.
//
// "tuned" is the dev server as shipped (in-memory), "tuned-sqlite-file"
// the same on a SQLite file (WAL), and "stock-poll-rps" puts the history
// queue poll rates and task queue partitions back to Temporal's defaults
// to show what the tuning buys.
func BenchmarkActivityRoundTrip(b *testing.B) {
	configs := []struct {
		name       string
		persistent bool
		dyn        map[string]any
	}{
		{"tuned", false, nil},
		{"tuned-sqlite-file", true, nil},

		{"stock-poll-rps", false, map[string]any{
			"history.transferProcessorMaxPollRPS":  20,
			"history.timerProcessorMaxPollRPS":     20,
			"matching.numTaskqueueReadPartitions":  4,
			"matching.numTaskqueueWritePartitions": 4,
		}},
	}
	for _, cfg := range configs {
		b.Run(cfg.name, func(b *testing.B) {
			opts := Options{UIPort: NoUI, Log: zap.NewNop(), DynamicConfig: cfg.dyn}
			if cfg.persistent {
				opts.DataDir = b.TempDir()
			}
			s, err := Start(context.Background(), opts)
			require.NoError(b, err)
			defer func() { require.NoError(b, s.Stop()) }()
			c, err := client.Dial(client.Options{
				HostPort: s.HostPort(), Namespace: s.Namespace(),
				Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
			})
			require.NoError(b, err)
			defer c.Close()
			w := worker.New(c, "bench", worker.Options{})
			w.RegisterWorkflowWithOptions(sequentialNoops, workflow.RegisterOptions{Name: "sequential-noops"})
			w.RegisterActivityWithOptions(noop, activity.RegisterOptions{Name: "noop"})
			require.NoError(b, w.Start())
			defer w.Stop()

			ctx := context.Background()
			// Warm-up: first task queue use, worker pollers, caches.
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "bench"}, "sequential-noops", 3)
			require.NoError(b, err)
			require.NoError(b, run.Get(ctx, nil))

			b.ResetTimer()
			run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "bench"}, "sequential-noops", b.N)
			require.NoError(b, err)
			require.NoError(b, run.Get(ctx, nil))
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/activity")
		})
	}
}
