package rkeys

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

func testPipeline(t *testing.T) Pipeline {
	stats, err := CollectHostStats(t.TempDir())
	require.NoError(t, err)
	return Pipeline{
		ID: PipelineID("worker1", "worker1.example", 4242), Hostname: "worker1", FQDN: "worker1.example", PID: 4242,
		Nickname: "w1", Version: "v0.1.0", TaskQueues: []string{"default", "screenshots"}, Status: "running",
		StartedAt: t0, Stats: stats,
	}
}

func TestPipelineLifecycle(t *testing.T) {
	e := newEnv(t, Options{PipelineTTL: 30 * time.Second})
	ctx := ctxT(t)
	p := testPipeline(t)
	// md5("worker1:worker1.example:4242"), computed with `printf %s ... | md5sum`.
	assert.Equal(t, "fb1fda5f35b28ca59e3cc61dbdf72d0f", p.ID)
	assert.Len(t, p.ID, 32)

	ps := e.rdb.Subscribe(ctx, "archivebot:pipeline_updates")
	_, err := ps.Receive(ctx)
	require.NoError(t, err)

	require.NoError(t, e.store.RegisterPipeline(ctx, p))
	select {
	case m := <-ps.Channel():
		assert.Equal(t, "pipeline:"+p.ID, m.Payload)
	case <-ctx.Done():
		t.Fatal("no pipeline update published")
	}
	twice(t, e, func() error { return e.store.RefreshPipeline(ctx, p) })

	key := "pipeline:" + p.ID
	h := e.rdb.HGetAll(ctx, key).Val()
	assert.Equal(t, key, h["id"])
	assert.Equal(t, "worker1", h["hostname"])
	assert.Equal(t, "worker1.example", h["fqdn"])
	assert.Equal(t, "4242", h["pid"])
	assert.Equal(t, "w1", h["nickname"])
	assert.Equal(t, "v0.1.0", h["version"])
	assert.Equal(t, strconv.FormatInt(t0.Unix(), 10), h["ts"])
	for _, f := range []string{"mem_available", "disk_available"} {
		_, err := strconv.ParseInt(h[f], 10, 64)
		assert.NoError(t, err, "%s is an integer byte count", f)
	}
	for _, f := range []string{"mem_usage", "disk_usage", "load_average_1m", "load_average_5m", "load_average_15m"} {
		_, err := strconv.ParseFloat(h[f], 64)
		assert.NoError(t, err, "%s is a number", f)
	}
	var queues []string
	require.NoError(t, json.Unmarshal([]byte(h["task_queues"]), &queues))
	assert.Equal(t, p.TaskQueues, queues)
	assert.NotContains(t, h, "log_outbox_pending", "no outbox, no backlog fields")
	assert.Equal(t, []string{key}, e.rdb.SMembers(ctx, "pipelines").Val())

	p.LogOutbox = &OutboxBacklog{Pending: 7, Rejected: 1}
	require.NoError(t, e.store.RefreshPipeline(ctx, p))
	h = e.rdb.HGetAll(ctx, key).Val()
	assert.Equal(t, "7", h["log_outbox_pending"])
	assert.Equal(t, "1", h["log_outbox_rejected"])
	ttl := e.rdb.TTL(ctx, key).Val()
	assert.True(t, ttl > 25*time.Second && ttl <= 30*time.Second, "ttl %s", ttl)
	inst := "executive_instance:worker1:4242"
	assert.Equal(t, strconv.FormatInt(t0.Unix(), 10), e.rdb.HGet(ctx, inst, "boot_time").Val())
	assert.Greater(t, e.rdb.TTL(ctx, inst).Val(), time.Duration(0))

	list, err := e.store.ListPipelines(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, p.ID, list[0].ID)
	assert.Equal(t, t0.Unix(), list[0].TS.Unix())

	require.NoError(t, e.store.UnregisterPipeline(ctx, p))
	assert.Zero(t, e.rdb.Exists(ctx, key, inst, "pipelines").Val())
}

