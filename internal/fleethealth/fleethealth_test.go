package fleethealth

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// A plugin failing hard on one host goes critical there at the threshold
// (critical_after 3: warning after the first failure), only there; it
// enters failed_checks once with one problem notification, and recovers
// with one recovery notification. Only state changes append history;
// last_update moves on every outcome.
func TestHostCheckGoesCriticalAtTheThresholdOnlyThereAndRecovers(t *testing.T) {
	e := newEnv(t, testOpts())
	ctx := context.Background()
	e.job(t, "job1")
	e.outcome(t, "host-a", "job1", "wget", model.StatusSucceeded, 0)
	e.outcome(t, "host-b", "job1", "wget", model.StatusSucceeded, 0)
	for i := 1; i <= 3; i++ {
		e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 1)
		e.outcome(t, "host-b", "job1", "wget", model.StatusSucceeded, 0)
		want := StateWarning
		if i == 3 {
			want = StateCritical
		}
		assert.Equal(t, want, e.rdb.HGet(ctx, "check:host-a:wget", "state").Val(), "after %d failures", i)
		assert.Equal(t, StateOK, e.rdb.HGet(ctx, "check:host-b:wget", "state").Val())
	}
	wentCritical := e.clock.Now().Add(-time.Second).Unix()
	failed, err := e.rdb.ZRangeWithScores(ctx, "failed_checks", 0, -1).Result()
	require.NoError(t, err)
	require.Contains(t, failed, redis.Z{Score: float64(wentCritical), Member: "host-a:wget"})
	for _, z := range failed {
		assert.NotEqual(t, "host-b:wget", z.Member)
	}
	// More failures: still one problem notification, failing since the same time.
	e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 1)
	assert.EqualValues(t, wentCritical, e.rdb.ZScore(ctx, "failed_checks", "host-a:wget").Val())
	n := e.notifications(t)
	require.Len(t, n, 1)
	assert.Equal(t, notification{EventID: "host-a:wget", Type: "problem", State: StateCritical,
		Summary: "failed: wget: command not found", Time: wentCritical, LastState: StateWarning}, n[0])

	e.outcome(t, "host-a", "job1", "wget", model.StatusSucceeded, 0)
	assert.Equal(t, StateOK, e.rdb.HGet(ctx, "check:host-a:wget", "state").Val())
	assert.Zero(t, e.rdb.ZScore(ctx, "failed_checks", "host-a:wget").Val())
	assert.ErrorIs(t, e.rdb.ZScore(ctx, "failed_checks", "host-a:wget").Err(), redis.Nil)
	n = e.notifications(t)
	require.Len(t, n, 2)
	assert.Equal(t, "recovery", n[1].Type)
	assert.Equal(t, StateOK, n[1].State)
	assert.Equal(t, e.clock.Now().Unix(), n[1].Time)
	crit, rec := strconv.FormatInt(wentCritical, 10), strconv.FormatInt(e.clock.Now().Unix(), 10)
	assert.Equal(t, crit, e.rdb.Get(ctx, "host-a:wget:last_problem_notification").Val())
	assert.Equal(t, []string{crit}, e.rdb.LRange(ctx, "host-a:wget:problem_notifications", 0, -1).Val())
	assert.Equal(t, rec, e.rdb.Get(ctx, "host-a:wget:last_recovery_notification").Val())
	assert.Equal(t, []string{rec}, e.rdb.LRange(ctx, "host-a:wget:recovery_notifications", 0, -1).Val())

	// History: ok, warning, critical, ok (8 outcomes on host-a).
	states := e.rdb.LRange(ctx, "host-a:wget:states", 0, -1).Val()
	require.Len(t, states, 4)
	var got []string
	for _, ts := range states {
		got = append(got, e.rdb.Get(ctx, "host-a:wget:"+ts+":state").Val())
	}
	assert.Equal(t, []string{"ok", "warning", "critical", "ok"}, got)
	assert.Len(t, e.rdb.LRange(ctx, "host-b:wget:states", 0, -1).Val(), 1, "host-b: one state, never changed")
	assert.Equal(t, e.clock.Now().Unix(), unixField(e.rdb.HGet(ctx, "check:host-a:wget", "last_update").Val()).Unix())
}
