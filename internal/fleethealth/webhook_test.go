package fleethealth

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// Each notification reaches the webhook once, after the webhook's
// failures are retried; a webhook the fetch policy denies gets nothing.
func TestWebhookGetsEachNotificationOnceThroughRetries(t *testing.T) {
	o := testOpts()
	o.CriticalAfter, o.Webhook = 1, true
	e := newEnv(t, o)
	var mu sync.Mutex
	var got []notification
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var n notification
		assert.NoError(t, json.Unmarshal(b, &n))
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	}))
	defer srv.Close()
	policy, err := netpolicy.Parse([]string{"169.254.0.0/16"})
	require.NoError(t, err)
	s := e.health.NewSender(srv.URL, policy, "host-a", nil)
	s.Backoff = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	e.job(t, "job1")
	e.outcome(t, "host-a", "job1", "wget", model.StatusFailed, 1)
	e.outcome(t, "host-a", "job1", "wget", model.StatusSucceeded, 0)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 }, 20*time.Second, 10*time.Millisecond)
	mu.Lock()
	assert.Equal(t, "problem", got[0].Type)
	assert.Equal(t, "recovery", got[1].Type)
	mu.Unlock()
	assert.EqualValues(t, 4, calls.Load(), "two refusals retried, then one POST each")
	require.Eventually(t, func() bool {
		return e.rdb.Exists(context.Background(), e.health.WebhookOutbox(), s.sending()).Val() == 0
	}, 5*time.Second, 10*time.Millisecond, "nothing left to send")
	assert.Len(t, e.notifications(t), 2, "the queue has them too")

	// A denied webhook: one try, dropped.
	deny, err := netpolicy.Parse([]string{"127.0.0.0/8"})
	require.NoError(t, err)
	d := e.health.NewSender(srv.URL, deny, "host-b", nil)
	d.Backoff = time.Hour
	require.ErrorContains(t, d.post(context.Background(), `{}`), `denied by fetch.deny rule "127.0.0.0/8"`)
}
