//go:build cluster

package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/internal/cluster"
)

var (
	snapshots = flag.Int("snapshots", 50, "snapshots per batch")
	durable   = flag.Bool("durable", true, "PostgreSQL with fsync and synchronous commit (its defaults, as in docker-compose.yml)")
)

const (
	steps        = 10
	hooksPerStep = 2
	hooks        = steps * hooksPerStep
)

// BenchmarkClusterThroughput runs the batch with 1 and 2 worker processes
// on one cluster (PostgreSQL and a Temporal server process).
func BenchmarkClusterThroughput(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bins, err := cluster.Build(ctx, b.TempDir())
	require.NoError(b, err)
	c, err := cluster.Start(ctx, bins, b.TempDir(), cluster.Options{Durable: *durable})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, c.Stop()) })
	b.Logf("%s; PostgreSQL durable: %v", c, *durable)

	root := b.TempDir()
	for step := range steps {
		for i := range hooksPerStep {
			nn := fmt.Sprintf("%d%d", step, i)
			_, err := benchkit.WriteHook(root, "p"+nn, "on_Snapshot__"+nn+"_noop.sh", "exit 0")
			require.NoError(b, err)
		}
	}
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) { benchThroughput(b, c, root, n) })
	}
}

func benchThroughput(b *testing.B, c *cluster.Cluster, plugins string, workers int) {
	e := cluster.NewEnv(b, c.Bins, c.Temporal, c.Namespace, cluster.EnvOptions{Plugins: plugins, Vars: []string{
		"ARCHIVEFLOW_JOB_CONCURRENCY=" + fmt.Sprint(hooksPerStep),
		// As bench/throughput: the whole batch is claimed at once, hooks
		// wait behind it; a short host timeout would read that as a lost
		// host (docs/benchmarks.md).
		"ARCHIVEFLOW_JOB_HOST_TIMEOUT=30m",
		"ARCHIVEFLOW_WORKER_STATS_INTERVAL=5s",
		"ARCHIVEFLOW_WORKER_PIPELINE_TTL=1m",
		"ARCHIVEFLOW_LOG_LEVEL=warn",
	}})
	var procs []*cluster.Worker
	for i := range workers {
		procs = append(procs, e.StartWorker(b, fmt.Sprintf("w%d", i+1)))
	}
	// Warm up every worker's pollers with one snapshot each.
	batch(b, e, "warm", workers)

	ctx := context.Background()
	redis0, err := benchkit.ReadRedisStats(ctx, e.Redis)
	require.NoError(b, err)
	cpu0 := cpuOf(b, c, procs, redis0.PID)
	wall := benchkit.Batches(b, func(i int) { batch(b, e, fmt.Sprintf("run%d", i), *snapshots) })
	cpu1 := cpuOf(b, c, procs, redis0.PID)

	benchkit.ReportThroughput(b, *snapshots, hooks, wall)
	n := float64(b.N * *snapshots)
	secs := wall.Seconds()
	d := cpu1.sub(cpu0)
	b.ReportMetric(d.server.Seconds()/secs, "cores-temporal")
	b.ReportMetric(d.postgres.Seconds()/secs, "cores-postgres")
	b.ReportMetric(d.workers.Seconds()/secs, "cores-workers")
	b.ReportMetric(d.hooks.Seconds()/secs, "cores-hooks")
	b.ReportMetric(d.redis.Seconds()/secs, "cores-redis")
	b.ReportMetric(d.server.Seconds()*1000/(n*hooks), "ms-temporal-cpu/hook")
	b.ReportMetric(d.postgres.Seconds()*1000/(n*hooks), "ms-postgres-cpu/hook")
	b.Logf("%d worker process(es), %d snapshots × %d no-op hooks in %s; CPU seconds: Temporal server %.1f, PostgreSQL %.1f, workers %.1f, hooks %.1f, redis %.1f, starter+bench %.1f",
		workers, b.N**snapshots, hooks, wall.Round(time.Millisecond), d.server.Seconds(), d.postgres.Seconds(),
		d.workers.Seconds(), d.hooks.Seconds(), d.redis.Seconds(), d.self.Seconds())
}

// batch submits n snapshots with one `starter submit` and waits until
// Redis shows all of them finished.
func batch(b *testing.B, e *cluster.Env, tag string, n int) {
	b.Helper()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://127.0.0.1:1/cluster-throughput/%s/%s/%d", b.Name(), tag, i)
	}
	ctx := context.Background()
	before := finished(b, e.Redis)
	e.Submit(b, urls)
	deadline := time.Now().Add(30 * time.Minute)
	for finished(b, e.Redis) < before+int64(n) {
		if failed := e.Redis.SCard(ctx, "state:failed").Val(); failed > 0 {
			b.Fatalf("%d jobs failed", failed)
		}
		if time.Now().After(deadline) {
			b.Fatalf("batch %s: %d of %d jobs finished after 30 min", tag, finished(b, e.Redis)-before, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func finished(b *testing.B, rdb *redis.Client) int64 {
	n, err := rdb.SCard(context.Background(), "state:finished").Result()
	require.NoError(b, err)
	return n
}

type cpuSplit struct{ server, postgres, workers, hooks, redis, self time.Duration }

func (c cpuSplit) sub(o cpuSplit) cpuSplit {
	return cpuSplit{c.server - o.server, c.postgres - o.postgres, c.workers - o.workers, c.hooks - o.hooks, c.redis - o.redis, c.self - o.self}
}

// cpuOf reads the CPU spent so far by the Temporal server process,
// PostgreSQL (postmaster and backends), the worker processes, the hooks
// they reaped, the Redis server, and this process with the starters it ran.
func cpuOf(b *testing.B, c *cluster.Cluster, workers []*cluster.Worker, redisPID int) cpuSplit {
	b.Helper()
	var s cpuSplit
	ts, err := benchkit.ReadProc(c.Temporal.Proc().Pid())
	require.NoError(b, err)
	s.server = ts.CPU
	pgPID, err := c.Postgres.PID()
	require.NoError(b, err)
	s.postgres, err = benchkit.TreeCPU(pgPID)
	require.NoError(b, err)
	for _, w := range workers {
		ps, err := benchkit.ReadProc(w.Pid())
		require.NoError(b, err)
		s.workers += ps.CPU
		s.hooks += ps.ChildCPU
	}
	rs, err := benchkit.ReadProc(redisPID)
	require.NoError(b, err)
	s.redis = rs.CPU
	self, err := benchkit.ReadProc(os.Getpid())
	require.NoError(b, err)
	s.self = self.CPU + self.ChildCPU
	return s
}
