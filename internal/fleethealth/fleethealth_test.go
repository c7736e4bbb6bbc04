package fleethealth

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
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

// A repeated outcome (an activity retry, the workflow's fallback write)
// changes nothing: not a counter, not a timestamp, not a notification.
func TestARepeatedOutcomeChangesNothing(t *testing.T) {
	e := newEnv(t, testOpts())
	ctx := context.Background()
	e.job(t, "job1")
	r := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__50_wget.py", Status: model.StatusFailed, ExitCode: 1, EndedAt: t0}
	o := Outcome{Host: "host-a", Ident: "job1", OpID: "run-1/step-5/wget/on_Snapshot__50_wget.py", Result: r}
	health := e.health
	health.opts.CriticalAfter = 1
	ok, err := health.Record(ctx, o)
	require.NoError(t, err)
	require.True(t, ok)
	before := testredis.Dump(t, e.rdb, "*")
	e.clock.Add(time.Minute)
	for range 3 {
		ok, err = health.Record(ctx, o)
		require.NoError(t, err)
		assert.False(t, ok, "a repeat is not applied")
	}
	assert.Equal(t, before, testredis.Dump(t, e.rdb, "*"))
	assert.Len(t, e.notifications(t), 1)
}

// Outcomes within one second write the sorted mirrors, the name maps and
// the job check's expiry once: a later one in that second only counts
// (the scores and last_update it would write are the same, so Redis ends
// the same either way and the test counts the commands run); the next
// second moves them. A state change within the second is still written.
func TestOutcomesWithinASecondWriteTheMirrorsOnce(t *testing.T) {
	e := newEnv(t, testOpts())
	if !e.srv.Real() {
		t.Skip("counts commands with INFO commandstats: needs a real redis-server")
	}
	ctx := context.Background()
	e.job(t, "job1")
	// written runs one outcome and returns how often each command ran.
	written := func(op string, st model.Status) map[string]int {
		t.Helper()
		require.NoError(t, e.rdb.ConfigResetStat(ctx).Err())
		r := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__50_wget.py", Status: st, EndedAt: e.clock.Now()}
		if st == model.StatusFailed {
			r.ExitCode = 1
		}
		ok, err := e.health.Record(ctx, Outcome{Host: "host-a", Ident: "job1", OpID: op, Result: r})
		require.NoError(t, err)
		require.True(t, ok)
		info := e.rdb.Info(ctx, "commandstats").Val()
		calls := map[string]int{}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
			if !ok {
				continue
			}
			n, _, _ := strings.Cut(rest, ",")
			calls[name], _ = strconv.Atoi(n)
		}
		return calls
	}
	first := written("op-1", model.StatusSucceeded)
	assert.Equal(t, 11, first["zadd"], "the first outcome: four mirrors per check, health_hosts and both checks' first state")
	again := written("op-2", model.StatusSucceeded)
	assert.Zero(t, again["zadd"], "no mirror written again within the second")
	assert.Zero(t, again["pexpire"], "the job check's expiry was set this second")
	assert.Equal(t, 2, again["hset"], "both checks count the outcome, each hash written once")
	assert.Equal(t, "2", e.rdb.HGet(ctx, "check:host-a:wget", "count").Val())
	assert.Equal(t, "2", e.rdb.HGet(ctx, "check:job1:on_Snapshot__50_wget.py", "count").Val())

	e.clock.Add(time.Second)
	next := written("op-3", model.StatusSucceeded)
	assert.Equal(t, 9, next["zadd"], "a new second moves the mirrors")
	now := float64(e.clock.Now().Unix())
	assert.Equal(t, now, e.rdb.ZScore(ctx, "current_checks:host-a", "wget").Val())
	assert.Equal(t, now, e.rdb.ZScore(ctx, "current_entities", "job1").Val())
	assert.Equal(t, e.clock.Now().Unix(), unixField(e.rdb.HGet(ctx, "check:host-a:wget", "last_update").Val()).Unix())

	e.health.opts.CriticalAfter = 1
	written("op-4", model.StatusFailed) // the same second as op-3: the change is still recorded
	assert.Equal(t, "critical", e.rdb.HGet(ctx, "check:host-a:wget", "state").Val())
	assert.Equal(t, "critical", e.rdb.HGet(ctx, "check:job1:on_Snapshot__50_wget.py", "state").Val())
	assert.Positive(t, e.rdb.PTTL(ctx, "job1:on_Snapshot__50_wget.py:states").Val(), "a change's keys expire with the job")
	assert.Len(t, e.notifications(t), 1)
}

