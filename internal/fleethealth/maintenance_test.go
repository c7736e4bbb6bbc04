package fleethealth

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// An unscheduled maintenance of a failing check acknowledges it (one
// acknowledgement notification); a problem during a maintenance notifies
// nobody, and neither does its recovery; after the maintenance a new
// problem is notified again.
func TestMaintenanceAcknowledgesAndSilencesProblems(t *testing.T) {
	o := testOpts()
	o.CriticalAfter = 1
	e := newEnv(t, o)
	ctx := context.Background()
	e.job(t, "job1")
	e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 1)
	e.outcome(t, "host-a", "job1", "chrome", model.StatusSucceeded, 0)
	require.Len(t, e.notifications(t), 1)

	acked, err := e.health.Start(ctx, Maintenance{Host: "host-a", Check: "wget", End: e.clock.Now().Add(4 * time.Hour), Summary: "wget package missing, reinstalling"}, Known{})
	require.NoError(t, err)
	assert.Equal(t, 1, acked)
	n := e.notifications(t)
	require.Len(t, n, 2)
	assert.Equal(t, "acknowledgement", n[1].Type)
	assert.Equal(t, "wget package missing, reinstalling", n[1].Summary)
	start := strconv.FormatInt(e.clock.Now().Unix(), 10)
	assert.Equal(t, map[string]string{start: "acknowledgement"}, e.rdb.HGetAll(ctx, "host-a:wget:actions").Val())

	m, ok, err := e.health.Active(ctx, "host-a", "wget")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "unscheduled maintenance of host-a:wget until "+e.clock.Now().Add(4*time.Hour).UTC().Format(time.RFC3339)+": wget package missing, reinstalling", m.Reason())
	_, ok, err = e.health.Active(ctx, "host-a", "chrome")
	require.NoError(t, err)
	assert.False(t, ok, "another plugin is not in maintenance")

	// Recovery and a new problem during the maintenance: the recovery of
	// the notified problem is said, the new problem is not.
	e.outcome(t, "host-a", "job1", "wget", model.StatusSucceeded, 0)
	e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 1)
	e.outcome(t, "host-a", "job1", "wget", model.StatusSucceeded, 0)
	n = e.notifications(t)
	require.Len(t, n, 3)
	assert.Equal(t, "recovery", n[2].Type)

	// A host-wide maintenance covers every plugin of the host.
	_, err = e.health.Start(ctx, Maintenance{Host: "host-a", Check: HostWide, End: e.clock.Now().Add(time.Hour), Summary: "kernel upgrade"}, Known{})
	require.NoError(t, err)
	m, ok, err = e.health.Active(ctx, "host-a", "chrome")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, HostWide, m.Check)
	e.outcome(t, "host-a", "job1", "chrome", model.StatusFailed, 1)
	assert.Len(t, e.notifications(t), 3, "no problem notification during the host's maintenance")
	assert.Equal(t, StateCritical, e.rdb.HGet(ctx, "check:host-a:chrome", "state").Val(), "the state is still kept")

	// Both end (their keys expire then; the end is also checked against
	// the clock); the next problem is notified.
	e.clock.Add(5 * time.Hour)
	_, ok, err = e.health.Active(ctx, "host-a", "wget")
	require.NoError(t, err)
	assert.False(t, ok)
	e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 1)
	n = e.notifications(t)
	require.Len(t, n, 4)
	assert.Equal(t, "problem", n[3].Type)
	assert.Equal(t, "host-a:wget", n[3].EventID)
}

// A scheduled maintenance is in force only in its window.
func TestScheduledMaintenanceHoldsInItsWindow(t *testing.T) {
	e := newEnv(t, testOpts())
	ctx := context.Background()
	at := e.clock.Now().Add(time.Hour)
	_, err := e.health.Start(ctx, Maintenance{Host: "host-a", Check: HostWide, Scheduled: true, Start: at, End: at.Add(30 * time.Minute), Summary: "disk swap"}, Known{Hosts: []string{"host-a"}})
	require.NoError(t, err)
	_, ok, err := e.health.Active(ctx, "host-a", HostWide)
	require.NoError(t, err)
	assert.False(t, ok, "not before its start")
	e.clock.Add(61 * time.Minute)
	m, ok, err := e.health.Active(ctx, "host-a", HostWide)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, m.Scheduled)
	assert.Equal(t, at.Unix(), m.Start.Unix())
	assert.Equal(t, at.Add(30*time.Minute).Unix(), m.End.Unix())
	ttl := e.rdb.TTL(ctx, "host-a:*:scheduled_maintenance").Val()
	assert.InDelta(t, (29 * time.Minute).Seconds(), ttl.Seconds(), 2, "its key lives until its end")
	e.clock.Add(30 * time.Minute)
	_, ok, err = e.health.Active(ctx, "host-a", "wget")
	require.NoError(t, err)
	assert.False(t, ok, "not after its end")
}

// Bad input is refused with the thing and the rule named, and writes
// nothing.
func TestBadMaintenanceIsRefusedAndWritesNothing(t *testing.T) {
	e := newEnv(t, testOpts())
	ctx := context.Background()
	e.job(t, "job1")
	e.outcome(t, "host-a", "job1", "wget", model.StatusSucceeded, 0)
	before := testredis.Dump(t, e.rdb, "*")
	end := e.clock.Now().Add(time.Hour)
	for _, c := range []struct {
		m    Maintenance
		want string
	}{
		{Maintenance{Host: "host-z", Check: HostWide, End: end, Summary: "x"}, `unknown host "host-z"`},
		{Maintenance{Host: "host-a", Check: "pdf", End: end, Summary: "x"}, `unknown plugin "pdf" on host host-a: it never ran there (known: wget)`},
		{Maintenance{Host: "host-a", Check: "wget", End: e.clock.Now(), Summary: "x"}, "duration 0s: must be > 0"},
		{Maintenance{Host: "host-a", Check: "wget", End: e.clock.Now().Add(-time.Minute), Summary: "x"}, "duration -1m0s: must be > 0"},
		{Maintenance{Host: "host-a", Check: "wget", End: end, Summary: " "}, "summary must not be empty"},
		{Maintenance{Host: "host:a", Check: "wget", End: end, Summary: "x"}, "without ':' or '*'"},
	} {
		_, err := e.health.Start(ctx, c.m, Known{})
		require.ErrorIs(t, err, ErrInvalid, c.want)
		assert.ErrorContains(t, err, c.want)
	}
	assert.Equal(t, before, testredis.Dump(t, e.rdb, "*"), "nothing half-written")
}
