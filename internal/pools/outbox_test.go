package pools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/outbox"
)

// logStore records AppendLog calls; the other writes are not used here.
type logStore struct {
	mu      sync.Mutex
	batches []string
}

func (s *logStore) SetJobState(context.Context, activities.JobStateInput) error   { return nil }
func (s *logStore) SetStep(context.Context, activities.StepInput) error           { return nil }
func (s *logStore) RecordResult(context.Context, activities.ResultInput) error    { return nil }
func (s *logStore) ReopenJob(context.Context, activities.ReopenInput) error       { return nil }
func (s *logStore) SetRetryAt(context.Context, activities.RetryAtInput) error     { return nil }
func (s *logStore) FinishJob(context.Context, activities.FinishInput) error       { return nil }
func (s *logStore) ApplySettings(context.Context, activities.SettingsInput) error { return nil }
func (s *logStore) Heartbeat(context.Context, string) error                       { return nil }
func (s *logStore) SetArchive(context.Context, activities.ArchiveInput) error     { return nil }
func (s *logStore) AppendLog(_ context.Context, ident, key string, _ int, entries []activities.LogEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		s.batches = append(s.batches, ident+" "+key+" "+e.Message)
	}
	return nil
}

func (s *logStore) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.batches...)
}

// A worker start delivers the log batches an earlier process spooled and
// could not deliver before it stopped (or crashed).
func TestStartLogOutboxDeliversLeftovers(t *testing.T) {
	archive := t.TempDir()
	earlier, err := outbox.Open(filepath.Join(archive, "outbox"), func(context.Context, []byte) error { return nil }, nil, outbox.Options{})
	require.NoError(t, err)
	data, err := json.Marshal(activities.LogBatch{Ident: "job1", Key: "run/act/attempt-1", Seq: 0,
		Entries: []activities.LogEntry{{Kind: activities.LogStdout, Time: time.Now(), Hook: "p/h", Message: "left behind"}}})
	require.NoError(t, err)
	require.NoError(t, earlier.Put(data))

	store := &logStore{}
	ob, stop, err := startLogOutbox(archive, store, zaptest.NewLogger(t))
	require.NoError(t, err)
	defer stop()
	require.Eventually(t, func() bool { return len(store.got()) == 1 }, 30*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"job1 run/act/attempt-1 left behind"}, store.got())
	require.Eventually(t, func() bool { p, _ := ob.Pending(); return len(p) == 0 }, 30*time.Second, 5*time.Millisecond)
}

func TestStartLogOutboxNeedsItsDir(t *testing.T) {
	archive := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(archive, "outbox"), nil, 0o644))
	_, _, err := startLogOutbox(archive, &logStore{}, zaptest.NewLogger(t))
	assert.ErrorContains(t, err, "job log outbox")
}
