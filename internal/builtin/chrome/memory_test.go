package chrome

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fake browsers below stand for Chromium's process tree: a browser
// that waits forever while a child ("renderer") ends. Its other child, a
// long sleep whose pid goes to PIDFILE, must not outlive Run.

// hogChild holds ~200 MB in its data segment for a moment and exits: tail
// keeps a line in memory, and /dev/zero has no newline.
const hogChild = `(head -c 200000000 /dev/zero; sleep 1) | tail > /dev/null &`

func fakeBrowser(t *testing.T, child string) (bin, pidFile string) {
	t.Helper()
	pidFile = filepath.Join(t.TempDir(), "pid")
	bin, _ = fakeChromium(t, child+"\nsleep 600 &\necho $! > '"+pidFile+"'\nwait")
	return bin, pidFile
}

func runWith(t *testing.T, bin string, m Memory) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, Capture{Binary: bin, Kind: DOM, URL: "http://h/", Out: io.Discard, Grace: 30 * time.Second, Memory: m})
	require.NoError(t, ctx.Err(), "Run returned only at its deadline: %v", err)
	return time.Since(start), err
}

// requireGone fails unless the process whose pid is in pidFile has ended
// (a zombie counts: an orphan may wait for a non-reaping init).
func requireGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid := strings.TrimSpace(string(b))
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return
	}
	i := strings.LastIndexByte(string(stat), ')')
	require.Positive(t, i)
	assert.Contains(t, "ZX", string(stat[i+2]), "process %s is still running", pid)
}

// Under RLIMIT_DATA (per process), a process that ends with half the limit
// or more in its data segment stops the capture at once.
func TestRunStopsWhenAProcessEndsAtTheDataLimit(t *testing.T) {
	bin, pidFile := fakeBrowser(t, hogChild)
	took, err := runWith(t, bin, Memory{Limit: 256 << 20, PerProcess: true})
	var merr *MemoryError
	require.True(t, errors.As(err, &merr), "got %v", err)
	assert.True(t, merr.PerProcess)
	assert.GreaterOrEqual(t, merr.Data, int64(128<<20))
	assert.GreaterOrEqual(t, merr.PeakRSS, int64(100<<20))
	assert.Contains(t, err.Error(), "memory limit 256 MiB reached (RLIMIT_DATA)")
	assert.Less(t, took, 20*time.Second)
	requireGone(t, pidFile)
}

// A process that ends small is no sign of the limit: the capture runs on
// (here until the browser exits on its own, with an ordinary error, or
// without a word on its DevTools pipe).
func TestRunIgnoresSmallProcessesEnding(t *testing.T) {
	bin, _ := fakeChromium(t, "sleep 0.3 & wait\n(head -c 20000000 /dev/zero; sleep 0.5) | tail > /dev/null\nexit 3")
	_, err := runWith(t, bin, Memory{Limit: 256 << 20, PerProcess: true})
	require.Error(t, err)
	var merr *MemoryError
	assert.False(t, errors.As(err, &merr), "got %v", err)
	assert.Contains(t, err.Error(), "exit status 3")

	mute, _ := fakeChromium(t, "sleep 0.3")
	_, err = runWith(t, mute, Memory{Limit: 256 << 20, PerProcess: true})
	require.Error(t, err)
	assert.False(t, errors.As(err, &merr), "got %v", err)
	assert.Contains(t, err.Error(), "chromium closed its DevTools pipe")
}

// In a cgroup, an OOM kill counted by the cgroup stops the capture at
// once, and every process of it is ended.
func TestRunStopsAtAnOOMKill(t *testing.T) {
	bin, pidFile := fakeBrowser(t, "")
	// The cgroup had 2 kills before the start (they do not count: the
	// first reading is the baseline); every later reading sees a third.
	// No timer: one that fired before the capture took its baseline hid
	// the kill (a flake under load).
	var reads atomic.Int64
	kills := func() int64 {
		if reads.Add(1) == 1 {
			return 2
		}
		return 3
	}
	took, err := runWith(t, bin, Memory{Limit: 1 << 30, OOMKills: kills, Peak: func() int64 { return 1 << 30 }})
	var merr *MemoryError
	require.True(t, errors.As(err, &merr), "got %v", err)
	assert.False(t, merr.PerProcess)
	assert.Equal(t, int64(1<<30), merr.CgroupPeak)
	assert.Contains(t, err.Error(), "memory limit 1 GiB exceeded: the OOM killer ended")
	assert.Less(t, took, 20*time.Second)
	requireGone(t, pidFile)
}

func TestMemoryErrorNamesTheLimit(t *testing.T) {
	e := &MemoryError{Limit: 2 << 30, PerProcess: true, Process: "renderer", Data: 1536 << 20,
		PeakRSS: 1 << 30, PeakTotal: 3 << 29, After: 12340 * time.Millisecond}
	assert.Equal(t, "memory limit 2 GiB reached (RLIMIT_DATA): the Chromium renderer process died at 1.5 GiB of data; "+
		"peak RSS 1 GiB (summed over its processes 1.5 GiB); Chromium stopped after 12.3s, not retried", e.Error())
	e = &MemoryError{Limit: 2 << 30, CgroupPeak: 2 << 30, PeakRSS: 1 << 30, PeakTotal: 3 << 29, After: time.Second}
	assert.Equal(t, "memory limit 2 GiB exceeded: the OOM killer ended a Chromium process (cgroup peak 2 GiB); "+
		"peak RSS 1 GiB (summed over its processes 1.5 GiB); Chromium stopped after 1s, not retried", e.Error())
}
