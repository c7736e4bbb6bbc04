//go:build dev

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/tclient"
	"github.com/archiveflow/archiveflow/workflows"
)

// troubledHeartbeats is a server in trouble for activity heartbeats: for
// 2 s from the first one it is unavailable (a shard moving, a frontend
// restarting), then it answers each 1.5 s late (the call reaches it at
// once, its answer comes back late or at the caller's deadline). It
// counts the calls it refused and those it answered late.
type troubledHeartbeats struct {
	mu              sync.Mutex
	since           time.Time
	refused, slowed int
}

func (h *troubledHeartbeats) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method != workflowservice.WorkflowService_RecordActivityTaskHeartbeat_FullMethodName {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	h.mu.Lock()
	if h.since.IsZero() {
		h.since = time.Now()
	}
	down := time.Since(h.since) < 2*time.Second
	if down {
		h.refused++
	} else {
		h.slowed++
	}
	h.mu.Unlock()
	if down {
		return status.Error(codes.Unavailable, "e2e: heartbeats unavailable")
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	select {
	case <-time.After(1500 * time.Millisecond):
		return err
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// TestHeartbeatTroubleDoesNotCancelAHook: a hook runs its one attempt to
// success while the server refuses heartbeats for 2 s and then takes 1.5 s
// to answer each, both longer than the workers' 1 s heartbeat throttle
// (tclient.HeartbeatCallTimeout).
func TestHeartbeatTroubleDoesNotCancelAHook(t *testing.T) {
	root := t.TempDir()
	writeHook(t, root, "slow", "on_Snapshot__10_slow.sh", `sleep 6
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"done"}'
`)
	s := NewStack(t, server, root, func(c *config.Config) {
		// Heartbeats reach the server at least every 3.5 s here: well
		// inside the heartbeat timeout.
		c.Hooks.HeartbeatTimeout, c.Job.HostTimeout = 10*time.Second, 10*time.Second
	})
	var trouble troubledHeartbeats
	opts, err := tclient.Options(s.Config.Temporal, zap.NewNop())
	require.NoError(t, err)
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(trouble.intercept))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.DialContext(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	s.Client = cl
	s.StartPools(t, nil)

	job := s.Submit(t, "http://127.0.0.1:1/heartbeat-trouble", nil)
	require.NoError(t, s.Wait(t, job, 2*time.Minute))
	var st workflows.Status
	require.NoError(t, job.Run.Get(context.Background(), &st))
	res := resultsByHook(st)["slow"]
	assert.Equal(t, model.StatusSucceeded, res.Status, "%s", res.Error)
	assert.Equal(t, 1, res.Attempts, "no attempt was cancelled by the heartbeats' trouble")
	trouble.mu.Lock()
	defer trouble.mu.Unlock()
	assert.NotZero(t, trouble.refused, "heartbeats were refused")
	assert.NotZero(t, trouble.slowed, "heartbeats were answered late")
}