// A job's outcome without its IDENT hash is refused and writes nothing.
func TestAnOutcomeOfAnUnknownJobWritesNothing(t *testing.T) {
	e := newEnv(t, testOpts())
	_, err := e.health.Record(context.Background(), Outcome{Host: "h", Ident: "gone", OpID: "x",
		Result: model.ArchiveResult{Plugin: "wget", Hook: "w.py", Status: model.StatusSucceeded}})
	require.ErrorContains(t, err, "job gone")
	assert.Empty(t, e.rdb.Keys(context.Background(), "*").Val())
}

// Each check's history is capped: the oldest changes and their keys go.
func TestHistoryIsCapped(t *testing.T) {
	o := testOpts()
	o.HistoryCap, o.CriticalAfter = 3, 1
	e := newEnv(t, o)
	ctx := context.Background()
	e.job(t, "job1")
	var first string
	for i := range 6 {
		st := model.StatusSucceeded
		if i%2 == 1 {
			st = model.StatusFailed
		}
		e.outcome(t, "host-a", "job1", "wget", st, 1)
		if i == 0 {
			first = strconv.FormatInt(e.clock.Now().Unix(), 10)
		}
	}
	assert.Len(t, e.rdb.LRange(ctx, "host-a:wget:states", 0, -1).Val(), 3)
	assert.EqualValues(t, 3, e.rdb.ZCard(ctx, "host-a:wget:sorted_state_timestamps").Val())
	assert.Zero(t, e.rdb.Exists(ctx, "host-a:wget:"+first+":state", "host-a:wget:"+first+":summary",
		"host-a:wget:"+first+":count", "host-a:wget:"+first+":check_latency").Val())
	assert.Len(t, e.rdb.LRange(ctx, "host-a:wget:problem_notifications", 0, -1).Val(), 3, "notification lists are capped too")
}

// A job × hook check's state is the hook's final status; a failed hook is
// in failed_checks (starter list --failed) until the job is purged, which
// removes every key of the job's entity. Its keys expire with the job.
func TestJobChecksExpireAndArePurgedWithTheJob(t *testing.T) {
	e := newEnv(t, testOpts())
	ctx := context.Background()
	e.job(t, "job1")
	e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 1)
	e.outcome(t, "host-a", "job1", "title", model.StatusSucceeded, 0)
	assert.Equal(t, StateCritical, e.rdb.HGet(ctx, "check:job1:on_Snapshot__50_wget.py", "state").Val())
	jobs, err := e.health.FailedJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"job1": {"on_Snapshot__50_wget.py"}}, jobs)
	ttl := e.rdb.TTL(ctx, "check:job1:on_Snapshot__50_wget.py").Val()
	assert.InDelta(t, (7 * 24 * time.Hour).Seconds(), ttl.Seconds(), 5, "a running job's checks: the job ttl")

	// The job finishes (its hash gets its retention); the next outcome's keys take it.
	require.NoError(t, e.rdb.Expire(ctx, "job1", time.Hour).Err())
	e.outcome(t, "host-a", "job1", "pdf", model.StatusSucceeded, 0)
	assert.InDelta(t, time.Hour.Seconds(), e.rdb.TTL(ctx, "check:job1:on_Snapshot__50_pdf.py").Val().Seconds(), 5)

	n, err := e.health.PurgeJob(ctx, "job1")
	require.NoError(t, err)
	assert.Positive(t, n)
	left := e.rdb.Keys(ctx, "*job1*").Val()
	assert.ElementsMatch(t, []string{"job1", "job1_ops"}, left, "only the job's own keys (rkeys purges them) are left")
	assert.Empty(t, e.rdb.ZRange(ctx, "failed_checks", 0, -1).Val(), "host-a:wget is warning, not critical; the job's member is gone")
	assert.NotContains(t, e.rdb.HKeys(ctx, "all_entity_ids_by_name").Val(), "job1")
	assert.NotContains(t, e.rdb.ZRange(ctx, "current_entities", 0, -1).Val(), "job1")
	assert.Equal(t, StateWarning, e.rdb.HGet(ctx, "check:host-a:wget", "state").Val(), "the host's checks stay")
}

