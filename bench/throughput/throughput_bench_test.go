//go:build dev && bench

package throughput

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/e2e"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

var (
	snapshots = flag.Int("snapshots", 200, "snapshots per batch")
	only      = flag.String("only", "", `run only one side: "archiveflow" or "bare" (for profiling; no ratio)`)
	workerCPU = flag.String("workerprofile", "", "write each worker process's CPU profile to this path + .NAME")
	attrDelay = flag.Duration("attrdelay", 0, "job.step_attribute_delay for archiveflow (0: the default), to size the search-attribute upserts")
	hostSteps = flag.String("hoststeps", "both", "job.host_steps for archiveflow: both (one activity per hook, then one per segment, in one run), true or false")
)

const (
	steps        = 10
	hooksPerStep = 2
	hooks        = steps * hooksPerStep
	batchTimeout = 30 * time.Minute
	benchWorker  = "github.com/archiveflow/archiveflow/bench/throughput/benchworker"
)

// BenchmarkThroughput runs, for 1, 2 and 4 worker processes, the batch on
// archiveflow and the same number of bare snapshots (the platform ceiling)
// on the same server with as many bare worker processes, and reports both
// and their ratio.
// TestMain removes the binaries the benchmarks built (e2e.BuildCommand).
func TestMain(m *testing.M) {
	code := m.Run()
	e2e.RemoveBuilds()
	os.Exit(code)
}

func BenchmarkThroughput(b *testing.B) {
	bin := e2e.BuildCommand(b, benchWorker)
	modes, err := benchkit.StepModes(*hostSteps)
	require.NoError(b, err)
	for _, m := range modes {
		for _, n := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/workers=%d", m.Name, n), func(b *testing.B) { benchThroughput(b, bin, n, m.HostSteps) })
		}
	}
}

// side is one set of worker processes and how to run a batch on it.
type side struct {
	name  string
	procs []*exec.Cmd
	// counts are the files the processes write their Redis round trips to.
	counts []string
	submit func(tag string, i int) (client.WorkflowRun, error)
	check  func(run client.WorkflowRun) error
}

// measure is what one batch cost.
type measure struct {
	wall       time.Duration
	cpu        cpuSplit
	roundTrips int64
	events     benchkit.EventCounts
}

func benchThroughput(b *testing.B, bin string, workers int, hostSteps bool) {
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
		// ask HostAlive again and again (see docs/benchmarks.md).
		cfg.Job.HostTimeout = 30 * time.Minute
		if *attrDelay > 0 {
			cfg.Job.StepAttributeDelay = *attrDelay
		}
		cfg.Job.HostSteps = hostSteps
	})
	af := &side{name: "archiveflow"}
	af.submit = func(tag string, i int) (client.WorkflowRun, error) {
		j := st.Submit(b, fmt.Sprintf("http://127.0.0.1:1/throughput/%s/%s/%d", b.Name(), tag, i), nil)
		return j.Run, nil
	}
	af.check = func(run client.WorkflowRun) error {
		var s workflows.Status
		if err := run.Get(context.Background(), &s); err != nil {
			return err
		}
		if s.State != model.StateFinished {
			return fmt.Errorf("job %s: state %s: %s", s.Ident, s.State, s.Error)
		}
		return nil
	}
	bareCfg := *st.Config
	bareCfg.Pools = []config.Pool{st.Config.Pools[0]}
	bareCfg.Pools[0].TaskQueue += "-bare"
	bareCfg.Job.TaskQueue = bareCfg.Pools[0].TaskQueue
	bare := &side{name: "bare"}
	bare.submit = func(tag string, i int) (client.WorkflowRun, error) {
		opts := client.StartWorkflowOptions{
			ID:        fmt.Sprintf("bare/%s/%s/%d", b.Name(), tag, i),
			TaskQueue: bareCfg.Pools[0].TaskQueue,
		}
		in := map[string]int{"steps": steps, "hooks_per_step": hooksPerStep, "concurrency": hooksPerStep}
		return st.Client.ExecuteWorkflow(context.Background(), opts, "BareSnapshot", in)
	}
	bare.check = func(run client.WorkflowRun) error { return run.Get(context.Background(), nil) }

	countsDir := b.TempDir()
	for i := range workers {
		for _, s := range []struct {
			side *side
			cfg  *config.Config
			mode string
		}{{af, st.Config, "archiveflow"}, {bare, &bareCfg, "bare"}} {
			name := fmt.Sprintf("%s%d", s.mode, i+1)
			counts := filepath.Join(countsDir, name)
			env := []string{"ARCHIVEFLOW_LOG_LEVEL=warn", "BENCHWORKER_MODE=" + s.mode, "BENCHWORKER_COUNTS=" + counts}
			if *workerCPU != "" {
				env = append(env, "BENCHWORKER_CPUPROFILE="+*workerCPU+"."+name)
			}
			s.side.procs = append(s.side.procs, e2e.StartWorker(b, bin, s.cfg, name, env...))
			s.side.counts = append(s.side.counts, counts)
		}
	}
	// Warm up every worker's pollers with one snapshot each.
	for _, s := range []*side{bare, af} {
		_, err := runBatch(b, st, s, "warm", workers)
		require.NoError(b, err, s.name)
	}

	var afM, bareM []measure
	b.ResetTimer()
	for i := range b.N {
		// Bare first, then archiveflow, back to back: the same load.
		if *only != "archiveflow" {
			m, err := measureBatch(b, st, bare, fmt.Sprintf("run%d", i))
			require.NoError(b, err, "bare")
			bareM = append(bareM, m)
		}
		if *only != "bare" {
			m, err := measureBatch(b, st, af, fmt.Sprintf("run%d", i))
			require.NoError(b, err, "archiveflow")
			afM = append(afM, m)
		}
	}
	b.StopTimer()
	report(b, workers, sum(afM), sum(bareM))
}

