package rkeys

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

func TestPacketEncoding(t *testing.T) {
	ts := time.Unix(1700000000, 250000000)
	tests := []struct {
		name string
		p    Packet
		want string
	}{
		{"stdout", Stdout(ts, "hello <world> & co"), `{"type":"stdout","ts":1700000000,"message":"hello <world> & co"}`},
		{"download ok", Download(ts, model.Response{URL: "http://e.x/?a=1&b=2", Status: 200}),
			`{"type":"download","ts":1700000000.25,"url":"http://e.x/?a=1&b=2","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false}`},
		{"download 404", Download(ts, model.Response{URL: "http://e.x/", Status: 404}),
			`{"type":"download","ts":1700000000.25,"url":"http://e.x/","response_code":404,"wget_code":"OK","is_error":true,"is_warning":true}`},
		{"download 500", Download(ts, model.Response{URL: "http://e.x/", Status: 500}),
			`{"type":"download","ts":1700000000.25,"url":"http://e.x/","response_code":500,"wget_code":"OK","is_error":true,"is_warning":false}`},
		{"download network error", Download(ts, model.Response{URL: "http://e.x/"}),
			`{"type":"download","ts":1700000000.25,"url":"http://e.x/","response_code":0,"wget_code":"NETWORK_ERROR","is_error":true,"is_warning":false}`},
		{"download wget code", Download(ts, model.Response{URL: "http://e.x/", Status: 200, WgetCode: "RETRFINISHED"}),
			`{"type":"download","ts":1700000000.25,"url":"http://e.x/","response_code":200,"wget_code":"RETRFINISHED","is_error":false,"is_warning":false}`},
		{"ignore", Packet{Type: PacketIgnore, TS: ts, URL: "http://e.x/a.css", Pattern: `\.css$`, Source: "accept_url"},
			`{"type":"ignore","ts":1700000000.25,"url":"http://e.x/a.css","pattern":"\\.css$","source":"accept_url"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.p.Encode(testPacketCap)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			back, err := DecodePacket(got)
			require.NoError(t, err)
			assert.Equal(t, tc.p.Type, back.Type)
			assert.Equal(t, tc.p.URL, back.URL)
		})
	}
	_, err := Packet{Type: "trace"}.Encode(testPacketCap)
	require.ErrorContains(t, err, `log packet type "trace"`)
}

func TestPacketCapTruncates(t *testing.T) {
	long := strings.Repeat("é\"<", 10000)
	for _, p := range []Packet{Stdout(t0, long), Download(t0, model.Response{URL: "http://e.x/" + long, Status: 200}), Packet{Type: PacketIgnore, TS: t0, URL: "http://e.x/", Pattern: long}} {
		t.Run(string(p.Type), func(t *testing.T) {
			out, err := p.Encode(1024)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(out), 1024)
			assert.True(t, utf8.ValidString(out))
			assert.Contains(t, out, "truncated by archiveflow")
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &m), "a truncated packet is still valid JSON")
		})
	}
}

func TestAppendLogLoggerSemantics(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	ps := e.rdb.Subscribe(ctx, "updates")
	_, err := ps.Receive(ctx)
	require.NoError(t, err)

	batch := []Packet{Stdout(time.Time{}, "one"), Download(t0, model.Response{URL: "http://example.com/", Status: 200}), Packet{Type: PacketIgnore, TS: t0, URL: "http://x/", Pattern: "x"}}
	var last int64
	twice(t, e, func() error {
		var err error
		last, err = e.store.AppendLog(ctx, j.Ident, "batch-1", batch)
		return err
	})
	assert.Zero(t, last, "the repeat reports that nothing was written")
	assert.Equal(t, "3", e.rdb.HGet(ctx, j.Ident, "log_score").Val())
	assert.Equal(t, "3", e.rdb.HGet(ctx, j.Ident, "last_analyzed_log_entry").Val(), "own counters: the analyzer skips our packets")
	select {
	case m := <-ps.Channel():
		assert.Equal(t, j.Ident, m.Payload)
	case <-ctx.Done():
		t.Fatal("no publication on updates")
	}

	entries, err := e.store.ReadLog(ctx, j.Ident, 0, 10)
	require.NoError(t, err)
	require.Len(t, entries, 3)
	for i, en := range entries {
		assert.EqualValues(t, i+1, en.Score)
	}
	assert.Equal(t, "one", entries[0].Packet.Message)
	assert.Equal(t, t0.Unix(), entries[0].Packet.TS.Unix(), "zero ts takes the store clock")
	assert.Equal(t, 200, entries[1].Packet.ResponseCode)
	page, err := e.store.ReadLog(ctx, j.Ident, 1, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.EqualValues(t, 2, page[0].Score)

	n, err := e.store.AppendLog(ctx, j.Ident, "", nil)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = e.store.AppendLog(ctx, j.Ident, "", []Packet{{Type: "bogus"}})
	require.ErrorContains(t, err, "packet 0")
	_, err = e.store.ReadLog(ctx, j.Ident, 0, 0)
	require.ErrorContains(t, err, "count 0")
}

func TestAppendLogLeavesAnalyzerMarkerWhenNotOwner(t *testing.T) {
	e := newEnv(t, Options{OwnResponseCounters: Bool(false)})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	_, err := e.store.AppendLog(ctx, j.Ident, "b", []Packet{Stdout(t0, "x")})
	require.NoError(t, err)
	assert.Equal(t, "0", e.rdb.HGet(ctx, j.Ident, "last_analyzed_log_entry").Val())
}

func TestAppendLogCap(t *testing.T) {
	e := newEnv(t, Options{LogCap: 50, LogBatchWindow: 3})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	for b := 0; b < 12; b++ {
		var batch []Packet
		for i := 0; i < 10; i++ {
			batch = append(batch, Stdout(t0, fmt.Sprintf("line %d", b*10+i)))
		}
		_, err := e.store.AppendLog(ctx, j.Ident, fmt.Sprintf("b%d", b), batch)
		require.NoError(t, err)
	}
	assert.EqualValues(t, 50, e.rdb.ZCard(ctx, j.Ident+"_log").Val(), "the log never exceeds its cap")
	entries, err := e.store.ReadLog(ctx, j.Ident, 0, 100)
	require.NoError(t, err)
	assert.EqualValues(t, 71, entries[0].Score, "the oldest entries are trimmed")
	assert.Equal(t, "line 119", entries[len(entries)-1].Packet.Message)
	assert.EqualValues(t, 3, e.rdb.ZCard(ctx, j.Ident+"_logbatches").Val(), "the batch-id window is bounded too")
}

func TestAppendLogMissingJob(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	_, err := e.store.AppendLog(ctx, "nojob", "b", []Packet{Stdout(t0, "x")})
	require.ErrorIs(t, err, ErrJobNotFound)
	assert.Empty(t, dump(t, e.rdb), "no ghost hash or log for a missing job")
}

func TestSubscribeFollowsLog(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	_, err := e.store.AppendLog(ctx, j.Ident, "b0", []Packet{Stdout(t0, "backlog")})
	require.NoError(t, err)

	sub, err := e.store.Subscribe(ctx, j.Ident, 0)
	require.NoError(t, err)
	defer sub.Close()
	next := func() LogEntry {
		select {
		case en, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription ended early: %v", sub.Err())
			}
			return en
		case <-ctx.Done():
			t.Fatal("timed out waiting for a log entry")
		}
		return LogEntry{}
	}
	assert.Equal(t, "backlog", next().Packet.Message)
	_, err = e.store.AppendLog(ctx, j.Ident, "b1", []Packet{Stdout(t0, "live 1"), Stdout(t0, "live 2")})
	require.NoError(t, err)
	assert.Equal(t, "live 1", next().Packet.Message)
	en := next()
	assert.Equal(t, "live 2", en.Packet.Message)
	assert.EqualValues(t, 3, en.Score)
	sub.Close()
	assert.NoError(t, sub.Err())
}