// Which outcomes are ok, soft or hard failures, or say nothing.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		r    model.ArchiveResult
		want Class
	}{
		{model.ArchiveResult{Status: model.StatusSucceeded}, ClassOK},
		{model.ArchiveResult{Status: model.StatusNoResults}, ClassOK},
		{model.ArchiveResult{Status: model.StatusSkipped, OutputStr: "no video on the page"}, ClassOK},
		{model.ArchiveResult{Status: model.StatusSkipped, OutputStr: MaintenancePrefix + "unscheduled maintenance of h:p"}, ClassNeutral},
		{model.ArchiveResult{Status: model.StatusSkipped, OutputStr: CannotRunPrefix + "plugin wget needs binary wget (config.json): not found on the hooks' PATH"}, ClassSoft},
		{model.ArchiveResult{Status: model.StatusSkipped, OutputStr: "disabled by configuration"}, ClassOK},
		{model.ArchiveResult{Status: model.StatusFailed, Error: "the page has no PDF"}, ClassSoft},
		{model.ArchiveResult{Status: model.StatusFailed, ExitCode: 127}, ClassHard},
		{model.ArchiveResult{Status: model.StatusFailed, Limit: "memory"}, ClassHard},
	} {
		assert.Equal(t, string(c.want), string(Classify(c.r)), "%+v", c.r)
	}
	// A hook that could not start is a hard failure whatever its exit code.
	o := testOpts()
	o.CriticalAfter = 1
	e := newEnv(t, o)
	e.job(t, "job1")
	_, err := e.health.Record(context.Background(), Outcome{Host: "h", Ident: "job1", OpID: "x", NotStarted: true,
		Result: model.ArchiveResult{Plugin: "p", Hook: "x.sh", Status: model.StatusFailed, Error: "malformed config.json"}})
	require.NoError(t, err)
	assert.Equal(t, StateCritical, e.rdb.HGet(context.Background(), "check:h:p", "state").Val())
}

// TestRecordBatchIsRecordOneAtATime: a batch of outcomes (a crawl page
// sink flush's) leaves exactly the state recording them one at a time
// leaves (checks, histories, failed_checks, notifications, expiries),
// with fewer commands: each check hash read and written once.
func TestRecordBatchIsRecordOneAtATime(t *testing.T) {
	for _, feed := range []bool{false, true} {
		t.Run(fmt.Sprintf("feed=%v", feed), func(t *testing.T) {
			outcomes := func(e *env) []Outcome {
				var os []Outcome
				for i := range 12 {
					if i%4 == 0 {
						e.clock.Add(time.Second) // some in the same second, some not
					}
					for _, plugin := range []string{"pagefetch", "title", "outlinks"} {
						r := model.ArchiveResult{Plugin: plugin, Hook: plugin, Status: model.StatusSucceeded,
							StartedAt: e.clock.Now().Add(-time.Second), EndedAt: e.clock.Now()}
						if plugin == "title" && i >= 3 && i < 8 {
							r.Status, r.ExitCode, r.Error = model.StatusFailed, 1, "no title" // critical, then recovered
						}
						if plugin == "outlinks" && i == 5 {
							r.Status = model.StatusNoResults
						}
						o := Outcome{Host: "host-a", Ident: "crawl1", Once: true, Result: r}
						if i == 2 {
							o.Once, o.OpID = false, fmt.Sprintf("op-%d-%s", i, plugin)
						}
						os = append(os, o)
					}
				}
				return os
			}
			opts := testOpts()
			opts.Feed = feed
			ctx := context.Background()
			alone := newEnv(t, opts)
			alone.job(t, "crawl1")
			require.NoError(t, alone.rdb.Expire(ctx, "crawl1", time.Hour).Err())
			for _, o := range outcomes(alone) {
				ok, err := alone.health.Record(ctx, o)
				require.NoError(t, err)
				require.True(t, ok)
			}
			e := newEnv(t, opts)
			e.job(t, "crawl1")
			require.NoError(t, e.rdb.Expire(ctx, "crawl1", time.Hour).Err())
			os := outcomes(e)
			require.Equal(t, alone.clock.Now(), e.clock.Now())
			op, res, err := e.health.RecordBatchOp(ctx, os)
			require.NoError(t, err)
			applied, err := res(op(e.rdb))
			require.NoError(t, err)
			for i, ok := range applied {
				require.True(t, ok, "outcome %d", i)
			}
			assert.Equal(t, testredis.Dump(t, alone.rdb, "*"), testredis.Dump(t, e.rdb, "*"))
			if !feed {
				assert.Contains(t, testredis.Dump(t, e.rdb, "*"), "recovery", "the title check went critical and recovered")
			}

			// Again: the outcomes with an op id are not applied twice.
			applied, err = res(op(e.rdb))
			require.NoError(t, err)
			assert.Equal(t, []bool{false, false, false}, applied[6:9])

			_, _, err = e.health.RecordBatchOp(ctx, []Outcome{os[0], {Ident: "crawl2", Once: true, Result: os[0].Result}})
			require.ErrorIs(t, err, ErrInvalid)
			op, res, err = e.health.RecordBatchOp(ctx, []Outcome{{Ident: "nojob", Once: true, Result: os[0].Result}})
			require.NoError(t, err)
			_, err = res(op(e.rdb))
			require.ErrorIs(t, err, rkeys.ErrJobNotFound)
		})
	}
}
