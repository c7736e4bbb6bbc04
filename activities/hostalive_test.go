package activities

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/rkeys"
)

func TestHostAliveReadsPipelineRecords(t *testing.T) {
	ctx := context.Background()
	s, rs := newRedisStore(t)
	a, err := New(nil, nil, s, zap.NewNop(), Options{})
	require.NoError(t, err)
	p := rkeys.Pipeline{ID: rkeys.PipelineID("host-1", "host-1.example", 42), Hostname: "host-1", PID: 42,
		TaskQueues: []string{"archiveflow-default", "archiveflow-default@host-1-42"}, Status: "running"}

	alive, err := a.HostAlive(ctx, "archiveflow-default@host-1-42")
	require.NoError(t, err)
	assert.False(t, alive, "no pipeline registered")

	require.NoError(t, rs.RegisterPipeline(ctx, p))
	alive, err = a.HostAlive(ctx, "archiveflow-default@host-1-42")
	require.NoError(t, err)
	assert.True(t, alive, "a busy host keeps its record fresh")
	alive, err = a.HostAlive(ctx, "archiveflow-default@host-2-7")
	require.NoError(t, err)
	assert.False(t, alive, "another host's queue")

	require.NoError(t, rs.UnregisterPipeline(ctx, p))
	alive, err = a.HostAlive(ctx, "archiveflow-default@host-1-42")
	require.NoError(t, err)
	assert.False(t, alive, "a stopped host")
}

// downRegistry is a HostRegistry whose Redis is unreachable.
type downRegistry struct{ Store }

func (downRegistry) QueueAlive(context.Context, string) (bool, error) {
	return false, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
}

// storeOnly hides every method but Store's: no HostRegistry.
type storeOnly struct{ Store }

func TestHostAliveErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := newRedisStore(t)
	tests := []struct {
		name         string
		store        Store
		queue        string
		want         string
		nonRetryable bool
		errType      string
	}{
		{"redis down is retryable", downRegistry{s}, "q@h", "host alive q@h: dial tcp", false, ""},
		{"no registry", storeOnly{s}, "q@h", "cannot tell which hosts are alive", true, ErrTypeNoHostRegistry},
		{"empty queue", s, "", "host queue must not be empty", true, ErrTypeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(nil, nil, tt.store, zap.NewNop(), Options{})
			require.NoError(t, err)
			alive, err := a.HostAlive(ctx, tt.queue)
			require.Error(t, err)
			assert.False(t, alive)
			assert.Contains(t, err.Error(), tt.want)
			var appErr *temporal.ApplicationError
			if tt.nonRetryable {
				require.ErrorAs(t, err, &appErr)
				assert.True(t, appErr.NonRetryable())
				assert.Equal(t, tt.errType, appErr.Type())
			} else {
				assert.False(t, errors.As(err, &appErr) && appErr.NonRetryable(), "must be retried")
			}
		})
	}
}
