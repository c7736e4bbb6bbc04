package procs

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/archiveflow/archiveflow/internal/model"
)

const (
	floodBytes = 1 << 30
	floodLine  = "downloading https://example.com/some/page.html 200 OK, not JSON" // 64 bytes with '\n'
)

// floodHook prints floodBytes of non-JSON lines, one 4 MiB line (over the
// cap), then its ArchiveResult record.
const floodHook = `yes '` + floodLine + `' | head -c ` + "1073741824" + `
head -c 4194304 /dev/zero | tr '\0' '{'
echo
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"flood"}'`

// vmRSS returns this process's resident set size in bytes.
func vmRSS(t testing.TB) int64 {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// runFlood runs the flood hook while sampling RSS; it returns the result
// and the peak RSS growth over the baseline.
func runFlood(t testing.TB, s Spec) (Result, int64) {
	base := vmRSS(t)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if r := vmRSS(t); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	res, err := Run(t.Context(), s)
	close(stop)
	<-sampled
	require.NoError(t, err)
	return res, peak.Load() - base
}

func TestFloodKeepsMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1 GiB; skipped with -short")
	}
	s := specFor(t, writeHook(t, "flood.sh", floodHook))
	s.Log = zap.NewNop()
	start := time.Now()
	res, growth := runFlood(t, s)
	elapsed := time.Since(start)
	t.Logf("1 GiB flood: %s, %.0f MiB/s, RSS growth %.1f MiB", elapsed, float64(floodBytes)/elapsed.Seconds()/(1<<20), float64(growth)/(1<<20))

	require.Equal(t, model.StatusSucceeded, res.Status, res.Reason)
	assert.Equal(t, "flood", res.Last.OutputStr)
	assert.Less(t, growth, int64(100<<20), "RSS must stay flat while the hook floods stdout")
	assert.Equal(t, int64(floodBytes/len(floodLine+"\n")), res.Counts.Ignored, "every complete flood line is seen and ignored")
	assert.Equal(t, int64(1), res.Counts.Oversize, "the 4 MiB line is dropped") // 1 GiB is a whole number of 64-byte lines
	info, err := os.Stat(res.Files.Stdout)
	require.NoError(t, err)
	assert.Greater(t, info.Size(), int64(floodBytes))
	require.NoError(t, os.Remove(res.Files.Stdout))
}

// BenchmarkFlood reports the RSS growth and throughput of reading a hook
// that prints 1 GiB to stdout.
func BenchmarkFlood(b *testing.B) {
	hook := writeHookB(b, "flood.sh", floodHook)
	for b.Loop() {
		s := Spec{Path: hook, Dir: b.TempDir(), Stem: "flood", Env: []string{"PATH=" + os.Getenv("PATH")}}
		res, growth := runFlood(b, s)
		b.ReportMetric(float64(growth)/(1<<20), "MiB-rss-growth")
		_ = os.Remove(res.Files.Stdout)
	}
	b.SetBytes(floodBytes)
}

// BenchmarkRunNoop measures the runner's overhead for a hook that prints
// one record and exits (process start, files, cleanup scan, outputs).
func BenchmarkRunNoop(b *testing.B) {
	hook := writeHookB(b, "noop.sh", `echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	root := b.TempDir()
	for i := 0; b.Loop(); i++ {
		dir := root + "/" + strconv.Itoa(i)
		res, err := Run(b.Context(), Spec{Path: hook, Dir: dir, Stem: "noop", Log: zap.NewNop()})
		if err != nil || res.Status != model.StatusSucceeded {
			b.Fatalf("run: %v %s", err, res.Reason)
		}
	}
}

// BenchmarkExecFloor runs the same no-op hook with plain os/exec (output
// to a file, no supervision): the floor BenchmarkRunNoop is compared with.
func BenchmarkExecFloor(b *testing.B) {
	hook := writeHookB(b, "noop.sh", `echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	out, err := os.Create(b.TempDir() + "/out")
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	for b.Loop() {
		cmd := exec.Command(hook)
		cmd.Stdout = out
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeftoverScan measures one scan of /proc for leftovers (group and
// marker), the fixed cost paid after every hook: "full" reads the stat of
// every process started since this test process (what the sweeper does for
// a dead runner's hook), "window" only the processes created since the
// window opened (what Run does).
func BenchmarkLeftoverScan(b *testing.B) {
	marker := []byte(MarkerEnv + "=00000000000000000000000000000000")
	b.Run("full", func(b *testing.B) {
		rp := &reaper{pgid: 1 << 22, marker: marker, minStart: selfRef().StartTime, log: zap.NewNop()}
		for b.Loop() {
			if len(rp.leftovers()) != 0 {
				b.Fatal("unexpected leftovers")
			}
		}
	})
	b.Run("window", func(b *testing.B) {
		w := openBirthWindow()
		if w == nil {
			b.Skip("no fork counter in /proc")
		}
		_, w.first, _ = readLoadavg()
		rp := &reaper{pgid: 1 << 22, marker: marker, minStart: selfRef().StartTime, born: w, log: zap.NewNop()}
		for b.Loop() {
			if len(rp.leftovers()) != 0 {
				b.Fatal("unexpected leftovers")
			}
		}
	})
}

// BenchmarkLeftoverScanConcurrent measures the scan Run does after a hook
// while two other hooks run through Run in a loop beside it, as on a worker
// running several hooks at once: each window then holds the other hooks'
// processes. It reports the scanning thread's own CPU per scan (the
// background hooks' CPU is not counted) and the processes in the window.
func BenchmarkLeftoverScanConcurrent(b *testing.B) {
	if openBirthWindow() == nil {
		b.Skip("no fork counter in /proc")
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	for i := len(env); i < 60; i++ {
		env = append(env, "WORKER_VAR_"+strconv.Itoa(i)+"=value-"+strconv.Itoa(i)+"-some/typical/path/or/flag/value")
	}
	hook := writeHookB(b, "other.sh", `echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	root := b.TempDir()
	var stop atomic.Bool
	var others sync.WaitGroup
	for g := range 2 {
		others.Go(func() {
			for i := 0; !stop.Load(); i++ {
				dir := root + "/" + strconv.Itoa(g) + "-" + strconv.Itoa(i)
				if _, err := Run(context.Background(), Spec{Path: hook, Env: env, Dir: dir, Stem: "other", Log: zap.NewNop()}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	defer func() { stop.Store(true); others.Wait() }()

	// Thread CPU: this goroutine stays on its thread while it scans.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	marker := []byte(MarkerEnv + "=00000000000000000000000000000000")
	var cpu time.Duration
	var window int
	for b.Loop() {
		w := openBirthWindow()
		_, w.first, _ = readLoadavg()
		time.Sleep(10 * time.Millisecond) // a short hook's run: the others start processes meanwhile
		if s, ok := w.span(); ok {
			window += s.size()
		}
		rp := &reaper{pgid: 1 << 22, marker: marker, minStart: selfRef().StartTime, born: w, log: zap.NewNop()}
		c0 := threadCPU(b)
		if len(rp.leftovers()) != 0 {
			b.Fatal("unexpected leftovers")
		}
		cpu += threadCPU(b) - c0
	}
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "scan-cpu-us")
	b.ReportMetric(float64(window)/float64(b.N), "window-pids")
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func writeHookB(b *testing.B, name, body string) string {
	b.Helper()
	path := b.TempDir() + "/" + name
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	return path
}
