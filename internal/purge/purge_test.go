package purge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// clock is the purge's and the store's time; the tests move it on.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

type env struct {
	rdb   *redis.Client
	store *rkeys.Store
	front *frontier.Frontier
	p     *Purger
	clock *clock
	cfg   config.Config
	// health gets a failed hook of every job (a job × hook check in
	// failed_checks), which the purge removes with the job.
	health *fleethealth.Health
}

func newEnv(t *testing.T, namespace string) *env {
	t.Helper()
	rdb := testredis.Start(t).Client()
	cfg := config.Default()
	cfg.Redis.Namespace = namespace
	c := &clock{t: time.Now()}
	opts := rkeys.Options{
		Namespace: namespace, LogCap: cfg.Redis.LogCap, PacketCap: cfg.Redis.PacketCap,
		Retention: rkeys.Retention{Completed: cfg.Redis.RetainCompleted, Aborted: cfg.Redis.RetainAborted, Failed: cfg.Redis.RetainFailed},
		EventsTTL: cfg.Redis.EventsTTL, PipelineTTL: cfg.Worker.PipelineTTL, LogBatchWindow: cfg.Redis.LogBatchWindow,
		OwnResponseCounters: rkeys.Bool(true), Now: c.now,
	}
	store, err := rkeys.NewStore(rdb, opts, nil)
	require.NoError(t, err)
	front, err := frontier.New(rdb, store.Keys(), frontier.Options{})
	require.NoError(t, err)
	health, err := fleethealth.New(store, fleethealth.Options{OKAfter: 1, CriticalAfter: 1, HistoryCap: 10, JobTTL: time.Hour,
		Queue: "notifications", Now: c.now})
	require.NoError(t, err)
	p, err := New(store, front, Options{KeyBatch: 7, Now: c.now, Health: health})
	require.NoError(t, err)
	return &env{rdb: rdb, store: store, front: front, p: p, clock: c, cfg: cfg, health: health}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// job creates, runs and finishes one job with a log and a result; a crawl
// also gets a frontier of pages links, expired with the job as the crawl
// workflow does.
func (e *env) job(t *testing.T, ctx context.Context, n int, state model.JobState, pages int) string {
	t.Helper()
	id, norm, err := ident.FromURL(fmt.Sprintf("http://site%d.example/", n))
	require.NoError(t, err)
	require.NoError(t, e.store.CreateJob(ctx, rkeys.Job{Ident: id, URL: norm, FetchDepth: "inf", WorkflowID: id,
		Settings: model.Settings{Concurrency: 1, Ignores: []string{`\.css$`}}}))
	require.NoError(t, e.store.SetState(ctx, id, model.StateActive))
	_, err = e.store.AppendLog(ctx, id, "b1", []rkeys.Packet{rkeys.Stdout(e.clock.now(), "hello")})
	require.NoError(t, err)
	_, err = e.store.RecordResult(ctx, id, "op1", model.ArchiveResult{Hook: "h", Status: model.StatusSucceeded}, nil)
	require.NoError(t, err)
	_, err = e.health.Record(ctx, fleethealth.Outcome{Ident: id, OpID: "op2", Result: model.ArchiveResult{Plugin: "p", Hook: "h2", Status: model.StatusFailed}})
	require.NoError(t, err)
	if pages > 0 {
		_, err := e.front.Seed(ctx, id, norm, frontier.Config{MaxDepth: -1, MaxAttempts: 2, QueuedField: "items_queued"})
		require.NoError(t, err)
		claimed, _, err := e.front.Claim(ctx, id, 1, "tok", 0)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		links := make([]frontier.Link, pages)
		for i := range links {
			links[i] = frontier.Link{URL: fmt.Sprintf("%sp/%d", norm, i)}
		}
		_, err = e.front.Discover(ctx, id, claimed[0].ID, claimed[0].Attempts, 0, links)
		require.NoError(t, err)
	}
	require.NoError(t, e.store.Finish(ctx, id, state))
	if pages > 0 {
		require.NoError(t, e.front.Expire(ctx, id, e.cfg.Redis.RetainCompleted))
	}
	return id
}

// history are the keys that outlive jobs by design: ArchiveBot's counters
// and notifications, the hourly Flapjack events (their own expiry), and
// Flapjack's all_checks (the check names seen: hook names, bounded).
func history(t *testing.T, ctx context.Context, e *env) {
	t.Helper()
	k := e.store.Keys()
	require.NoError(t, e.rdb.Del(ctx, k.JobsCounter(model.StateFinished), k.JobsCounter(model.StateFailed),
		k.JobsCounter(model.StateAborted), k.FinishNotifications(), k.EventCounters(),
		k.InstanceEventCounters(e.store.Options().Host, e.store.Options().PID), k.Namespace()+"all_checks").Err())
	events, err := e.rdb.Keys(ctx, k.Namespace()+"events_archive:*").Result()
	require.NoError(t, err)
	require.NoError(t, e.rdb.Del(ctx, events...).Err())
}

// After their retention, purging in bounded batches leaves nothing of the
// jobs (crawl frontiers included) in any key or index; a job still
// retained stays whole.
func TestPurgeBatchesRemoveEveryKey(t *testing.T) {
	for _, ns := range []string{"", "af:"} {
		t.Run("namespace="+ns, func(t *testing.T) {
			e := newEnv(t, ns)
			ctx := ctxT(t)
			var ids []string
			for i := range 7 {
				pages := 0
				if i%3 == 0 {
					pages = 1500 // two page buckets
				}
				ids = append(ids, e.job(t, ctx, i, []model.JobState{model.StateFinished, model.StateFailed}[i%2], pages))
			}
			e.clock.add(time.Hour)
			kept := e.job(t, ctx, 100, model.StateFinished, 10)
			keptDump := testredis.Dump(t, e.rdb, e.store.Keys().Job(kept)+"*")

			rep, err := e.p.PurgeBatch(ctx, 3)
			require.NoError(t, err)
			assert.Equal(t, 0, rep.Jobs, "nothing is due before the retention")
			assert.False(t, rep.More)

			e.clock.add(e.cfg.Redis.RetainCompleted - 30*time.Minute)
			due, more, err := e.p.Due(ctx, 100)
			require.NoError(t, err)
			assert.False(t, more)
			require.Len(t, due, 7)
			assert.NotEmpty(t, due[0].FrontierKeys, "a crawl lists its frontier keys")
			assert.Len(t, due[0].Keys, 5)

			var calls, jobs int
			for {
				rep, err := e.p.PurgeBatch(ctx, 3)
				require.NoError(t, err)
				calls++
				jobs += rep.Jobs
				assert.LessOrEqual(t, rep.Jobs, 3, "a batch is bounded")
				if !rep.More {
					break
				}
			}
			assert.Equal(t, 7, jobs)
			assert.Equal(t, 3, calls)

			for _, id := range ids {
				for _, st := range model.JobStates {
					assert.False(t, e.rdb.SIsMember(ctx, e.store.Keys().State(st), id).Val(), "state:%s holds %s", st, id)
				}
				assert.Empty(t, e.rdb.ZScore(ctx, e.store.Keys().TimeIndex(), id).Val())
				left, err := e.rdb.Keys(ctx, e.store.Keys().Job(id)+"*").Result()
				require.NoError(t, err)
				assert.Empty(t, left, "no key of job %s is left", id)
			}
			assert.Equal(t, keptDump, testredis.Dump(t, e.rdb, e.store.Keys().Job(kept)+"*"), "a retained job is untouched")
			assert.True(t, e.rdb.SIsMember(ctx, e.store.Keys().State(model.StateFinished), kept).Val())

			e.clock.add(time.Hour)
			rep, err = e.p.PurgeBatch(ctx, 3)
			require.NoError(t, err)
			assert.Equal(t, 1, rep.Jobs)
			history(t, ctx, e)
			assert.Empty(t, testredis.Dump(t, e.rdb, "*"), "nothing of any job is left")
		})
	}
}

// A job submitted again after it was listed for purge is left alone:
// neither its new keys nor its frontier are touched.
func TestPurgeLeavesAJobSubmittedAgain(t *testing.T) {
	e := newEnv(t, "")
	ctx := ctxT(t)
	id := e.job(t, ctx, 1, model.StateFinished, 5)
	e.clock.add(e.cfg.Redis.RetainCompleted + time.Minute)
	due, _, err := e.p.Due(ctx, 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	// Submitted again (a fresh job over the retained one): still in
	// scheduled-purge by a stale entry, as if the purge had listed it just
	// before the new submission.
	v, err := e.store.GetJob(ctx, id)
	require.NoError(t, err)
	require.NoError(t, e.store.CreateJob(ctx, rkeys.Job{Ident: id, URL: v.URL, FetchDepth: "inf", WorkflowID: id + "-2", Replace: true,
		Settings: model.Settings{Concurrency: 1}}))
	require.NoError(t, e.rdb.ZAdd(ctx, e.store.Keys().ScheduledPurge(), redis.Z{Score: 1, Member: id}).Err())

	rep, err := e.p.PurgeBatch(ctx, 10)
	require.NoError(t, err)
	assert.Zero(t, rep.Jobs)
	assert.Equal(t, int64(1), e.rdb.Exists(ctx, id).Val(), "the new job stays")
	assert.NotEmpty(t, e.rdb.Keys(ctx, id+"_frontier*").Val(), "its frontier is not deleted")
	assert.Zero(t, e.rdb.Exists(ctx, e.store.Keys().ScheduledPurge()).Val(), "the stale entry is dropped")
}
