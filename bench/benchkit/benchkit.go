// Package benchkit owns the helpers the archiveflow benchmarks share:
// writing hook fixtures, the shell-loop floor a snapshot is compared with,
// order statistics (median, p95), and reading what a process or a Redis
// server has spent (CPU, RSS, commands, bytes) from /proc and INFO.
// It links no Temporal server, so its own tests run without build tags.
package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// WriteHook writes an executable /bin/sh hook named name into
// root/plugin/ and returns its path. body is the script after the shebang.
func WriteHook(root, plugin, name, body string) (string, error) {
	if plugin == "" || strings.ContainsRune(plugin, '/') {
		return "", fmt.Errorf("write hook %s: plugin %q: must be one non-empty path element", name, plugin)
	}
	if name == "" || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("write hook in %s: name %q: must be one non-empty path element", plugin, name)
	}
	dir := filepath.Join(root, plugin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write hook %s/%s: %w", plugin, name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		return "", fmt.Errorf("write hook %s/%s: %w", plugin, name, err)
	}
	return path, nil
}

// FloorScript is the physical floor of a snapshot: a POSIX shell script
// that, step by step, starts every hook of the step in the background with
// args and waits for each of them before the next step. steps[i] lists the
// executable paths of step i's hooks. The script fails as soon as a step
// has a hook that exited non-zero.
func FloorScript(steps [][]string, args []string) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	tail := strings.Join(quoted, " ")
	for _, step := range steps {
		for i, p := range step {
			b.WriteString(shellQuote(p))
			if tail != "" {
				b.WriteString(" " + tail)
			}
			fmt.Fprintf(&b, " &\np%d=$!\n", i)
		}
		for i := range step {
			fmt.Fprintf(&b, "wait $p%d\n", i)
		}
	}
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of xs by linear
// interpolation between closest ranks; NaN for an empty slice. xs is not
// modified.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 || q < 0 || q > 1 || math.IsNaN(q) {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// Millis converts d to fractional milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ProcStat is what one process has spent so far.
type ProcStat struct {
	// CPU is user+system time of the process itself.
	CPU time.Duration
	// Sys is the system (kernel) part of CPU.
	Sys time.Duration
	// ChildCPU is user+system time of its children that it has waited
	// for (for a worker: the hooks it ran).
	ChildCPU time.Duration
	// RSS is the current resident set size in bytes.
	RSS int64
	// HWM is the peak resident set size in bytes (VmHWM).
	HWM int64
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// ReadProc reads pid's CPU times from /proc/PID/stat and its memory from
// /proc/PID/status (Linux only).
func ReadProc(pid int) (ProcStat, error) {
	st, err := readStat(pid)
	if err != nil {
		return ProcStat{}, err
	}
	ps := ProcStat{CPU: st.cpu, Sys: st.sys, ChildCPU: st.childCPU}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStat{}, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return ProcStat{}, fmt.Errorf("parse %s of pid %d %q: %w", key, pid, val, err)
		}
		if key == "VmRSS" {
			ps.RSS = kb << 10
		} else {
			ps.HWM = kb << 10
		}
	}
	return ps, nil
}

// stat is what ReadProc and TreeCPU take from /proc/PID/stat.
type stat struct {
	ppid               int
	cpu, sys, childCPU time.Duration
}

func readStat(pid int) (stat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	// Fields after the command, which is in parentheses and may hold spaces.
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return stat{}, fmt.Errorf("parse stat of pid %d: no command field", pid)
	}
	f := strings.Fields(string(raw[end+1:]))
	// f[0] is field 3 (state), f[1] field 4 (ppid); utime..cstime are
	// fields 14..17.
	if len(f) < 15 {
		return stat{}, fmt.Errorf("parse stat of pid %d: %d fields, want at least 17", pid, len(f)+2)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return stat{}, fmt.Errorf("parse stat of pid %d: field 4 %q: %w", pid, f[1], err)
	}
	var ticks [4]int64
	for i := range ticks {
		v, err := strconv.ParseInt(f[11+i], 10, 64)
		if err != nil {
			return stat{}, fmt.Errorf("parse stat of pid %d: field %d %q: %w", pid, 14+i, f[11+i], err)
		}
		ticks[i] = v
	}
	tick := time.Second / clockTicks
	return stat{
		ppid:     ppid,
		cpu:      time.Duration(ticks[0]+ticks[1]) * tick,
		sys:      time.Duration(ticks[1]) * tick,
		childCPU: time.Duration(ticks[2]+ticks[3]) * tick,
	}, nil
}