func TestCrashedPipelineDisappears(t *testing.T) {
	e := newEnv(t, Options{PipelineTTL: time.Second})
	ctx := ctxT(t)
	p := testPipeline(t)
	require.NoError(t, e.store.RegisterPipeline(ctx, p))
	e.srv.FastForward(1100 * time.Millisecond)
	require.Eventually(t, func() bool { return e.rdb.Exists(ctx, "pipeline:"+p.ID).Val() == 0 },
		30*time.Second, 50*time.Millisecond, "a crashed worker's record expires")
	list, err := e.store.ListPipelines(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.Zero(t, e.rdb.Exists(ctx, "pipelines").Val(), "the stale member is pruned")
}

func TestPipelineValidation(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	tests := []struct {
		mutate func(*Pipeline)
		want   string
	}{
		{func(p *Pipeline) { p.ID = "" }, "pipeline id: must not be empty"},
		{func(p *Pipeline) { p.ID = "xyz" }, `pipeline id "xyz": must be hex`},
		{func(p *Pipeline) { p.Hostname = "" }, "hostname: must not be empty"},
		{func(p *Pipeline) { p.PID = 0 }, "pid 0: must be > 0"},
	}
	for _, tc := range tests {
		p := testPipeline(t)
		tc.mutate(&p)
		require.ErrorContains(t, e.store.RegisterPipeline(ctx, p), tc.want)
	}
}

func TestHostStatsParsing(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	var hs HostStats
	require.NoError(t, readLoadAvg(write("la", "0.50 1.25 2.00 1/100 999\n"), &hs))
	assert.Equal(t, HostStats{Load1: 0.5, Load5: 1.25, Load15: 2}, hs)
	require.ErrorContains(t, readLoadAvg(write("la2", "0.5\n"), &hs), "want at least 3 fields")
	require.ErrorContains(t, readLoadAvg(write("la3", "a b c\n"), &hs), `field 1 "a"`)
	require.NoError(t, readMemInfo(write("mi", "MemTotal: 1000 kB\nMemFree: 10 kB\nMemAvailable: 250 kB\n"), &hs))
	assert.EqualValues(t, 250*1024, hs.MemAvailable)
	assert.InDelta(t, 75.0, hs.MemUsagePercent, 0.01)
	require.ErrorContains(t, readMemInfo(write("mi2", "MemFree: 10 kB\n"), &hs), "MemTotal and MemAvailable must be present")
	require.ErrorContains(t, readDisk(filepath.Join(dir, "missing"), &hs), "statfs")

	real, err := CollectHostStats("/")
	require.NoError(t, err)
	assert.Greater(t, real.MemAvailable, int64(0))
	assert.True(t, real.DiskUsagePercent >= 0 && real.DiskUsagePercent <= 100)
}

func TestNamespacePrefixesEverything(t *testing.T) {
	e := newEnv(t, Options{Namespace: "af:"})
	ctx := ctxT(t)
	ps := e.rdb.PSubscribe(ctx, "*")
	_, err := ps.Receive(ctx)
	require.NoError(t, err)

	j := testJob(t, "http://example.com/")
	j.NotBefore = t0.Add(time.Minute)
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	_, err = e.store.SetSettings(ctx, j.Ident, model.Settings{Concurrency: 1, Ignores: []string{"x"}})
	require.NoError(t, err)
	_, err = e.store.AppendLog(ctx, j.Ident, "b", []Packet{Stdout(t0, "x")})
	require.NoError(t, err)
	_, err = e.store.RecordResult(ctx, j.Ident, "op", model.ArchiveResult{Hook: "h", Status: model.StatusSucceeded, EndedAt: t0}, nil)
	require.NoError(t, err)
	require.NoError(t, e.store.RegisterPipeline(ctx, testPipeline(t)))
	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))

	keys := e.rdb.Keys(ctx, "*").Val()
	assert.GreaterOrEqual(t, len(keys), 14)
	for _, k := range keys {
		assert.True(t, strings.HasPrefix(k, "af:"), "key %s lacks the namespace", k)
	}
	h := e.rdb.HGetAll(ctx, "af:"+j.Ident).Val()
	assert.Equal(t, "af:"+j.Ident+"_log", h["log_key"], "log_key names the real (namespaced) key")
	assert.Equal(t, "af:"+j.Ident+"_ignores", h["ignore_patterns_set_key"])

	seen := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for len(seen) < 3 {
		select {
		case m := <-ps.Channel():
			assert.True(t, strings.HasPrefix(m.Channel, "af:"), "channel %s lacks the namespace", m.Channel)
			seen[m.Channel] = true
		case <-timeout:
			t.Fatalf("saw only channels %v", seen)
		}
	}
	assert.True(t, seen["af:updates"] && seen["af:archivebot:job:"+j.Ident] && seen["af:archivebot:pipeline_updates"], "%v", seen)
}

