package fleethealth

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

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

var t0 = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

type env struct {
	srv    *testredis.Server
	rdb    *redis.Client
	health *Health
	clock  *clock
	ops    int
}

func testOpts() Options {
	return Options{OKAfter: 1, CriticalAfter: 3, HistoryCap: 100, JobTTL: 7 * 24 * time.Hour, Queue: "archiveflow:notifications"}
}

func newEnv(t *testing.T, o Options) *env {
	t.Helper()
	srv := testredis.Start(t)
	rdb := srv.Client()
	c := &clock{t: t0}
	st, err := rkeys.NewStore(rdb, rkeys.Options{LogCap: 100, PacketCap: 4096,
		Retention: rkeys.Retention{Completed: time.Hour, Aborted: time.Second, Failed: time.Hour},
		EventsTTL: time.Hour, PipelineTTL: time.Minute, LogBatchWindow: 10, OwnResponseCounters: rkeys.Bool(true),
		Host: "w", PID: 1, Now: c.Now}, nil)
	require.NoError(t, err)
	o.Now = c.Now
	h, err := New(st, o)
	require.NoError(t, err)
	return &env{srv: srv, rdb: rdb, health: h, clock: c}
}

// job makes the IDENT hash a job's outcomes need.
func (e *env) job(t *testing.T, ident string) {
	t.Helper()
	require.NoError(t, e.rdb.HSet(context.Background(), ident, "state", "active").Err())
}

// outcome records one outcome of plugin's hook on host for ident, one
// second after the last, under a fresh op id.
func (e *env) outcome(t *testing.T, host, ident, plugin string, st model.Status, exit int) bool {
	t.Helper()
	e.clock.Add(time.Second)
	e.ops++
	r := model.ArchiveResult{Plugin: plugin, Hook: "on_Snapshot__50_" + plugin + ".py", Status: st, ExitCode: exit,
		StartedAt: e.clock.Now().Add(-time.Second), EndedAt: e.clock.Now()}
	if st == model.StatusFailed {
		r.Error = "wget: command not found"
	}
	ok, err := e.health.Record(context.Background(), Outcome{Host: host, Ident: ident, OpID: opID(e.ops), Result: r})
	require.NoError(t, err)
	return ok
}

func opID(n int) string {
	return "run-1/step-5/op-" + string(rune('a'+n%26)) + time.Duration(n).String()
}

type notification struct {
	EventID   string `json:"event_id"`
	Type      string `json:"type"`
	State     string `json:"state"`
	Summary   string `json:"summary"`
	Time      int64  `json:"time"`
	LastState string `json:"last_state"`
}

func (e *env) notifications(t *testing.T) []notification {
	t.Helper()
	raw, err := e.rdb.LRange(context.Background(), "archiveflow:notifications", 0, -1).Result()
	require.NoError(t, err)
	var out []notification
	for _, r := range raw {
		var n notification
		require.NoError(t, json.Unmarshal([]byte(r), &n), r)
		out = append(out, n)
	}
	return out
}
