//go:build dev && bench

package overhead

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

// hostSteps chooses job.host_steps: both modes in one run (one activity
// per hook, then one per segment), or one of them.
var hostSteps = flag.String("hoststeps", "both", "job.host_steps: both, true or false")

const (
	steps        = 10
	hooksPerStep = 2
	hooks        = steps * hooksPerStep
	jobTimeout   = 2 * time.Minute
)

// writeHooks writes 2 hooks per step for steps 0..9 with body and returns
// their paths by step.
func writeHooks(b *testing.B, root, body string) [][]string {
	b.Helper()
	out := make([][]string, steps)
	for step := range steps {
		for i := range hooksPerStep {
			nn := fmt.Sprintf("%d%d", step, i)
			p, err := benchkit.WriteHook(root, "p"+nn, "on_Snapshot__"+nn+"_bench.sh", body)
			require.NoError(b, err)
			out[step] = append(out[step], p)
		}
	}
	return out
}

// BenchmarkOverhead runs one snapshot and one shell-loop floor per
// iteration, for no-op hooks and for hooks that sleep 100 ms, and reports
// the median and p95 of the ratio snapshot/floor, the per-hook overhead
// (snapshot − floor) / 20, where the snapshot's time went (from its
// history), orchestration CPU and Redis traffic per hook.
func BenchmarkOverhead(b *testing.B) {
	modes, err := benchkit.StepModes(*hostSteps)
	require.NoError(b, err)
	for _, m := range modes {
		for _, c := range []struct{ name, body string }{
			{"noop", "exit 0"},
			{"sleep100ms", "sleep 0.1"},
		} {
			b.Run(m.Name+"/"+c.name, func(b *testing.B) { benchOverhead(b, c.body, m.HostSteps) })
		}
	}
}

type sample struct {
	snap, floor time.Duration
	br          benchkit.Breakdown
}

func benchOverhead(b *testing.B, body string, hostSteps bool) {
	srv := e2e.SharedServer(b)
	root := b.TempDir()
	paths := writeHooks(b, root, body)
	st := e2e.NewStack(b, srv, root, func(cfg *config.Config) {
		// Both hooks of a step run at once, as in the floor; no pipeline
		// refresh traffic in the Redis figures.
		cfg.Job.Concurrency = hooksPerStep
		cfg.Worker.StatsInterval = time.Hour
		cfg.Worker.PipelineTTL = 2 * time.Hour
		cfg.Job.HostSteps = hostSteps
	})
	rt := &benchkit.RoundTrips{}
	st.Redis.AddHook(rt)
	st.StartPools(b, nil)

	run := 0
	snapshot := func() (time.Duration, e2e.Job) {
		run++
		t0 := time.Now()
		job := st.Submit(b, fmt.Sprintf("http://127.0.0.1:1/overhead/%s/%d", b.Name(), run), func(in *workflows.SnapshotInput) {
			in.SequentialSteps = []int{} // the floor runs every step in parallel
		})
		ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
		defer cancel()
		var status workflows.Status
		require.NoError(b, job.Run.Get(ctx, &status))
		d := time.Since(t0)
		require.Equal(b, model.StateFinished, status.State)
		require.Len(b, status.Hooks, hooks)
		return d, job
	}
	script := benchkit.FloorScript(paths, []string{"--url=http://127.0.0.1:1/overhead/floor", "--snapshot-id=floor"})
	floor := func() time.Duration {
		t0 := time.Now()
		out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
		require.NoError(b, err, "floor: %s", out)
		return time.Since(t0)
	}
	// Warm up pollers, sticky caches, script caches and the page cache.
	snapshot()
	floor()

	ctx := context.Background()
	redisBefore, err := benchkit.ReadRedisStats(ctx, st.Redis)
	require.NoError(b, err)
	rtBefore := rt.Load()
	var cpu time.Duration
	samples := make([]sample, 0, b.N)
	b.ResetTimer()
	for range b.N {
		before, err := benchkit.ReadProc(os.Getpid())
		require.NoError(b, err)
		snap, job := snapshot()
		after, err := benchkit.ReadProc(os.Getpid())
		require.NoError(b, err)
		cpu += after.CPU - before.CPU
		// Read the history outside the CPU window.
		samples = append(samples, sample{snap: snap, floor: floor(), br: breakdown(b, st, job, hostSteps)})
	}
	b.StopTimer()
	redisAfter, err := benchkit.ReadRedisStats(ctx, st.Redis)
	require.NoError(b, err)
	report(b, samples, cpu, rt.Load()-rtBefore, redisAfter.Sub(redisBefore))
}

// breakdown reads the job's history and splits its time.
func breakdown(b *testing.B, st *e2e.Stack, job e2e.Job, hostSteps bool) benchkit.Breakdown {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, err := benchkit.History(ctx, st.Client, job.Run.GetID(), job.Run.GetRunID())
	require.NoError(b, err)
	if hostSteps {
		// One RunSteps activity per segment: the hooks run inside it, so
		// dispatch and run per hook are the segment's divided by the hooks.
		br, err := benchkit.HistoryBreakdown(events, "RunSteps")
		require.NoError(b, err)
		return br
	}
	br, err := benchkit.HistoryBreakdown(events, "RunHook")
	require.NoError(b, err)
	require.Equal(b, hooks, br.Hooks)
	return br
}

func report(b *testing.B, samples []sample, cpu time.Duration, roundTrips int64, rs benchkit.RedisStats) {
	var ratio, over, snap, floor []float64
	var start, dispatch, run, between, end []float64
	for _, s := range samples {
		ratio = append(ratio, float64(s.snap)/float64(s.floor))
		over = append(over, benchkit.Millis(s.snap-s.floor)/hooks)
		snap = append(snap, benchkit.Millis(s.snap))
		floor = append(floor, benchkit.Millis(s.floor))
		start = append(start, benchkit.Millis(s.br.Start))
		dispatch = append(dispatch, benchkit.Millis(s.br.Dispatch)/hooks)
		run = append(run, benchkit.Millis(s.br.Run)/hooks)
		between = append(between, benchkit.Millis(s.br.Between)/float64(max(s.br.Batches-1, 1)))
		end = append(end, benchkit.Millis(s.br.End))
	}
	med := func(xs []float64) float64 { return benchkit.Quantile(xs, 0.5) }
	p95 := func(xs []float64) float64 { return benchkit.Quantile(xs, 0.95) }
	n := float64(len(samples))
	b.ReportMetric(med(ratio), "ratio-median")
	b.ReportMetric(p95(ratio), "ratio-p95")
	b.ReportMetric(med(over), "ms-overhead/hook-median")
	b.ReportMetric(p95(over), "ms-overhead/hook-p95")
	b.ReportMetric(med(snap), "ms/snapshot-median")
	b.ReportMetric(med(floor), "ms/floor-median")
	b.ReportMetric(benchkit.Millis(cpu)/n/hooks, "ms-cpu/hook")
	b.ReportMetric(float64(roundTrips)/n/hooks, "redis-roundtrips/hook")
	b.ReportMetric(float64(rs.Commands)/n/hooks, "redis-cmds/hook")
	b.ReportMetric(float64(rs.NetIn+rs.NetOut)/n/hooks, "redis-bytes/hook")
	b.Logf("history breakdown, medians over %d snapshots: start (claim+discover) %.1f ms; per hook: dispatch %.1f ms, run %.1f ms; "+
		"between steps %.1f ms per step; end (seal+final writes) %.1f ms; total %.1f ms vs floor %.1f ms",
		len(samples), med(start), med(dispatch), med(run), med(between), med(end), med(snap), med(floor))
}
