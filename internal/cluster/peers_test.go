//go:build dev || cluster

package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTwoServerProcessesOneKilledMidJob starts a second Temporal server
// process on the same database: the two form one cluster (each service's
// membership ring has both). With every job waiting in a hook, the second
// process is killed with SIGKILL; the first takes over its history shards
// and every job finishes with exact counters. The workers and the starter
// talk to the first process's frontend throughout.
//
// It runs only with ARCHIVEFLOW_CLUSTER_PEERS=1 (not in CI): on the merged
// main of 2026-11-22 one job's gate hook failed after three attempts in
// 1.6 s, each "cancelled before the hook reported a result", while the
// killed process's history shard moved (docs/reliability.md §7): the SDK
// cancelled hooks whose heartbeat calls failed within its 1 s, which
// tclient.HeartbeatCallTimeout now prevents. The failure was intermittent:
// the drill stays opt-in until it has passed many runs.
func TestTwoServerProcessesOneKilledMidJob(t *testing.T) {
	if os.Getenv("ARCHIVEFLOW_CLUSTER_PEERS") != "1" {
		t.Skip("set ARCHIVEFLOW_CLUSTER_PEERS=1: a killed server's shard moving to the other (opt-in: docs/reliability.md §7)")
	}
	c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	peer, err := c.StartPeer(ctx, "temporal-peer")
	require.NoError(t, err)
	t.Cleanup(func() { peer.Kill() })

	var rings map[string]int
	require.Eventually(t, func() bool {
		rings, err = c.Temporal.Rings(ctx)
		return err == nil && rings["history"] == 2 && rings["matching"] == 2 && rings["frontend"] == 2
	}, deadline, 200*time.Millisecond, "the two processes form one cluster: rings %v (%v)", rings, err)
	t.Logf("one cluster of two server processes: rings %v", rings)

	root := t.TempDir()
	events := t.TempDir()
	hook(t, root, "first", "on_Snapshot__00_first.sh", succeeded)
	hook(t, root, "gate", "on_Snapshot__10_gate.sh", identSh+`: > "$CLUSTER_EVENTS/started.$ident"
`+waitOpenSh+succeeded)
	hook(t, root, "after", "on_Snapshot__50_after.sh", succeeded)
	e := newEnv(t, root)
	e.StartWorker(t, "w1", "CLUSTER_EVENTS="+events)
	e.StartWorker(t, "w2", "CLUSTER_EVENTS="+events)
	// Four history shards over two hosts: twelve jobs land on both.
	const n = 12
	jobs := e.Submit(t, urls("peer-killed", n))
	require.Eventually(t, func() bool {
		started, _ := filepath.Glob(filepath.Join(events, "started.*"))
		return len(started) == n
	}, deadline, 50*time.Millisecond, "every job reaches the gate hook")
	// The history shards move to the peer some time after it joins the
	// rings: wait until some job's shard is on it (the jobs wait in the
	// gate hook meanwhile).
	onPeer := 0
	require.Eventually(t, func() bool {
		onPeer = 0
		for _, j := range jobs {
			addr, err := c.Temporal.HistoryHost(ctx, c.Namespace, j.Ident)
			if err != nil {
				return false
			}
			if addr == peer.HistoryAddr() {
				onPeer++
			}
		}
		return onPeer > 0
	}, deadline, 200*time.Millisecond, "some job's history shard is on the process to be killed (%s)", peer.HistoryAddr())
	t.Logf("%d of %d jobs have their history shard on the peer", onPeer, n)

	begin := time.Now()
	peer.Kill()
	require.NoError(t, os.WriteFile(filepath.Join(events, "open"), nil, 0o644))
	final := e.WaitFinal(t, n, deadline)
	t.Logf("all %d jobs final %s after the peer's SIGKILL", n, time.Since(begin).Round(time.Millisecond))
	assertAllSucceeded(t, e, final, n, 3)

	require.Eventually(t, func() bool {
		rings, err = c.Temporal.Rings(ctx)
		return err == nil && rings["history"] == 1
	}, deadline, 200*time.Millisecond, "the killed process leaves the ring: %v (%v)", rings, err)
}
