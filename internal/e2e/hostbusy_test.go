//go:build dev

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestBusyHostIsNotReclaimed runs one worker with one hook slot: a long
// hook of one job holds the slot past job.host_timeout while a second job's
// discovery and hooks queue behind it. The host is busy, not dead: the
// second job finishes on it without a re-claim.
func TestBusyHostIsNotReclaimed(t *testing.T) {
	root := t.TempDir()
	events := filepath.Join(t.TempDir(), "events")
	writeHook(t, root, "work", "on_Snapshot__10_work.sh", `
case "$1" in
*slow*) echo "slow start" >> "$E2E_EVENTS"; sleep 10; echo "slow end" >> "$E2E_EVENTS";;
esac
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'
`)
	s := NewStack(t, server, root, func(c *config.Config) {
		c.Pools[0].Slots = 1
		c.Job.HostTimeout = 3 * time.Second // == hooks.heartbeat_timeout, the minimum
	})
	s.StartPools(t, hookEnv(events))

	slow := s.Submit(t, "https://example.com/slow", nil)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(events)
		return strings.Contains(string(b), "slow start")
	}, 2*time.Minute, 50*time.Millisecond, "the slow hook started")
	fast := s.Submit(t, "https://example.com/fast", nil)

	for _, j := range []Job{fast, slow} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var st workflows.Status
		require.NoError(t, j.Run.Get(ctx, &st))
		cancel()
		assert.Equal(t, model.StateFinished, st.State, j.URL)
		assert.Equal(t, 1, st.Claims, "%s: a busy host is not re-claimed", j.URL)
		require.Len(t, st.Hooks, 1)
		require.NotNil(t, st.Hooks[0].Result)
		assert.Equal(t, model.StatusSucceeded, st.Hooks[0].Result.Status)
		assert.Equal(t, 1, st.Hooks[0].Result.Attempts, "waiting is no attempt")
	}
	assert.Positive(t, hostChecks(t, s, fast), "the fast job waited past host_timeout and asked whether the host is alive")
}

// hostChecks counts the host checks in a job's workflow history:
// HostLiveness activities (InputV2), HostAlive in older histories.
func hostChecks(t *testing.T, s *Stack, j Job) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := s.Client.GetWorkflowHistory(ctx, j.Run.GetID(), j.Run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			switch a.GetActivityType().GetName() {
			case "HostLiveness", "HostAlive":
				n++
			}
		}
	}
	return n
}