// measureBatch runs one batch of side and reads what it cost: CPU and
// Redis round trips around the batch, then (outside that window) the
// events of every run's history.
func measureBatch(b *testing.B, st *e2e.Stack, s *side, tag string) (measure, error) {
	redisPID := redisPID(b, st)
	cpu0, rt0 := cpuOf(b, s.procs, redisPID), roundTrips(b, s)
	t0 := time.Now()
	runs, err := runBatch(b, st, s, tag, *snapshots)
	if err != nil {
		return measure{}, err
	}
	m := measure{wall: time.Since(t0)}
	m.cpu = cpuOf(b, s.procs, redisPID).sub(cpu0)
	m.roundTrips = roundTrips(b, s) - rt0
	for _, run := range runs {
		m.events.Add(history(b, st.Client, run))
	}
	return m, nil
}

// runBatch submits n snapshots of side at once and waits for all of them.
func runBatch(b *testing.B, st *e2e.Stack, s *side, tag string, n int) ([]client.WorkflowRun, error) {
	b.Helper()
	runs := make([]client.WorkflowRun, n)
	for i := range runs {
		run, err := s.submit(tag, i)
		if err != nil {
			return nil, fmt.Errorf("submit %s %s/%d: %w", s.name, tag, i, err)
		}
		runs[i] = run
	}
	errs := make(chan error, n)
	for _, run := range runs {
		go func() { errs <- s.check(run) }()
	}
	deadline := time.After(batchTimeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var all []error
	for len(all) < n {
		select {
		case err := <-errs:
			all = append(all, err)
		case <-tick.C:
			if err := exited(s.procs); err != nil {
				return nil, fmt.Errorf("%s batch %s: %w", s.name, tag, err)
			}
		case <-deadline:
			return nil, fmt.Errorf("%s batch %s not done within %s", s.name, tag, batchTimeout)
		}
	}
	return runs, errors.Join(all...)
}

// exited reports a worker process that is gone (a zombie: it exited and
// waits for StartWorker's cleanup to reap it).
func exited(procs []*exec.Cmd) error {
	for _, p := range procs {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Process.Pid))
		if err != nil {
			return fmt.Errorf("worker process %d: %w", p.Process.Pid, err)
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			return fmt.Errorf("worker process %d exited (its log is printed at the end)", p.Process.Pid)
		}
	}
	return nil
}

