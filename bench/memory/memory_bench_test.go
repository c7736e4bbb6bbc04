//go:build dev && bench

package memory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/e2e"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

const (
	gib        = 1 << 30
	mib        = 1 << 20
	background = 50
	jobTimeout = 20 * time.Minute
	// floodLine is 64 bytes with its newline: a log-like non-JSON line.
	floodLine = "archiveflow flood line 0123456789abcdef0123456789abcdef012345678"
)

// BenchmarkMemory measures a worker process's RSS before and during a job
// (sampled every 10 ms, and its kernel-recorded peak VmHWM).
// TestMain removes the binaries the benchmarks built (e2e.BuildCommand).
func TestMain(m *testing.M) {
	code := m.Run()
	e2e.RemoveBuilds()
	os.Exit(code)
}

func BenchmarkMemory(b *testing.B) {
	bin := e2e.BuildWorkers(b)
	flood := fmt.Sprintf("yes '%s' | head -c %d", floodLine, gib)
	b.Run("stdout-1GiB", func(b *testing.B) {
		benchMemory(b, bin, func(root string) {
			write(b, root, "flood", "on_Snapshot__10_flood.sh", flood)
		}, gib)
	})
	b.Run("stderr-1GiB", func(b *testing.B) {
		benchMemory(b, bin, func(root string) {
			write(b, root, "flood", "on_Snapshot__10_flood.sh", flood+" >&2")
		}, gib)
	})
	b.Run(fmt.Sprintf("background-%d", background), func(b *testing.B) {
		benchMemory(b, bin, func(root string) {
			marks := filepath.Join(root, ".marks")
			require.NoError(b, os.MkdirAll(marks, 0o755))
			for i := range background {
				write(b, root, fmt.Sprintf("bg%02d", i), fmt.Sprintf("on_Snapshot__10_bg%02d.bg.sh", i),
					fmt.Sprintf(`touch "%s/%02d.$$"; echo started; exec sleep 600`, marks, i))
			}
			// Step 2 holds the snapshot open until every background hook
			// runs, then 3 s more while the sampler watches.
			write(b, root, "hold", "on_Snapshot__20_hold.sh", fmt.Sprintf(
				`i=0; while [ "$(ls "%s" | wc -l)" -lt %d ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done; sleep 3`, marks, background))
		}, 0)
	})
}

func write(b *testing.B, root, plugin, name, body string) {
	b.Helper()
	_, err := benchkit.WriteHook(root, plugin, name, body)
	require.NoError(b, err)
}

func benchMemory(b *testing.B, bin string, hooks func(root string), printed int64) {
	srv := e2e.SharedServer(b)
	root := b.TempDir()
	hooks(root)
	st := e2e.NewStack(b, srv, root, func(cfg *config.Config) {
		cfg.Hooks.Timeout = 15 * time.Minute
		cfg.Pools[0].Slots = background + 8
		cfg.Worker.StatsInterval = 5 * time.Second
		cfg.Worker.PipelineTTL = time.Minute
	})
	w := e2e.StartWorker(b, bin, st.Config, "w1", "ARCHIVEFLOW_LOG_LEVEL=warn")
	pid := w.Process.Pid
	// Idle: the worker registered its pipeline and polls its queues.
	require.Eventually(b, func() bool {
		return st.Redis.SCard(context.Background(), "pipelines").Val() == 1
	}, 2*time.Minute, 50*time.Millisecond, "worker never registered its pipeline")
	idle, err := benchkit.ReadProc(pid)
	require.NoError(b, err)

	b.ResetTimer()
	var wall time.Duration
	var peak int64
	for i := range b.N {
		s := benchkit.SampleRSS(pid, 10*time.Millisecond)
		t0 := time.Now()
		job := st.Submit(b, fmt.Sprintf("http://127.0.0.1:1/memory/%s/%d", b.Name(), i), nil)
		ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
		var status workflows.Status
		err := job.Run.Get(ctx, &status)
		cancel()
		wall += time.Since(t0)
		p, _, serr := s.Stop()
		require.NoError(b, err)
		require.NoError(b, serr)
		require.Equal(b, model.StateFinished, status.State, status.Error)
		for _, h := range status.Hooks {
			require.NotNil(b, h.Result, h.Hook)
			require.NotEqual(b, model.StatusFailed, h.Result.Status, "%s: %s", h.Hook, h.Result.Error)
		}
		peak = max(peak, p)
	}
	b.StopTimer()
	end, err := benchkit.ReadProc(pid)
	require.NoError(b, err)
	b.ReportMetric(float64(idle.RSS)/mib, "MiB-rss-idle")
	b.ReportMetric(float64(peak)/mib, "MiB-rss-peak")
	b.ReportMetric(float64(end.HWM)/mib, "MiB-hwm")
	b.ReportMetric(float64(peak-idle.RSS)/mib, "MiB-growth")
	if printed > 0 {
		b.ReportMetric(float64(printed)*float64(b.N)/mib/wall.Seconds(), "MiB/s")
	}
}
