package procs

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tree finds a process's children and grandchildren with their memory;
// Kill ends exactly those.
func TestTreeAndKill(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sh -c 'sleep 60 & wait' & sleep 60 & wait; exec sleep 60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var tree []Proc
	require.Eventually(t, func() bool {
		tree = Tree(cmd.Process.Pid)
		return len(tree) == 4
	}, 10*time.Second, 10*time.Millisecond, "sh, its sleep, the inner sh and its sleep: %+v", tree)
	assert.Equal(t, cmd.Process.Pid, tree[0].PID, "root first")
	for _, p := range tree {
		assert.False(t, p.Zombie)
		assert.Positive(t, p.RSS, "pid %d", p.PID)
		assert.Positive(t, p.Data, "pid %d", p.PID)
		assert.True(t, p.Running())
	}
	assert.Empty(t, Tree(1<<30), "no such process")

	for _, p := range tree[1:] {
		require.NoError(t, p.Kill())
	}
	require.Eventually(t, func() bool {
		for _, p := range tree[1:] {
			if p.Running() {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	assert.True(t, tree[0].Running(), "only the processes killed ended")
	stale := tree[1]
	stale.StartTime++
	assert.NoError(t, stale.Kill(), "another instance of the pid: nothing to do")
}
