package procs

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

func TestForegroundTimeoutSendsSIGTERM(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "slow.sh", `trap 'echo term > got_term; exit 143' TERM
while :; do sleep 0.05; done`))
	s.Timeout = 1500 * time.Millisecond
	res := runSpec(t, s)
	assert.True(t, res.TimedOut)
	assert.False(t, res.Canceled)
	require.True(t, res.Transient, res.Reason)
	require.ErrorIs(t, res.Err(), ErrTransient)
	assert.Contains(t, res.Reason, "timed out")
	assert.Equal(t, 143, res.ExitCode)
	b, err := os.ReadFile(filepath.Join(s.Dir, "got_term"))
	require.NoError(t, err, "the hook must have received SIGTERM")
	assert.Equal(t, "term\n", string(b))
}

func TestHookIgnoringSIGTERMIsKilledAfterGrace(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "stubborn.sh", `trap '' TERM
while :; do sleep 0.05; done`))
	s.Timeout = time.Second
	s.Grace = 300 * time.Millisecond
	res := runSpec(t, s)
	assert.True(t, res.TimedOut)
	require.True(t, res.Transient)
	assert.Equal(t, syscall.SIGKILL, res.Signal)
	assert.Equal(t, 137, res.ExitCode)
}

// childFixture starts a child that ignores SIGTERM and records its pid.
const childFixture = `(trap '' TERM; exec sleep 300) &
echo $! > child.pid.tmp && mv child.pid.tmp child.pid
`

func TestChildKilledWithGroupOnTimeout(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "forker.sh", childFixture+"wait"))
	s.Timeout = time.Second
	s.Grace = 300 * time.Millisecond
	res := runSpec(t, s)
	require.True(t, res.TimedOut)
	require.True(t, res.Transient)
	child := readPID(t, filepath.Join(s.Dir, "child.pid"))
	assert.True(t, gone(child), "child %d must be dead when Run returns", child)
	assert.GreaterOrEqual(t, res.Leftovers, 1, "the child outlived the leader and was reaped as a leftover")
}

func TestChildKilledWithGroupOnCancel(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "forker.sh", childFixture+"wait"))
	s.Grace = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		res, err := Run(ctx, s)
		assert.NoError(t, err)
		done <- res
	}()
	child := readPID(t, filepath.Join(s.Dir, "child.pid"))
	require.False(t, gone(child))
	cancel()
	var res Result
	select {
	case res = <-done:
	case <-time.After(testDeadline):
		t.Fatal("Run did not return after cancellation")
	}
	assert.True(t, res.Canceled)
	require.True(t, res.Transient, "a canceled foreground hook without a record is transient")
	assert.True(t, gone(child), "child %d must be dead when Run returns", child)
}

func TestChildOfExitedLeaderIsKilled(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "leaver.sh", childFixture+"exit 0"))
	s.Grace = 300 * time.Millisecond
	res := runSpec(t, s)
	child := readPID(t, filepath.Join(s.Dir, "child.pid"))
	assert.True(t, gone(child), "a foreground hook must leave nothing running")
	assert.Equal(t, 1, res.Leftovers)
	assert.Equal(t, model.StatusNoResults, res.Status)
}

func TestSetsidDaemonKilledByMarker(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "daemon.sh", `setsid sh -c 'cut -d" " -f5 /proc/$$/stat > daemon.pgid; echo $$ > daemon.pid.tmp; mv daemon.pid.tmp daemon.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
while [ ! -e daemon.pid ]; do sleep 0.01; done
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"forked"}'`))
	s.Grace = 300 * time.Millisecond
	res := runSpec(t, s)
	require.Equal(t, model.StatusSucceeded, res.Status, res.Reason)
	daemon := readPID(t, filepath.Join(s.Dir, "daemon.pid"))
	pgid, err := os.ReadFile(filepath.Join(s.Dir, "daemon.pgid"))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(daemon), strings.TrimSpace(string(pgid)), "setsid made the daemon lead its own group, outside the hook's")
	assert.True(t, gone(daemon), "daemon %d escaped the group but carries the marker and must be dead", daemon)
	assert.GreaterOrEqual(t, res.Leftovers, 1)
}

func TestForegroundCancelWithoutChildren(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "wait.sh", `touch ready
while :; do sleep 0.05; done`))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		waitFile(t, filepath.Join(s.Dir, "ready"))
		cancel()
	}()
	res, err := Run(ctx, s)
	require.NoError(t, err)
	assert.True(t, res.Canceled)
	assert.False(t, res.TimedOut)
	require.True(t, res.Transient)
	assert.Contains(t, res.Reason, "canceled")
	assert.Equal(t, syscall.SIGTERM, res.Signal)
}

func TestBackgroundStoppedBySeal(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		status model.Status
	}{
		{"no record, killed by SIGTERM", `touch ready
while :; do sleep 0.05; done`, model.StatusSucceeded},
		{"no record, traps SIGTERM and exits 143", `trap 'exit 143' TERM
touch ready
while :; do sleep 0.05; done`, model.StatusSucceeded},
		{"no record, traps SIGTERM and exits 0", `trap 'exit 0' TERM
touch ready
while :; do sleep 0.05; done`, model.StatusSucceeded},
		{"record wins", `trap 'echo "{\"type\":\"ArchiveResult\",\"status\":\"noresults\"}"; exit 143' TERM
touch ready
while :; do sleep 0.05; done`, model.StatusNoResults},
		{"no record, traps SIGTERM and exits 3: failed, final", `trap 'exit 3' TERM
touch ready
while :; do sleep 0.05; done`, model.StatusFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := specFor(t, writeHook(t, "on_Snapshot__20_bg.bg.sh", tc.body))
			s.Background = true
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				waitFile(t, filepath.Join(s.Dir, "ready"))
				cancel()
			}()
			res, err := Run(ctx, s)
			require.NoError(t, err)
			assert.True(t, res.Canceled)
			require.False(t, res.Transient, res.Reason)
			assert.Equal(t, tc.status, res.Status)
			if tc.status == model.StatusFailed {
				assert.Contains(t, res.ArchiveResult().Error, "stopped by the seal")
			}
		})
	}
}

func TestBackgroundExitingByItselfUsesNormalMapping(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "bg.sh", "exit 1"))
	s.Background = true
	res := runSpec(t, s)
	assert.True(t, res.Transient)
}

// TestWaitReturnsWhenRunsEnd is not parallel: Wait counts every run of the
// process, and parallel tests only start after the sequential ones.
func TestWaitReturnsWhenRunsEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Equal(t, 0, Wait(ctx), "idle: nothing under way")

	spec := specFor(t, writeHook(t, "slow.sh", "sleep 0.5"))
	started := make(chan struct{})
	spec.OnStderr = func(string) {}
	done := make(chan Result, 1)
	go func() {
		close(started)
		done <- runSpec(t, spec)
	}()
	<-started
	require.Eventually(t, func() bool {
		short, cancelShort := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancelShort()
		return Wait(short) == 1
	}, testDeadline, time.Millisecond, "the run is counted while under way")
	assert.Equal(t, 0, Wait(context.Background()), "Wait returns once the run ended")
	res := <-done
	assert.Equal(t, model.StatusNoResults, res.Status)
}