// TreeCPU is the CPU time pid has spent with its children: its own, that
// of the children it has reaped, and that of its live children with
// theirs — for a server that forks a process per connection (PostgreSQL:
// the postmaster's backends). Linux only.
func TreeCPU(pid int) (time.Duration, error) {
	root, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	total := root.cpu + root.childCPU
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(child)
		if err != nil || st.ppid != pid {
			continue // gone meanwhile, or not a child
		}
		total += st.cpu + st.childCPU
	}
	return total, nil
}

// RSSSampler records the peak RSS of a process, sampling it on a ticker.
type RSSSampler struct {
	stop chan struct{}
	done chan struct{}
	peak int64
	n    int
	err  error
}

// SampleRSS starts sampling pid's RSS every interval until Stop.
func SampleRSS(pid int, interval time.Duration) *RSSSampler {
	s := &RSSSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			ps, err := ReadProc(pid)
			if err != nil {
				s.err = err
				return
			}
			s.n++
			s.peak = max(s.peak, ps.RSS)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the peak RSS in bytes and the number of
// samples taken; an error means the process could not be read (it exited).
func (s *RSSSampler) Stop() (peak int64, samples int, err error) {
	close(s.stop)
	<-s.done
	return s.peak, s.n, s.err
}

// RedisStats are a Redis server's cumulative counters (INFO).
type RedisStats struct {
	PID int
	// Commands is total_commands_processed.
	Commands int64
	// Reads is total_reads_processed: the read events of client
	// connections, one per round trip (a pipeline is one).
	Reads int64
	// NetIn and NetOut are total_net_input_bytes and total_net_output_bytes.
	NetIn, NetOut int64
}

// Sub returns the counters accumulated since before.
func (r RedisStats) Sub(before RedisStats) RedisStats {
	return RedisStats{PID: r.PID, Commands: r.Commands - before.Commands, Reads: r.Reads - before.Reads, NetIn: r.NetIn - before.NetIn, NetOut: r.NetOut - before.NetOut}
}

// ReadRedisStats reads the server's pid, command and byte counters. The
// INFO command itself is counted by the server; callers comparing two reads
// see one extra command and its bytes.
func ReadRedisStats(ctx context.Context, rdb redis.UniversalClient) (RedisStats, error) {
	info, err := rdb.Info(ctx, "server", "stats").Result()
	if err != nil {
		return RedisStats{}, fmt.Errorf("redis INFO: %w", err)
	}
	return ParseRedisInfo(info)
}

// ParseRedisInfo extracts RedisStats from the text of INFO server+stats.
func ParseRedisInfo(info string) (RedisStats, error) {
	var st RedisStats
	want := map[string]*int64{
		"total_commands_processed": &st.Commands,
		"total_reads_processed":    &st.Reads,
		"total_net_input_bytes":    &st.NetIn,
		"total_net_output_bytes":   &st.NetOut,
	}
	var pid int64
	want["process_id"] = &pid
	found := 0
	for _, line := range strings.Split(info, "\n") {
		key, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		dst, known := want[key]
		if !ok || !known {
			continue
		}
		v, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return RedisStats{}, fmt.Errorf("redis INFO field %s = %q: must be an integer", key, val)
		}
		*dst = v
		found++
	}
	if found != len(want) {
		return RedisStats{}, fmt.Errorf("redis INFO: found %d of the fields %v", found, keys(want))
	}
	st.PID = int(pid)
	return st, nil
}

func keys(m map[string]*int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Batches runs batch(i) for i in 0..b.N-1 with the benchmark timer on and
// returns the wall time the runs took together; what comes before (setup,
// warm-up) and after is not timed.
func Batches(b *testing.B, batch func(i int)) time.Duration {
	b.Helper()
	b.ResetTimer()
	var wall time.Duration
	for i := range b.N {
		t0 := time.Now()
		batch(i)
		wall += time.Since(t0)
	}
	b.StopTimer()
	return wall
}

// ReportThroughput reports snapshots/s, hooks/s and ms/batch for b.N
// batches of snapshots snapshots of hooksPer hooks each that took wall.
func ReportThroughput(b *testing.B, snapshots, hooksPer int, wall time.Duration) {
	n := float64(b.N * snapshots)
	b.ReportMetric(n/wall.Seconds(), "snapshots/s")
	b.ReportMetric(n*float64(hooksPer)/wall.Seconds(), "hooks/s")
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "ms/batch")
}