func history(b *testing.B, c client.Client, run client.WorkflowRun) []*historypb.HistoryEvent {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events, err := benchkit.History(ctx, c, run.GetID(), run.GetRunID())
	require.NoError(b, err)
	return events
}

func sum(ms []measure) measure {
	var t measure
	for _, m := range ms {
		t.wall += m.wall
		t.cpu = t.cpu.add(m.cpu)
		t.roundTrips += m.roundTrips
		t.events.Merge(m.events)
	}
	return t
}

func report(b *testing.B, workers int, af, bare measure) {
	n := float64(b.N * *snapshots * hooks)
	rate := func(m measure) float64 { return n / m.wall.Seconds() }
	perHook := func(d time.Duration) float64 { return benchkit.Millis(d) / n }
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("%d worker process(es), %d × %d snapshots × %d no-op hooks; load %s", workers, b.N, *snapshots, hooks, strings.TrimSpace(string(load)))
	for _, s := range []struct {
		prefix string
		m      measure
	}{{"", af}, {"bare-", bare}} {
		if s.m.wall == 0 {
			continue // -only
		}
		b.ReportMetric(rate(s.m), s.prefix+"hooks/s")
		b.ReportMetric(perHook(s.m.cpu.server), s.prefix+"ms-server/hook")
		b.ReportMetric(perHook(s.m.cpu.workers), s.prefix+"ms-worker/hook")
		b.ReportMetric(float64(s.m.events.Events)/n, s.prefix+"events/hook")
		b.ReportMetric(float64(s.m.events.WorkflowTasks)/n, s.prefix+"wft/hook")
		name := strings.TrimSuffix(s.prefix, "-")
		if name == "" {
			name = "archiveflow"
			b.ReportMetric(perHook(s.m.cpu.hooks), "ms-hookproc/hook")
			b.ReportMetric(perHook(s.m.cpu.redis), "ms-redis/hook")
			b.ReportMetric(float64(s.m.roundTrips)/n, "redis-rt/hook")
		}
		b.Logf("%s: %.1f hooks/s, wall %s; CPU ms per hook: Temporal server+bench %.2f, workers %.2f, hook processes %.2f, redis %.2f; "+
			"Redis round trips per hook %.2f; per hook %.2f events, %.2f workflow tasks: %s",
			name, rate(s.m), s.m.wall.Round(time.Millisecond), perHook(s.m.cpu.server), perHook(s.m.cpu.workers),
			perHook(s.m.cpu.hooks), perHook(s.m.cpu.redis), float64(s.m.roundTrips)/n,
			float64(s.m.events.Events)/n, float64(s.m.events.WorkflowTasks)/n, s.m.events.PerUnit(n))
	}
	if af.wall > 0 && bare.wall > 0 {
		b.ReportMetric(rate(af)/rate(bare), "ratio")
	}
}

type cpuSplit struct{ server, workers, hooks, redis time.Duration }

func (c cpuSplit) sub(o cpuSplit) cpuSplit {
	return cpuSplit{c.server - o.server, c.workers - o.workers, c.hooks - o.hooks, c.redis - o.redis}
}

func (c cpuSplit) add(o cpuSplit) cpuSplit {
	return cpuSplit{c.server + o.server, c.workers + o.workers, c.hooks + o.hooks, c.redis + o.redis}
}

func redisPID(b *testing.B, st *e2e.Stack) int {
	b.Helper()
	rs, err := benchkit.ReadRedisStats(context.Background(), st.Redis)
	require.NoError(b, err)
	return rs.PID
}

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

// roundTrips asks every process of s for its Redis round trips so far
// (SIGUSR1, then the count file appears) and returns their sum.
func roundTrips(b *testing.B, s *side) int64 {
	b.Helper()
	var total int64
	for i, p := range s.procs {
		_ = os.Remove(s.counts[i])
		require.NoError(b, p.Process.Signal(syscall.SIGUSR1))
		var data []byte
		require.Eventually(b, func() bool {
			var err error
			data, err = os.ReadFile(s.counts[i])
			return err == nil
		}, 30*time.Second, 5*time.Millisecond, "round-trip count of %s", s.counts[i])
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		require.NoError(b, err)
		total += n
	}
	return total
}
