package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/outbox"
)

// withOutbox rebuilds the fixture's activities with a log outbox that
// delivers to its store, in batches of batch entries.
func (f *fixture) withOutbox(batch int) *outbox.Outbox {
	f.t.Helper()
	ob, err := outbox.Open(filepath.Join(f.root, "outbox"), activities.LogDelivery(f.store), zap.NewNop(),
		outbox.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	require.NoError(f.t, err)
	opts := testOptions()
	opts.LogBatch, opts.LogOutbox = batch, ob
	f.withOptions(opts)
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
	var first activities.LogBatch
	data, err := os.ReadFile(filepath.Join(ob.Dir(), pending[0]))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &first))
	assert.Equal(t, "abc123", first.Ident)
	assert.Equal(t, 0, first.Seq)
	for _, name := range pending[1:] {
		var b activities.LogBatch
		data, err := os.ReadFile(filepath.Join(ob.Dir(), name))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &b))
		assert.LessOrEqual(t, len(b.Entries), 40, "spooled batches are at most activities.LogBatch entries")
	}

	f.store.down.Store(false)
	runOutbox(t, ob)
	require.Eventually(t, func() bool { return len(f.store.entries()) == 151 }, eventually, 5*time.Millisecond)
	require.Eventually(t, func() bool { p, _ := ob.Pending(); return len(p) == 0 }, eventually, 5*time.Millisecond)
	var lines []string
	for _, e := range f.store.entries() {
		if e.Kind == activities.LogStdout {
			lines = append(lines, e.Message)
		}
	}
	want := make([]string, 150)
	for i := range want {
		want[i] = fmt.Sprintf("line %d", i+1)
	}
	assert.Equal(t, want, lines, "every line, in the order printed")
}
