package procs

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLoadavgAndForks(t *testing.T) {
	threads, last, err := parseLoadavg([]byte("0.50 0.40 0.30 2/139 21239\n"))
	require.NoError(t, err)
	assert.Equal(t, uint64(139), threads)
	assert.Equal(t, 21239, last)
	for _, bad := range []string{"", "0.5 0.4 0.3 2/139", "0.5 0.4 0.3 139 21239", "0.5 0.4 0.3 2/x 21239", "0.5 0.4 0.3 2/139 x"} {
		_, _, err := parseLoadavg([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}

	n, ok := forksLine([]byte("cpu  1 2 3\nintr 5 6\nctxt 7\nbtime 8\nprocesses 123456\nprocs_running 1\n"))
	assert.True(t, ok)
	assert.Equal(t, uint64(123456), n)
	_, ok = forksLine([]byte("cpu 1\nprocesses 12")) // cut by a short read
	assert.False(t, ok)

	forks, err := readForks()
	require.NoError(t, err)
	assert.Positive(t, forks)
	threads, last, err = readLoadavg()
	require.NoError(t, err)
	assert.Positive(t, threads)
	assert.Positive(t, last)
}

func TestPIDSpan(t *testing.T) {
	s := pidSpan{first: 1000, last: 1010, pidMax: 32768}
	assert.True(t, s.contains(1000))
	assert.True(t, s.contains(1010))
	assert.False(t, s.contains(999))
	assert.False(t, s.contains(1011))
	assert.Equal(t, 11, s.size())

	w := pidSpan{first: 32760, last: 305, pidMax: 32768} // the counter wrapped
	assert.True(t, w.contains(32767))
	assert.True(t, w.contains(300))
	assert.True(t, w.contains(305))
	assert.False(t, w.contains(306))
	assert.False(t, w.contains(32759))
	assert.Equal(t, [][2]int{{32760, 32767}, {300, 305}}, w.ranges())
	assert.Equal(t, 8+6, w.size())
}

func TestListPIDsMatchesReadDir(t *testing.T) {
	pids, err := listPIDs()
	require.NoError(t, err)
	assert.Contains(t, pids, os.Getpid())
	assert.Contains(t, pids, 1)
	entries, err := os.ReadDir(procRoot)
	require.NoError(t, err)
	var want []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			want = append(want, pid)
		}
	}
	// Processes come and go between the two listings; almost all must match.
	common := 0
	for _, pid := range want {
		if slices.Contains(pids, pid) {
			common++
		}
	}
	assert.GreaterOrEqual(t, common, len(want)-10, "listPIDs %v, ReadDir %v", pids, want)
}

// The window holds a process created after it opened and leaves out one
// created before, whether the window is probed pid by pid or filters the
// /proc listing; a window that cannot be trusted lists every process.
func TestBirthWindowCandidates(t *testing.T) {
	before := startSleep(t)
	w := openBirthWindow()
	require.NotNil(t, w)
	after := startSleep(t)
	w.first = after

	probed, err := w.candidates()
	require.NoError(t, err)
	assert.Contains(t, probed, after)
	assert.NotContains(t, probed, before)
	assert.NotContains(t, probed, os.Getpid())

	wide := *w
	wide.first = max(after-maxProbe-10, reservedPIDs) // too wide to probe: the listing is filtered
	if wide.first < before {
		listed, err := wide.candidates()
		require.NoError(t, err)
		assert.Contains(t, listed, after)
		assert.Contains(t, listed, before, "inside the wide window")
		assert.NotContains(t, listed, 1)
	}

	untrusted := *w
	untrusted.threads = 1 << 40 // as if the pid counter could have gone round
	all, err := untrusted.candidates()
	require.NoError(t, err)
	assert.Contains(t, all, before)
	assert.Contains(t, all, 1)

	var none *birthWindow
	all, err = none.candidates()
	require.NoError(t, err)
	assert.Contains(t, all, os.Getpid())
}

func startSleep(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid
}
