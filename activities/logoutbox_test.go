package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/outbox"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// withOutbox rebuilds the fixture's Activities with a log outbox that
// delivers to its store, in batches of batch entries.
func (f *fixture) withOutbox(batch int) *outbox.Outbox {
	f.t.Helper()
	ob, err := outbox.Open(filepath.Join(f.root, "outbox"), LogDelivery(f.store), zap.NewNop(),
		outbox.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	require.NoError(f.t, err)
	a, err := New(f.engine, f.engine, f.store, zap.NewNop(), Options{HostQueue: "q@host", HeartbeatInterval: 20 * time.Millisecond,
		LogFlushInterval: 20 * time.Millisecond, LogBatch: batch, LogOutbox: ob})
	require.NoError(f.t, err)
	f.acts = a
	return ob
}

// runOutbox delivers from ob until the test ends.
func runOutbox(t *testing.T, ob *outbox.Outbox) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ob.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// Log lines a hook prints while Redis is down are not lost: what the
// attempt could not write is spooled when it ends, and delivered, in order
// and once, when Redis is back.
func TestRunHookSpoolsTheLogWhileRedisIsDown(t *testing.T) {
	f := newFixture(t)
	ob := f.withOutbox(40)
	h := f.hook("chatty", "on_Snapshot__10_chatty.sh", `
i=1; while [ $i -le 150 ]; do echo "line $i" >&2; i=$((i+1)); done
echo '{"type":"Response","url":"https://example.com/","status":200,"bytes":5}'
echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	f.store.down.Store(true)

	res, err := f.run(f.env(), runInput(h))

	require.NoError(t, err)
	assert.Equal(t, model.StatusSucceeded, res.Status, "Redis being down does not fail the hook")
	assert.Empty(t, f.store.entries())
	pending, err := ob.Pending()
	require.NoError(t, err)
	require.NotEmpty(t, pending, "the undelivered log is spooled before the activity returns")
	var first LogBatch
	data, err := os.ReadFile(filepath.Join(ob.Dir(), pending[0]))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &first))
	assert.Equal(t, "abc123", first.Ident)
	assert.Equal(t, 0, first.Seq)
	for _, name := range pending[1:] {
		var b LogBatch
		data, err := os.ReadFile(filepath.Join(ob.Dir(), name))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &b))
		assert.LessOrEqual(t, len(b.Entries), 40, "spooled batches are at most LogBatch entries")
	}

	f.store.down.Store(false)
	runOutbox(t, ob)
	require.Eventually(t, func() bool { return len(f.store.entries()) == 151 }, eventually, 5*time.Millisecond)
	require.Eventually(t, func() bool { p, _ := ob.Pending(); return len(p) == 0 }, eventually, 5*time.Millisecond)
	var lines []string
	for _, e := range f.store.entries() {
		if e.Kind == LogStdout {
			lines = append(lines, e.Message)
		}
	}
	want := make([]string, 150)
	for i := range want {
		want[i] = fmt.Sprintf("line %d", i+1)
	}
	assert.Equal(t, want, lines, "every line, in the order printed")
}

// A batch the attempt wrote before Redis went away is not spooled again;
// the spooled ones continue its numbering.
func TestLogFlusherFinalNumbersOn(t *testing.T) {
	store := newMemStore()
	sink := newRunSink(Options{}.withDefaults(), "p/h")
	fl := &logFlusher{store: store, ident: "job", key: "run/act/attempt-1", log: zap.NewNop()}
	sink.StderrLine("a")
	require.True(t, fl.flush(context.Background(), sink))
	store.down.Store(true)
	sink.StderrLine("b")
	require.False(t, fl.flush(context.Background(), sink))
	for _, l := range []string{"c", "d", "e"} {
		sink.StderrLine(l)
	}

	got := fl.final(context.Background(), sink, 2)

	require.Len(t, got, 3)
	msgs := func(b LogBatch) (m []string) {
		for _, e := range b.Entries {
			m = append(m, e.Message)
		}
		return m
	}
	assert.Equal(t, 1, got[0].Seq)
	assert.Equal(t, []string{"b"}, msgs(got[0]))
	assert.Equal(t, 2, got[1].Seq)
	assert.Equal(t, []string{"c", "d"}, msgs(got[1]))
	assert.Equal(t, 3, got[2].Seq)
	assert.Equal(t, []string{"e"}, msgs(got[2]))
	for _, b := range got {
		assert.Equal(t, "run/act/attempt-1", b.Key)
		assert.Equal(t, "job", b.Ident)
	}

	store.down.Store(false)
	sink.StderrLine("f")
	assert.Empty(t, fl.final(context.Background(), sink, 2), "nothing left once Redis takes it")
}

func TestLogDeliveryRefusesWhatNoRetryFixes(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	deliver := LogDelivery(store)

	err := deliver(ctx, []byte("{not json"))
	assert.True(t, outbox.IsPermanent(err), "undecodable: %v", err)
	assert.ErrorContains(t, err, "decode spooled log batch")

	err = deliver(ctx, []byte(`{"ident":"","key":"k","seq":0,"entries":[{"kind":"stdout","message":"x"}]}`))
	assert.True(t, outbox.IsPermanent(err))
	assert.ErrorContains(t, err, "ident must not be empty")

	err = deliver(ctx, []byte(`{"ident":"j","key":"k","seq":-1,"entries":[{"kind":"stdout","message":"x"}]}`))
	assert.ErrorContains(t, err, "seq -1: must be >= 0")

	store.down.Store(true)
	err = deliver(ctx, []byte(`{"ident":"j","key":"k","seq":0,"entries":[{"kind":"stdout","message":"x"}]}`))
	require.Error(t, err)
	assert.False(t, outbox.IsPermanent(err), "Redis down is worth retrying")
}

// Against real Redis: a spooled batch that reached Redis before its file was
// removed is not appended twice, and a batch of a job that is gone is
// refused for good.
func TestLogDeliveryAgainstRedis(t *testing.T) {
	ctx := context.Background()
	s, rs := newRedisStore(t)
	require.NoError(t, rs.CreateJob(ctx, rkeys.Job{Ident: "job1", URL: "https://example.com/", FetchDepth: "shallow",
		Settings: model.Settings{Concurrency: 1}, WorkflowID: "job1"}))
	deliver := LogDelivery(s)
	b, err := json.Marshal(LogBatch{Ident: "job1", Key: "run/act/attempt-1", Seq: 3,
		Entries: []LogEntry{{Kind: LogStdout, Time: time.Now(), Hook: "p/h", Message: "late line"}}})
	require.NoError(t, err)

	require.NoError(t, deliver(ctx, b))
	require.NoError(t, deliver(ctx, b))

	log, err := rs.ReadLog(ctx, "job1", 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)
	assert.Equal(t, "[p/h] late line", log[0].Packet.Message)

	gone, err := json.Marshal(LogBatch{Ident: "nosuchjob", Key: "k", Seq: 0, Entries: []LogEntry{{Kind: LogStdout, Message: "x"}}})
	require.NoError(t, err)
	err = deliver(ctx, gone)
	assert.True(t, outbox.IsPermanent(err), "%v", err)
	assert.True(t, errors.Is(err, ErrNotWritable))
	assert.True(t, strings.Contains(err.Error(), "nosuchjob"), "%v", err)
}

func TestSpoolLogWithoutOutbox(t *testing.T) {
	lost, err := spoolLog(nil, []LogBatch{{Entries: make([]LogEntry, 2)}, {Entries: make([]LogEntry, 3)}})
	assert.Equal(t, 5, lost)
	assert.ErrorContains(t, err, "no log outbox")
}
