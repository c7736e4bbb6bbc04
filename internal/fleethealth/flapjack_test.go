package fleethealth

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// The structures are read the way Flapjack's data-structure document
// (shared/seeds/flapjack-redis.txt) describes them: the type of every key,
// the fields of the current-state hash, the history list and its sorted
// mirror (score = member = TIMESTAMP, ascending), the per-change strings,
// the current and all checks/entities sets, failed_checks (score = time it
// went critical, member ENTITY:CHECK), and an unscheduled maintenance (a
// string with expiry holding its start; DURATION scored by TIMESTAMP).
func TestKeysReadAsFlapjackDocumentsThem(t *testing.T) {
	o := testOpts()
	o.CriticalAfter = 1
	e := newEnv(t, o)
	ctx := context.Background()
	e.job(t, "job1")
	e.outcome(t, "host-a", "job1", "wget", model.StatusSucceeded, 0)
	okAt := e.clock.Now().Unix()
	e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 2)
	critAt := e.clock.Now().Unix()
	e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 2)
	lastAt := e.clock.Now().Unix()

	typeOf := func(k string) string { return e.rdb.Type(ctx, k).Val() }
	// Current state: check:ENTITY:CHECK (hash) -> state, last_change, last_update.
	require.Equal(t, "hash", typeOf("check:host-a:wget"))
	cur := e.rdb.HMGet(ctx, "check:host-a:wget", "state", "last_change", "last_update").Val()
	assert.Equal(t, []any{"critical", strconv.FormatInt(critAt, 10), strconv.FormatInt(lastAt, 10)}, cur)
	// All state changes: ENTITY:CHECK:states (list) -> [TIMESTAMP, ...] oldest first.
	require.Equal(t, "list", typeOf("host-a:wget:states"))
	ts := []string{strconv.FormatInt(okAt, 10), strconv.FormatInt(critAt, 10)}
	assert.Equal(t, ts, e.rdb.LRange(ctx, "host-a:wget:states", 0, -1).Val())
	for i, want := range []string{"ok", "critical"} {
		p := "host-a:wget:" + ts[i] + ":"
		for _, f := range []string{"state", "summary", "count"} {
			require.Equal(t, "string", typeOf(p+f), p+f)
		}
		assert.Equal(t, want, e.rdb.Get(ctx, p+"state").Val())
		_, err := strconv.Atoi(e.rdb.Get(ctx, p+"count").Val())
		assert.NoError(t, err, "COUNT is an integer")
		assert.Zero(t, e.rdb.Exists(ctx, p+"check_latency").Val(),
			"recorded within its second: no latency, and no key for it (as Flapjack's own update_state writes none)")
	}
	assert.Equal(t, "failed: wget: command not found", e.rdb.Get(ctx, "host-a:wget:"+ts[1]+":summary").Val())
	// Sorted state timestamps: (TIMESTAMP, TIMESTAMP), ascending like the list.
	require.Equal(t, "zset", typeOf("host-a:wget:sorted_state_timestamps"))
	z := e.rdb.ZRangeWithScores(ctx, "host-a:wget:sorted_state_timestamps", 0, -1).Val()
	require.Len(t, z, 2)
	for i, m := range z {
		assert.Equal(t, ts[i], m.Member)
		assert.Equal(t, ts[i], strconv.FormatInt(int64(m.Score), 10))
	}
	// failed_checks (zset) -> (TIMESTAMP, ENTITY:CHECK).
	require.Equal(t, "zset", typeOf("failed_checks"))
	assert.Contains(t, e.rdb.ZRangeWithScores(ctx, "failed_checks", 0, -1).Val(), redis.Z{Score: float64(critAt), Member: "host-a:wget"})
	assert.Contains(t, e.rdb.ZRangeWithScores(ctx, "failed_checks", 0, -1).Val(), redis.Z{Score: float64(critAt), Member: "job1:on_Snapshot__50_wget.py"})
	// current_checks:ENTITY, current_entities, all_checks, all_checks:ENTITY (zsets by latest event).
	for k, want := range map[string][]redis.Z{
		"current_checks:host-a": {{Score: float64(lastAt), Member: "wget"}},
		"all_checks:host-a":     {{Score: float64(lastAt), Member: "wget"}},
		"current_checks:job1":   {{Score: float64(lastAt), Member: "on_Snapshot__50_wget.py"}},
		"current_entities":      {{Score: float64(lastAt), Member: "host-a"}, {Score: float64(lastAt), Member: "job1"}},
		"all_checks":            {{Score: float64(lastAt), Member: "on_Snapshot__50_wget.py"}, {Score: float64(lastAt), Member: "wget"}},
	} {
		require.Equal(t, "zset", typeOf(k), k)
		assert.Equal(t, want, e.rdb.ZRangeWithScores(ctx, k, 0, -1).Val(), k)
	}
	// all_entity_names_by_id / all_entity_ids_by_name (hashes), inverse of each other.
	ids := e.rdb.HGetAll(ctx, "all_entity_ids_by_name").Val()
	names := e.rdb.HGetAll(ctx, "all_entity_names_by_id").Val()
	require.Len(t, ids, 2)
	for name, id := range ids {
		assert.Equal(t, name, names[id])
	}
	// Notifications: last_problem_notification (string) -> TIMESTAMP, problem_notifications (list).
	assert.Equal(t, strconv.FormatInt(critAt, 10), e.rdb.Get(ctx, "host-a:wget:last_problem_notification").Val())
	require.Equal(t, "list", typeOf("host-a:wget:problem_notifications"))

	// Unscheduled maintenance.
	_, err := e.health.Start(ctx, Maintenance{Host: "host-a", Check: "wget", End: e.clock.Now().Add(4 * time.Hour), Summary: "on it"}, Known{})
	require.NoError(t, err)
	start := strconv.FormatInt(e.clock.Now().Unix(), 10)
	require.Equal(t, "string", typeOf("host-a:wget:unscheduled_maintenance"))
	assert.Equal(t, start, e.rdb.Get(ctx, "host-a:wget:unscheduled_maintenance").Val())
	assert.InDelta(t, (4 * time.Hour).Seconds(), e.rdb.TTL(ctx, "host-a:wget:unscheduled_maintenance").Val().Seconds(), 2)
	assert.Equal(t, []redis.Z{{Score: (4 * time.Hour).Seconds(), Member: start}}, e.rdb.ZRangeWithScores(ctx, "host-a:wget:unscheduled_maintenances", 0, -1).Val())
	assert.Equal(t, "on it", e.rdb.Get(ctx, "host-a:wget:"+start+":unscheduled_maintenance:summary").Val())
	assert.Equal(t, []redis.Z{{Score: float64(e.clock.Now().Unix()), Member: start}}, e.rdb.ZRangeWithScores(ctx, "host-a:wget:sorted_unscheduled_maintenance_timestamps", 0, -1).Val())
	assert.Equal(t, start, e.rdb.Get(ctx, "host-a:wget:last_acknowledgement_notification").Val())
	// An outcome recorded 3 s after it ended (a change of the job × hook
	// check: back to ok) has check_latency, whole seconds like Flapjack's
	// times.
	e.clock.Add(time.Second)
	late := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__50_wget.py", Status: model.StatusSucceeded,
		StartedAt: e.clock.Now().Add(-4 * time.Second), EndedAt: e.clock.Now().Add(-3 * time.Second)}
	_, err = e.health.Record(ctx, Outcome{Host: "host-a", Ident: "job1", OpID: "late", Result: late})
	require.NoError(t, err)
	lateAt := strconv.FormatInt(late.EndedAt.Unix(), 10) // a change is filed under its outcome's time
	jp := "job1:on_Snapshot__50_wget.py:" + lateAt + ":"
	require.Equal(t, "string", typeOf(jp+"check_latency"), "the job × hook check went back to ok")
	assert.Equal(t, "3", e.rdb.Get(ctx, jp+"check_latency").Val())
	_, changes, err := e.health.History(ctx, "job1", "on_Snapshot__50_wget.py", 10)
	require.NoError(t, err)
	require.NotEmpty(t, changes)
	assert.Equal(t, 3.0, changes[0].CheckLatency, "the newest change first")
}

