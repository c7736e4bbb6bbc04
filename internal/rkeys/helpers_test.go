package rkeys

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)

type env struct {
	srv   *testredis.Server
	rdb   *redis.Client
	store *Store
	clock *clock
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	srv := testredis.Start(t)
	rdb := srv.Client()
	c := &clock{t: t0}
	opts.Now = c.Now
	if opts.Host == "" {
		opts.Host = "worker1"
		opts.PID = 4242
	}
	st, err := NewStore(rdb, testOptions(opts), nil)
	require.NoError(t, err)
	return &env{srv: srv, rdb: rdb, store: st, clock: c}
}

// testPacketCap is the packet cap of these tests.
const testPacketCap = 64 << 10

// testOptions fills the fields opts leaves zero with the values of these
// tests (ArchiveBot's retention, 10,000 log entries, ...).
func testOptions(opts Options) Options {
	if opts.LogCap == 0 {
		opts.LogCap = 10000
	}
	if opts.PacketCap == 0 {
		opts.PacketCap = testPacketCap
	}
	r := &opts.Retention
	if r.Completed == 0 {
		r.Completed = 48 * time.Hour
	}
	if r.Aborted == 0 {
		r.Aborted = 5 * time.Second
	}
	if r.Failed == 0 {
		r.Failed = 48 * time.Hour
	}
	if opts.EventsTTL == 0 {
		opts.EventsTTL = 3 * time.Hour
	}
	if opts.PipelineTTL == 0 {
		opts.PipelineTTL = 30 * time.Second
	}
	if opts.LogBatchWindow == 0 {
		opts.LogBatchWindow = 4096
	}
	if opts.OwnResponseCounters == nil {
		opts.OwnResponseCounters = Bool(true)
	}
	return opts
}

func testJob(t *testing.T, raw string) Job {
	t.Helper()
	id, norm, err := ident.FromURL(raw)
	require.NoError(t, err)
	return Job{
		Ident: id, URL: norm, FetchDepth: "shallow", StartedBy: "alice", StartedIn: "cli",
		Settings:   model.Settings{Concurrency: 2, DelayMinMS: 250, DelayMaxMS: 375, Ignores: []string{`\.css$`, `^https?://ads\.`}},
		HooksTotal: 20, WorkflowID: "snapshot-" + id, RunID: "run-1", TaskQueue: "default",
	}
}

// dump renders every key of the database (type, value, TTL rounded to the
// second) so tests can compare whole states.
func dump(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		ttl, err := rdb.TTL(ctx, k).Result()
		require.NoError(t, err)
		hasTTL := ttl > 0
		fmt.Fprintf(&b, "%s %s ttl=%v ", k, typ, hasTTL)
		switch typ {
		case "string":
			v, _ := rdb.Get(ctx, k).Result()
			fmt.Fprintf(&b, "%q", v)
		case "hash":
			h, _ := rdb.HGetAll(ctx, k).Result()
			names := make([]string, 0, len(h))
			for n := range h {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(&b, "%s=%q ", n, h[n])
			}
		case "list":
			v, _ := rdb.LRange(ctx, k, 0, -1).Result()
			fmt.Fprintf(&b, "%q", v)
		case "set":
			v, _ := rdb.SMembers(ctx, k).Result()
			sort.Strings(v)
			fmt.Fprintf(&b, "%q", v)
		case "zset":
			v, _ := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			for _, z := range v {
				fmt.Fprintf(&b, "%v:%q ", z.Score, z.Member)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// twice runs op, dumps, runs it again and requires the same dump.
func twice(t *testing.T, e *env, op func() error) {
	t.Helper()
	require.NoError(t, op())
	first := dump(t, e.rdb)
	require.NoError(t, op())
	require.Equal(t, first, dump(t, e.rdb), "repeating the write must leave the same state")
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
