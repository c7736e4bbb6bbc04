// Package procs_test benchmarks the hook runner (internal/procs) against
// its physical floor: a plain os/exec fork/exec+wait of the same executable,
// measured in the same run and interleaved with it, so that load on the
// shared machine hits both alike. See bench/procs/README.md.
package procs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// hookBody is a realistic no-op hook: one ArchiveResult record on stdout,
// one progress line on stderr.
const hookBody = `echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'
echo 'progress: done' >&2`

// hookEnv returns an environment of about 60 entries, the size of a worker's
// environment plus a plugin's resolved keys and the runner's own values.
func hookEnv() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=/root", "LANG=C.UTF-8"}
	for i := len(env); i < 50; i++ {
		env = append(env, fmt.Sprintf("WORKER_VAR_%02d=value-%d-%s", i, i, "some/typical/path/or/flag/value"))
	}
	return append(env,
		"SNAP_DIR=/archive/snapshots/s1", "ARCHIVE_DIR=/archive", "TIMEOUT=60", "BENCH_TIMEOUT=60",
		"FETCH_DEPTH=shallow", "DELAY_MIN=0", "DELAY_MAX=0", "USER_AGENT=archiveflow-bench",
		`EXTRA_CONTEXT={"snapshot_id":"s1","ident":"i1","plugin":"bench","hook_name":"on_Snapshot__10_bench.sh","attempt":1}`,
		`IGNORE_PATTERNS=[]`, "BENCH_ENABLED=True",
	)
}

// BenchmarkRunOverhead runs, per iteration, the floor (os/exec with stdout
// and stderr to files, then Wait) and procs.Run of the same hook with a
// realistic Spec (fresh plugin dir, files, .pid/.sh, JSONL parsing, stderr
// tailing, ~60 env entries, timeout, callbacks), alternating which goes
// first. It reports the medians of both, their difference (the runner's
// overhead) and their ratio, and the CPU this process spent per half
// (user + system, all its threads, not the hook's), the hook process's own
// CPU (the reaped children's), and their sum per hook: unlike wall time,
// that does not depend on what else runs on the machine. "sh-limits" adds every resource limit (a
// cgroup where the host allows one, the ptrace stop for the rlimits).
func BenchmarkRunOverhead(b *testing.B) {
	sh := writeHook(b, hookBody)
	for _, h := range []struct {
		name, path string
		limits     procs.Limits
	}{
		{"true", "/bin/true", procs.Limits{}}, // an ELF that does nothing: the smallest floor
		{"sh", sh, procs.Limits{}},
		{"sh-limits", sh, procs.Limits{Memory: 256 << 20, CPUTime: time.Minute, OpenFiles: 1024, Processes: 64}},
	} {
		b.Run(h.name, func(b *testing.B) { benchOverhead(b, h.path, h.limits) })
	}
}

func benchOverhead(b *testing.B, hook string, limits procs.Limits) {
	root := b.TempDir()
	env := hookEnv()
	args := []string{"--url=https://example.com/page", "--snapshot-id=s1"}
	var floors, runs, diffs, floorCPU, runCPU, floorHook, runHook []float64
	floorHalf := func(dir string) {
		c0, h0 := cpuUsed(b, syscall.RUSAGE_SELF), cpuUsed(b, syscall.RUSAGE_CHILDREN)
		floors = append(floors, benchkit.Millis(execFloor(b, hook, args, env, dir+"-floor")))
		floorCPU = append(floorCPU, micros(cpuUsed(b, syscall.RUSAGE_SELF)-c0))
		floorHook = append(floorHook, micros(cpuUsed(b, syscall.RUSAGE_CHILDREN)-h0))
	}
	runHalf := func(dir string) {
		c0, h0 := cpuUsed(b, syscall.RUSAGE_SELF), cpuUsed(b, syscall.RUSAGE_CHILDREN)
		runs = append(runs, benchkit.Millis(runOnce(b, hook, args, env, dir, limits)))
		runCPU = append(runCPU, micros(cpuUsed(b, syscall.RUSAGE_SELF)-c0))
		runHook = append(runHook, micros(cpuUsed(b, syscall.RUSAGE_CHILDREN)-h0))
	}
	for i := 0; b.Loop(); i++ {
		dir := filepath.Join(root, strconv.Itoa(i))
		if i%2 == 0 {
			floorHalf(dir)
			runHalf(dir)
		} else {
			runHalf(dir)
			floorHalf(dir)
		}
		diffs = append(diffs, runs[i]-floors[i])
	}
	f, r := benchkit.Quantile(floors, 0.5), benchkit.Quantile(runs, 0.5)
	b.ReportMetric(f, "floor-ms")
	b.ReportMetric(r, "run-ms")
	b.ReportMetric(r-f, "overhead-ms")
	b.ReportMetric(benchkit.Quantile(diffs, 0.5), "paired-overhead-ms")
	b.ReportMetric(r/f, "ratio")
	fc, rc := benchkit.Quantile(floorCPU, 0.5), benchkit.Quantile(runCPU, 0.5)
	b.ReportMetric(fc, "floor-cpu-us")
	b.ReportMetric(rc, "run-cpu-us")
	b.ReportMetric(rc-fc, "overhead-cpu-us")
	// The hook process itself (the reaped children's CPU), and the whole
	// cost of a hook: this process plus the hook.
	fh, rh := benchkit.Quantile(floorHook, 0.5), benchkit.Quantile(runHook, 0.5)
	b.ReportMetric(fh, "floor-hook-cpu-us")
	b.ReportMetric(rh, "run-hook-cpu-us")
	b.ReportMetric(benchkit.Quantile(sums(floorCPU, floorHook), 0.5), "floor-total-cpu-us")
	b.ReportMetric(benchkit.Quantile(sums(runCPU, runHook), 0.5), "run-total-cpu-us")
}

// cpuUsed is the user + system CPU time of this process (all threads,
// RUSAGE_SELF) or of its children that have been waited for
// (RUSAGE_CHILDREN).
func cpuUsed(b *testing.B, who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// sums returns the element-wise sums of two series of the same length.
func sums(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// execFloor is a plain fork/exec+wait with stdout and stderr to files in a
// fresh directory: what any supervisor must at least do.
func execFloor(b *testing.B, hook string, args, env []string, dir string) time.Duration {
	t0 := time.Now()
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	stdout, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		b.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(hook, args...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, dir, stdout, stderr
	err = cmd.Run()
	stdout.Close()
	stderr.Close()
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

func runOnce(b *testing.B, hook string, args, env []string, dir string, limits procs.Limits) time.Duration {
	var records, lines int
	spec := procs.Spec{
		Path:     hook,
		Args:     args,
		Env:      env,
		Dir:      dir,
		Stem:     "on_Snapshot__10_bench",
		Timeout:  time.Minute,
		Grace:    15 * time.Second,
		OnRecord: func(jsonl.Record) { records++ },
		OnStderr: func(string) { lines++ },
		Limits:   limits,
		Log:      zap.NewNop(),
	}
	t0 := time.Now()
	res, err := procs.Run(b.Context(), spec)
	d := time.Since(t0)
	if err != nil {
		b.Fatalf("run: %v", err)
	}
	want := model.StatusSucceeded
	if hook == "/bin/true" {
		want = model.StatusNoResults
	}
	if res.Status != want {
		b.Fatalf("run: status %q, want %q (%s)", res.Status, want, res.Reason)
	}
	return d
}

func writeHook(b *testing.B, body string) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "on_Snapshot__10_bench.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	return path
}
