package purgebench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/purge"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

const (
	jobs       = 1000
	logLines   = 50
	results    = 5
	crawlEvery = 10
	crawlLinks = 1000
	batch      = 100
)

type bench struct {
	rdb   *redis.Client
	store *rkeys.Store
	front *frontier.Frontier
	p     *purge.Purger
	now   time.Time
}

// job writes one finished job as the workers do.
func (e *bench) job(ctx context.Context, n int) error {
	id, norm, err := ident.FromURL(fmt.Sprintf("http://site%d.example/", n))
	if err != nil {
		return err
	}
	if err := e.store.CreateJob(ctx, rkeys.Job{Ident: id, URL: norm, FetchDepth: "inf", WorkflowID: id,
		Settings: model.Settings{Concurrency: 2, Ignores: []string{`\.css$`}}}); err != nil {
		return err
	}
	if err := e.store.SetState(ctx, id, model.StateActive); err != nil {
		return err
	}
	packets := make([]rkeys.Packet, logLines)
	for i := range packets {
		packets[i] = rkeys.Stdout(e.now, fmt.Sprintf("[wget] line %d of a hook's stderr", i))
	}
	if _, err := e.store.AppendLog(ctx, id, "b1", packets); err != nil {
		return err
	}
	for i := range results {
		r := model.ArchiveResult{Hook: fmt.Sprintf("on_Snapshot__%d0_h.sh", i), Status: model.StatusSucceeded, EndedAt: e.now}
		if _, err := e.store.RecordResult(ctx, id, fmt.Sprintf("run/step-%d", i), r, nil); err != nil {
			return err
		}
	}
	crawl := n%crawlEvery == 0
	if crawl {
		if _, err := e.front.Seed(ctx, id, norm, frontier.Config{MaxDepth: -1, MaxAttempts: 3, QueuedField: "items_queued"}); err != nil {
			return err
		}
		pages, _, err := e.front.Claim(ctx, id, 1, "tok", 0)
		if err != nil {
			return err
		}
		links := make([]frontier.Link, crawlLinks)
		for i := range links {
			links[i] = frontier.Link{URL: fmt.Sprintf("%spage/%d", norm, i)}
		}
		if _, err := e.front.Discover(ctx, id, pages[0].ID, pages[0].Attempts, 0, links); err != nil {
			return err
		}
	}
	if err := e.store.Finish(ctx, id, model.StateFinished); err != nil {
		return err
	}
	if crawl {
		return e.front.Expire(ctx, id, 48*time.Hour)
	}
	return nil
}

// historyBytes is the MEMORY USAGE of the keys finished jobs leave by
// design, outside the jobs: finish_notifications (ArchiveBot's bot pops
// it) and the hourly events_archive lists (their own expiry).
func historyBytes(ctx context.Context, rdb *redis.Client, k rkeys.Keys) int64 {
	keys, _ := rdb.Keys(ctx, k.Namespace()+"events_archive:*").Result()
	var n int64
	for _, key := range append(keys, k.FinishNotifications()) {
		n += rdb.MemoryUsage(ctx, key).Val()
	}
	return n
}

// memoryParts are INFO memory's parts of used_memory.
func memoryParts(ctx context.Context, rdb *redis.Client) string {
	info, _ := rdb.Info(ctx, "memory").Result()
	var out []string
	for _, line := range strings.Split(info, "\n") {
		for _, f := range []string{"used_memory_dataset:", "used_memory_overhead:", "used_memory_scripts:", "mem_clients_normal:", "used_memory_startup:"} {
			if strings.HasPrefix(line, f) {
				out = append(out, strings.TrimSpace(line))
			}
		}
	}
	return strings.Join(out, " ")
}

// trimHistory empties those keys so the jobs' own memory is measured.
func trimHistory(ctx context.Context, rdb *redis.Client, k rkeys.Keys) {
	keys, _ := rdb.Keys(ctx, k.Namespace()+"events_archive:*").Result()
	rdb.Del(ctx, append(keys, k.FinishNotifications())...)
}

func (e *bench) purgeAll(ctx context.Context) (int, error) {
	total := 0
	for {
		rep, err := e.p.PurgeBatch(ctx, batch)
		if err != nil {
			return total, err
		}
		total += rep.Jobs
		if !rep.More {
			return total, nil
		}
	}
}

