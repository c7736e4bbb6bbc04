package benchkit

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/testredis"
)

func TestQuantile(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"median of odd count", []float64{3, 1, 2}, 0.5, 2},
		{"median of even count interpolates", []float64{4, 1, 3, 2}, 0.5, 2.5},
		{"p95 of 0..20", seq(21), 0.95, 19}, {"p95 interpolates", []float64{0, 10}, 0.95, 9.5},
		{"minimum", []float64{5, 7}, 0, 5},
		{"maximum", []float64{5, 7}, 1, 7},
		{"single value", []float64{9}, 0.95, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.xs...)
			assert.InDelta(t, tt.want, Quantile(tt.xs, tt.q), 1e-9)
			assert.Equal(t, in, tt.xs, "input left unsorted")
		})
	}
	for _, q := range []float64{-0.1, 1.1, math.NaN()} {
		assert.True(t, math.IsNaN(Quantile([]float64{1}, q)), "q=%v", q)
	}
	assert.True(t, math.IsNaN(Quantile(nil, 0.5)), "empty input")
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i)
	}
	return out
}

func TestWriteHookRejectsBadNames(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct{ plugin, name string }{{"", "h.sh"}, {"a/b", "h.sh"}, {"p", ""}, {"p", "x/h.sh"}} {
		_, err := WriteHook(root, tc.plugin, tc.name, "true")
		assert.Error(t, err, "plugin %q name %q", tc.plugin, tc.name)
	}
}

// TestFloorScriptRunsStepsInOrderWithParallelHooks runs a real floor: the
// two hooks of a step overlap (each waits for the other's start marker) and
// a step starts only after the previous one ended.
func TestFloorScriptRunsStepsInOrderWithParallelHooks(t *testing.T) {
	root := t.TempDir()
	log := filepath.Join(root, "events")
	mark := func(tag, other string) string {
		// Each hook announces itself, then waits (bounded) for its sibling:
		// only parallel execution lets both finish quickly and log "met".
		return `echo "start ` + tag + `" >> "` + log + `"
touch "` + root + `/` + tag + `.started"
i=0; while [ ! -f "` + root + `/` + other + `.started" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
[ -f "` + root + `/` + other + `.started" ] && echo "met ` + tag + ` $1" >> "` + log + `"
echo "end ` + tag + `" >> "` + log + `"`
	}
	a1, err := WriteHook(root, "a1", "a1.sh", mark("a1", "a2"))
	require.NoError(t, err)
	a2, err := WriteHook(root, "a2", "a2.sh", mark("a2", "a1"))
	require.NoError(t, err)
	b1, err := WriteHook(root, "b1", "b1.sh", `echo "start b1 $1" >> "`+log+`"`)
	require.NoError(t, err)

	script := FloorScript([][]string{{a1, a2}, nil, {b1}}, []string{"--url=http://x/it's"})
	out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
	require.NoError(t, err, "%s", out)

	data, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	assert.Contains(t, lines, "met a1 --url=http://x/it's", "args are passed quoted")
	assert.Contains(t, lines, "met a2 --url=http://x/it's", "hooks of one step run in parallel")
	assert.Equal(t, "start b1 --url=http://x/it's", lines[len(lines)-1], "the next step starts after both ended")
}

func TestFloorScriptFailsWithAFailingHook(t *testing.T) {
	root := t.TempDir()
	ok, err := WriteHook(root, "ok", "ok.sh", "exit 0")
	require.NoError(t, err)
	bad, err := WriteHook(root, "bad", "bad.sh", "exit 3")
	require.NoError(t, err)
	after := filepath.Join(root, "after")
	next, err := WriteHook(root, "next", "next.sh", `touch "`+after+`"`)
	require.NoError(t, err)

	err = exec.Command("/bin/sh", "-c", FloorScript([][]string{{bad, ok}, {next}}, nil)).Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 3, exit.ExitCode())
	assert.NoFileExists(t, after, "no step runs after a failed one")
}

func TestReadProcOfSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Burn a little CPU so the reading cannot be all zeros.
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	ps, err := ReadProc(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, ps.RSS)
	assert.GreaterOrEqual(t, ps.HWM, ps.RSS)
	assert.Positive(t, ps.CPU)
	assert.GreaterOrEqual(t, ps.Sys, time.Duration(0))
	assert.LessOrEqual(t, ps.Sys, ps.CPU, "the kernel's part is part of CPU")

	_, err = ReadProc(1 << 30)
	assert.ErrorContains(t, err, "pid 1073741824")
}

func TestTreeCPUCountsLiveAndReapedChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	burn := "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"
	// A shell that first runs (and reaps) one busy child, then starts
	// another busy child that stays alive, reading our stdin pipe.
	cmd := exec.Command("/bin/sh", "-c", "/bin/sh -c '"+burn+"'; /bin/sh -c '"+burn+"; read x' <&0 & wait")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Wait() }()
	defer func() { _ = stdin.Close() }()
	var total, own time.Duration
	require.Eventually(t, func() bool {
		total, err = TreeCPU(cmd.Process.Pid)
		require.NoError(t, err)
		ps, err := ReadProc(cmd.Process.Pid)
		require.NoError(t, err)
		own = ps.CPU + ps.ChildCPU
		// The reaped child is in ChildCPU; the live one only in the tree.
		return ps.ChildCPU > 0 && total > own
	}, 30*time.Second, 20*time.Millisecond, "tree %s, own+reaped %s", total, own)

	_, err = TreeCPU(1 << 30)
	assert.ErrorContains(t, err, "pid 1073741824")
}

func TestSampleRSSReportsPeak(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	// The sampler reads once before it first looks at Stop, so even an
	// immediate Stop reports a real reading.
	s := SampleRSS(os.Getpid(), time.Millisecond)
	peak, n, err := s.Stop()
	require.NoError(t, err)
	assert.Positive(t, n)
	assert.Positive(t, peak)

	_, _, err = SampleRSS(1<<30, time.Millisecond).Stop()
	assert.ErrorContains(t, err, "pid 1073741824", "a vanished process is reported")
}

func TestParseRedisInfo(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nprocess_id:42\r\n# Stats\r\ntotal_commands_processed:10\r\n" +
		"total_reads_processed:8\r\ntotal_net_input_bytes:300\r\ntotal_net_output_bytes:400\r\n"
	st, err := ParseRedisInfo(info)
	require.NoError(t, err)
	assert.Equal(t, RedisStats{PID: 42, Commands: 10, Reads: 8, NetIn: 300, NetOut: 400}, st)
	assert.Equal(t, RedisStats{PID: 42, Commands: 7, Reads: 6, NetIn: 100, NetOut: 350}, st.Sub(RedisStats{Commands: 3, Reads: 2, NetIn: 200, NetOut: 50}))

	_, err = ParseRedisInfo("process_id:1\r\ntotal_commands_processed:x\r\n")
	assert.ErrorContains(t, err, `total_commands_processed = "x": must be an integer`)
	_, err = ParseRedisInfo("process_id:1\r\n")
	assert.ErrorContains(t, err, "found 1 of the fields")
}

func TestReadRedisStatsCountsCommands(t *testing.T) {
	srv := testredis.Start(t)
	if !srv.Real() {
		t.Skip("miniredis has no INFO stats")
	}
	rdb := srv.Client()
	ctx := context.Background()
	before, err := ReadRedisStats(ctx, rdb)
	require.NoError(t, err)
	for range 5 {
		require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	}
	after, err := ReadRedisStats(ctx, rdb)
	require.NoError(t, err)
	d := after.Sub(before)
	assert.EqualValues(t, 6, d.Commands, "five SETs and the first INFO")
	assert.EqualValues(t, 6, d.Reads, "five SETs and the second INFO, one read each")
	assert.Positive(t, d.NetIn)
	assert.Positive(t, before.PID)
}

func TestRoundTripsCountsCommandsAndPipelines(t *testing.T) {
	srv := testredis.Start(t)
	// One connection: opening a connection sends its own handshake (HELLO,
	// then a CLIENT SETINFO pipeline), which is counted too (real round
	// trips), so the test counts from a warm connection.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	rt := &RoundTrips{}
	rdb.AddHook(rt)
	ctx := context.Background()
	// go-redis may replace its first connection once (against Redis 7.0 it
	// re-handshakes after the first use), so warm up with a command and a
	// pipeline before counting.
	for range 2 {
		require.NoError(t, rdb.Ping(ctx).Err())
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() })
		require.NoError(t, err)
	}
	base := rt.Load()
	require.NoError(t, rdb.Set(ctx, "a", "1", 0).Err())
	require.NoError(t, rdb.Get(ctx, "a").Err())
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range 10 {
			p.Incr(ctx, "n")
		}
		return nil
	})
	require.NoError(t, err)
	assert.EqualValues(t, 3, rt.Load()-base, "two commands and one pipeline of ten")
}
