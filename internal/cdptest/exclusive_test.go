package cdptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExclusiveWaitsForAnotherProcess: while another process holds the
// lock, Exclusive waits; it returns once that process lets go.
func TestExclusiveWaitsForAnotherProcess(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "browsers.lock")
	old := ExclusiveLock
	ExclusiveLock = lock
	t.Cleanup(func() { ExclusiveLock = old })
	release := filepath.Join(t.TempDir(), "release")
	holder := exec.Command("flock", lock, "sh", "-c", `while [ ! -e "$0" ]; do sleep 0.02; done`, release)
	require.NoError(t, holder.Start())
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	require.Eventually(t, func() bool {
		return exec.Command("flock", "-n", lock, "true").Run() != nil
	}, 10*time.Second, 10*time.Millisecond, "the other process holds the lock")

	got := make(chan struct{})
	go func() {
		t.Run("waiter", func(t *testing.T) { Exclusive(t) })
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("Exclusive returned while another process held the lock")
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("Exclusive did not return after the other process let go")
	}
	assert.NoError(t, exec.Command("flock", "-n", lock, "true").Run(), "released at the test's end")
}