// BenchmarkPurgeMemory writes jobs, lets their retention pass (by the
// purge's clock) and purges them; Redis' memory must return to its level
// before the jobs. The history keys every finished job leaves by design
// (jobs_completed, finish_notifications, event counters, hourly events)
// are written once before the baseline, so the baseline already holds
// them and they are not the jobs' memory.
func BenchmarkPurgeMemory(b *testing.B) {
	srv := testredis.Start(b)
	if !srv.Real() {
		b.Skip("needs a real redis-server (INFO memory)")
	}
	rdb := srv.Client()
	ctx := context.Background()
	clock := time.Now()
	opts := rkeys.Options{
		LogCap: 10000, PacketCap: 64 << 10, EventsTTL: 3 * time.Hour, PipelineTTL: 30 * time.Second, LogBatchWindow: 4096,
		Retention:           rkeys.Retention{Completed: 48 * time.Hour, Aborted: 5 * time.Second, Failed: 48 * time.Hour},
		OwnResponseCounters: rkeys.Bool(true), Now: func() time.Time { return clock },
	}
	store, err := rkeys.NewStore(rdb, opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	front, err := frontier.New(rdb, store.Keys(), frontier.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := purge.New(store, front, purge.Options{KeyBatch: 500, Now: func() time.Time { return clock }})
	if err != nil {
		b.Fatal(err)
	}
	e := &bench{rdb: rdb, store: store, front: front, p: p, now: clock}
	for i := 0; i < b.N; i++ {
		// Warm-up: scripts cached, history keys present; then trim the
		// history to a fixed size so the baseline is comparable.
		if err := e.job(ctx, -crawlEvery); err != nil { // a crawl: every script loads
			b.Fatal(err)
		}
		clock = clock.Add(49 * time.Hour)
		if _, err := e.purgeAll(ctx); err != nil {
			b.Fatal(err)
		}
		k := store.Keys()
		trimHistory(ctx, rdb, k)
		before, _ := testredis.UsedMemory(ctx, rdb)
		b.Logf("before the jobs: %s", memoryParts(ctx, rdb))
		keysBefore := rdb.DBSize(ctx).Val()

		start := time.Now()
		for n := range jobs {
			if err := e.job(ctx, n); err != nil {
				b.Fatal(err)
			}
		}
		write := time.Since(start)
		events := historyBytes(ctx, rdb, k)
		trimHistory(ctx, rdb, k)
		loaded, _ := testredis.UsedMemory(ctx, rdb)
		keysLoaded := rdb.DBSize(ctx).Val()

		clock = clock.Add(49 * time.Hour)
		start = time.Now()
		n, err := e.purgeAll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		after, _ := testredis.UsedMemory(ctx, rdb)
		// Redis shrinks the key space's hash tables in its cron (10 Hz)
		// once they are mostly empty: the settled figure.
		time.Sleep(2 * time.Second)
		settled, _ := testredis.UsedMemory(ctx, rdb)
		b.Logf("after the purge: %s", memoryParts(ctx, rdb))
		for _, key := range rdb.Keys(ctx, "*").Val() {
			b.Logf("left: %s %d bytes", key, rdb.MemoryUsage(ctx, key).Val())
		}
		keysAfter := rdb.DBSize(ctx).Val()
		if n != jobs || keysAfter != keysBefore {
			b.Fatalf("purged %d of %d jobs; %d keys before the jobs, %d after the purge", n, jobs, keysBefore, keysAfter)
		}
		b.ReportMetric(float64(before), "used_memory-before")
		b.ReportMetric(float64(loaded), "used_memory-loaded")
		b.ReportMetric(float64(after), "used_memory-after")
		b.ReportMetric(float64(settled), "used_memory-settled")
		b.ReportMetric(float64(settled-before), "bytes-left")
		b.ReportMetric(float64(took.Milliseconds()), "purge-ms")
		b.Logf("%d jobs (%d crawls of %d URLs) written in %s: used_memory %d → %d (+%d), keys %d → %d (history left aside: %d bytes of finish notifications and hourly events); purged in %s (%d per batch): used_memory %d at once, %d settled (%+d vs before), keys %d",
			jobs, jobs/crawlEvery, crawlLinks, write.Round(time.Millisecond), before, loaded, loaded-before, keysBefore, keysLoaded, events,
			took.Round(time.Millisecond), batch, after, settled, settled-before, keysAfter)
	}
}