func TestRedisDownFailsPromptly(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	st, err := NewStore(rdb, testOptions(Options{}), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j := testJob(t, "http://example.com/")
	calls := map[string]error{
		"create":  st.CreateJob(ctx, j),
		"state":   st.SetState(ctx, j.Ident, model.StateActive),
		"finish":  st.Finish(ctx, j.Ident, model.StateFinished),
		"heart":   st.Heartbeat(ctx, j.Ident),
		"publish": st.RegisterPipeline(ctx, testPipeline(t)),
	}
	_, calls["log"] = st.AppendLog(ctx, j.Ident, "b", []Packet{Stdout(t0, "x")})
	_, calls["result"] = st.RecordResult(ctx, j.Ident, "op", model.ArchiveResult{Hook: "h", Status: model.StatusSucceeded}, nil)
	_, calls["get"] = st.GetJob(ctx, j.Ident)
	for name, err := range calls {
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "connection refused", name)
	}
	require.NoError(t, ctx.Err(), "every call returned before the deadline")
}

func TestNewStoreValidation(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	tests := []struct {
		opts Options
		want string
	}{
		{Options{LogCap: -1}, "log cap -1"},
		{Options{PacketCap: 10}, "packet cap 10 bytes"},
		{Options{Retention: Retention{Aborted: time.Millisecond}}, "retention aborted 1ms"},
		{Options{Namespace: "a b"}, `namespace "a b"`},
		{Options{PipelineTTL: -time.Second}, "pipeline ttl"},
	}
	for _, tc := range tests {
		_, err := NewStore(rdb, testOptions(tc.opts), nil)
		require.ErrorContains(t, err, tc.want)
	}
	_, err := NewStore(rdb, Options{}, nil)
	require.ErrorContains(t, err, "log cap 0: must be >= 1", "the layout's values are required")
	_, err = NewStore(nil, Options{}, nil)
	require.ErrorContains(t, err, "client must not be nil")
}

// TestPipelinesPublishTheStacksWebUI: a pipeline record carries its
// stack's Web UI address, with the record's TTL, for the CLI's links.
func TestPipelinesPublishTheStacksWebUI(t *testing.T) {
	e := newEnv(t, Options{PipelineTTL: 30 * time.Second})
	ctx := ctxT(t)
	ui, err := e.store.WebUI(ctx)
	require.NoError(t, err)
	assert.Empty(t, ui, "none published yet")

	p := testPipeline(t)
	p.WebUI = "http://127.0.0.1:40123"
	require.NoError(t, e.store.RegisterPipeline(ctx, p))
	ui, err = e.store.WebUI(ctx)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:40123", ui)
	ttl := e.rdb.TTL(ctx, "archiveflow:web_ui").Val()
	assert.True(t, ttl > 0 && ttl <= 30*time.Second, "expires with the pipeline record: %s", ttl)

	require.NoError(t, e.store.PublishWebUI(ctx, "http://127.0.0.1:40999"))
	ui, err = e.store.WebUI(ctx)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:40999", ui)
}

// A worker that claims no work says why in its record; the field goes
// when it claims again.
func TestPipelineSaysWhyItClaimsNoWork(t *testing.T) {
	e := newEnv(t, Options{PipelineTTL: 30 * time.Second})
	ctx := ctxT(t)
	p := testPipeline(t)
	require.NoError(t, e.store.RegisterPipeline(ctx, p))
	key := "pipeline:" + p.ID
	assert.False(t, e.rdb.HExists(ctx, key, FieldNotClaiming).Val())
	p.NotClaiming = "archive disk low: 512 MiB free, under worker.min_free_disk 1 GiB: not claiming work"
	require.NoError(t, e.store.RefreshPipeline(ctx, p))
	assert.Equal(t, p.NotClaiming, e.rdb.HGet(ctx, key, FieldNotClaiming).Val())
	p.NotClaiming = ""
	require.NoError(t, e.store.RefreshPipeline(ctx, p))
	assert.False(t, e.rdb.HExists(ctx, key, FieldNotClaiming).Val())

	avail, err := DiskAvailable(t.TempDir())
	require.NoError(t, err)
	assert.Positive(t, avail)
	_, err = DiskAvailable(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
}