// With flapjack.feed on, every outcome goes to Flapjack's events queue as
// an EVENT with every required key, and the check structures, failed_checks
// and notifications are left to Flapjack's processor.
func TestFeedPushesEventsAndLeavesTheStructuresToFlapjack(t *testing.T) {
	o := testOpts()
	o.Feed, o.CriticalAfter = true, 1
	e := newEnv(t, o)
	ctx := context.Background()
	e.job(t, "job1")
	require.True(t, e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 1))
	raw := e.rdb.LRange(ctx, "events", 0, -1).Val()
	require.Len(t, raw, 2, "one event per check: host × plugin and job × hook")
	var entities []string
	for _, r := range raw {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(r), &ev))
		for _, k := range []string{"type", "state", "entity", "check"} {
			assert.Contains(t, ev, k, r)
			assert.NotEmpty(t, ev[k], r)
		}
		assert.Equal(t, "service", ev["type"])
		assert.Equal(t, "critical", ev["state"])
		assert.EqualValues(t, e.clock.Now().Unix(), ev["time"])
		assert.Equal(t, "failed: wget: command not found", ev["summary"])
		entities = append(entities, ev["entity"].(string)+":"+ev["check"].(string))
	}
	assert.Equal(t, []string{"host-a:wget", "job1:on_Snapshot__50_wget.py"}, entities)
	assert.ElementsMatch(t, []string{"job1", "job1_ops", "events"}, e.rdb.Keys(ctx, "*").Val(), "nothing of Flapjack's processor written")
}
