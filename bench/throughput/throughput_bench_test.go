//go:build dev

package throughput

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/e2e"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

var snapshots = flag.Int("snapshots", 200, "snapshots per batch")

const (
	steps        = 10
	hooksPerStep = 2
	hooks        = steps * hooksPerStep
)

// BenchmarkThroughput runs the batch with 1, 2 and 4 worker processes.
func BenchmarkThroughput(b *testing.B) {
	bin := e2e.BuildWorkers(b)
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) { benchThroughput(b, bin, n) })
	}
}

func benchThroughput(b *testing.B, bin string, workers int) {
	srv := e2e.SharedServer(b)
	root := b.TempDir()
	for step := range steps {
		for i := range hooksPerStep {
			nn := fmt.Sprintf("%d%d", step, i)
			_, err := benchkit.WriteHook(root, "p"+nn, "on_Snapshot__"+nn+"_noop.sh", "exit 0")
			require.NoError(b, err)
		}
	}
	st := e2e.NewStack(b, srv, root, func(cfg *config.Config) {
		cfg.Job.Concurrency = hooksPerStep
		// The whole batch is claimed at once, so hooks wait on the host
		// queues behind thousands of others: a short host timeout would
		// read that backlog as a lost host (see docs/benchmarks.md).
		cfg.Job.HostTimeout = 30 * time.Minute
		cfg.Worker.StatsInterval = 5 * time.Second
		cfg.Worker.PipelineTTL = time.Minute
	})
	var procs []*exec.Cmd
	for i := range workers {
		procs = append(procs, e2e.StartWorker(b, bin, st.Config, fmt.Sprintf("w%d", i+1), "ARCHIVEFLOW_LOG_LEVEL=warn"))
	}
	// Warm up every worker's pollers with one snapshot each.
	batch(b, st, "warm", workers)

	ctx := context.Background()
	redis0, err := benchkit.ReadRedisStats(ctx, st.Redis)
	require.NoError(b, err)
	cpu0 := cpuOf(b, procs, redis0.PID)
	wall := benchkit.Batches(b, func(i int) { batch(b, st, fmt.Sprintf("run%d", i), *snapshots) })
	redis1, err := benchkit.ReadRedisStats(ctx, st.Redis)
	require.NoError(b, err)
	cpu1 := cpuOf(b, procs, redis0.PID)

	benchkit.ReportThroughput(b, *snapshots, hooks, wall)
	n := float64(b.N * *snapshots)
	secs := wall.Seconds()
	b.ReportMetric((cpu1.server-cpu0.server).Seconds()/secs, "cores-server")
	b.ReportMetric((cpu1.workers-cpu0.workers).Seconds()/secs, "cores-workers")
	b.ReportMetric((cpu1.hooks-cpu0.hooks).Seconds()/secs, "cores-hooks")
	b.ReportMetric((cpu1.redis-cpu0.redis).Seconds()/secs, "cores-redis")
	b.ReportMetric(float64(redis1.Sub(redis0).Commands)/n/hooks, "redis-cmds/hook")
	b.Logf("%d worker process(es), %d snapshots × %d no-op hooks in %s; CPU seconds: Temporal server+bench %.1f, workers %.1f, hooks %.1f, redis %.1f",
		workers, b.N**snapshots, hooks, wall.Round(time.Millisecond), (cpu1.server - cpu0.server).Seconds(),
		(cpu1.workers - cpu0.workers).Seconds(), (cpu1.hooks - cpu0.hooks).Seconds(), (cpu1.redis - cpu0.redis).Seconds())
}

// batch submits n snapshots at once and waits for all of them.
func batch(b *testing.B, st *e2e.Stack, tag string, n int) {
	b.Helper()
	jobs := make([]e2e.Job, n)
	for i := range jobs {
		jobs[i] = st.Submit(b, fmt.Sprintf("http://127.0.0.1:1/throughput/%s/%s/%d", b.Name(), tag, i), nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	errs := make(chan error, n)
	for _, j := range jobs {
		go func() {
			var s workflows.Status
			err := j.Run.Get(ctx, &s)
			if err == nil && s.State != model.StateFinished {
				err = fmt.Errorf("job %s: state %s: %s", j.Ident, s.State, s.Error)
			}
			errs <- err
		}()
	}
	for range jobs {
		require.NoError(b, <-errs)
	}
}

type cpuSplit struct{ server, workers, hooks, redis time.Duration }

// cpuOf reads the CPU spent so far by this process (Temporal server, the
// submitting client), the worker processes, the hooks they reaped, and
// the Redis server.
func cpuOf(b *testing.B, workers []*exec.Cmd, redisPID int) cpuSplit {
	b.Helper()
	var c cpuSplit
	self, err := benchkit.ReadProc(os.Getpid())
	require.NoError(b, err)
	c.server = self.CPU
	for _, w := range workers {
		ps, err := benchkit.ReadProc(w.Process.Pid)
		require.NoError(b, err)
		c.workers += ps.CPU
		c.hooks += ps.ChildCPU
	}
	rs, err := benchkit.ReadProc(redisPID)
	require.NoError(b, err)
	c.redis = rs.CPU
	return c
}
