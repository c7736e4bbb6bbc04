//go:build dev

package purge_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/e2e"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/purge"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/workflows"
)

// The workers create the purge Schedule at start; every later start (or a
// second worker) finds it and changes nothing, a changed interval updates
// it, and a run of it (triggered here) purges a job past its retention
// through the real workers.
func TestScheduleIsIdempotentAndPurges(t *testing.T) {
	srv := e2e.SharedServer(t)
	s := e2e.NewStack(t, srv, t.TempDir(), func(c *config.Config) {
		c.Purge.Interval = time.Hour
		c.Redis.RetainAborted = time.Second
	})
	s.StartPools(t, nil) // creates the Schedule
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := s.Client.ScheduleClient().GetHandle(ctx, s.Config.Purge.ScheduleID)
	var desc *client.ScheduleDescription
	require.Eventually(t, func() bool {
		var err error
		desc, err = h.Describe(ctx)
		return err == nil
	}, time.Minute, 50*time.Millisecond, "the workers created the schedule")
	require.Len(t, desc.Schedule.Spec.Intervals, 1)
	assert.Equal(t, time.Hour, desc.Schedule.Spec.Intervals[0].Every)

	for range 2 { // a restart, a second worker
		require.NoError(t, purge.EnsureSchedule(ctx, s.Client, s.Config, nil))
	}
	again, err := h.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, desc.Info.LastUpdateAt, again.Info.LastUpdateAt, "a matching schedule is not rewritten")
	assert.Equal(t, 1, countSchedules(t, ctx, s.Client, s.Config.Purge.ScheduleID))

	changed := *s.Config
	changed.Purge.Interval = 2 * time.Hour
	require.NoError(t, purge.EnsureSchedule(ctx, s.Client, &changed, nil))
	again, err = h.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, again.Schedule.Spec.Intervals[0].Every, "the configuration wins")
	assert.Equal(t, 1, countSchedules(t, ctx, s.Client, s.Config.Purge.ScheduleID))

	// An aborted job whose retention (1 s) has passed.
	j := rkeys.Job{Ident: "purgeme", URL: "http://example.invalid/purge", FetchDepth: "shallow", WorkflowID: "purgeme",
		Settings: model.Settings{Concurrency: 1}}
	require.NoError(t, s.Store.CreateJob(ctx, j))
	require.NoError(t, s.Store.Finish(ctx, j.Ident, model.StateAborted))
	require.Eventually(t, func() bool {
		due, err := s.Store.PurgeDue(ctx, time.Now(), 10)
		return err == nil && len(due) == 1
	}, time.Minute, 50*time.Millisecond)

	require.NoError(t, h.Trigger(ctx, client.ScheduleTriggerOptions{}))
	require.Eventually(t, func() bool {
		return s.Redis.Exists(ctx, s.Store.Keys().ScheduledPurge(), s.Store.Keys().State(model.StateAborted), s.Store.Keys().TimeIndex()).Val() == 0
	}, time.Minute, 50*time.Millisecond, "the schedule's run purged the job")

	desc, err = h.Describe(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, desc.Info.RecentActions)
	last := desc.Info.RecentActions[len(desc.Info.RecentActions)-1].StartWorkflowResult
	var res workflows.PurgeResult
	require.NoError(t, s.Client.GetWorkflow(ctx, last.WorkflowID, last.FirstExecutionRunID).Get(ctx, &res))
	assert.Equal(t, 1, res.Jobs)
	assert.Equal(t, 1, res.Batches)
	assert.LessOrEqual(t, res.Keys, 5, "whatever of the job's keys had not expired yet")
	record(t, ctx, s.Client, last.WorkflowID, last.FirstExecutionRunID)
}

func countSchedules(t *testing.T, ctx context.Context, c client.Client, id string) int {
	t.Helper()
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	require.NoError(t, err)
	n := 0
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if e.ID == id {
			n++
		}
	}
	return n
}

// record replays the purge run's history and, with
// ARCHIVEFLOW_RECORD_HISTORIES=1, stores it for the replay test of
// package workflows.
func record(t *testing.T, ctx context.Context, c client.Client, id, runID string) {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, runID, false, 0)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	r := worker.NewWorkflowReplayer()
	workflows.Register(r)
	require.NoError(t, r.ReplayWorkflowHistory(nil, h))
	if os.Getenv("ARCHIVEFLOW_RECORD_HISTORIES") != "1" {
		return
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	name := fmt.Sprintf("%s.purge.json", t.Name())
	require.NoError(t, os.WriteFile(filepath.Join("..", "..", "workflows", "testdata", name), data, 0o644))
}
