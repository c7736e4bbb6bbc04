package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/outbox"
)

// A batch the attempt wrote before Redis went away is not spooled again;
// the spooled ones continue its numbering.
func TestLogFlusherFinalNumbersOn(t *testing.T) {
	store := newMemStore()
	sink := newRunSink(testOptions(), "p/h")
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

func TestSpoolLogWithoutOutbox(t *testing.T) {
	lost, err := spoolLog(nil, []LogBatch{{Entries: make([]LogEntry, 2)}, {Entries: make([]LogEntry, 3)}})
	assert.Equal(t, 5, lost)
	assert.ErrorContains(t, err, "no log outbox")
}
