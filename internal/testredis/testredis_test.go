package testredis

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/devredis"
)

func TestStartServesRedis(t *testing.T) {
	s := Start(t)
	c := s.Client()
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	got, err := c.Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got)
	assert.Contains(t, s.URL, s.Addr)
	if _, err := devredis.FindServer(""); err == nil {
		assert.True(t, s.Real(), "a redis-server is installed, so Start must use it")
	}
}

func TestServersAreIsolated(t *testing.T) {
	a, b := Start(t), Start(t)
	ctx := context.Background()
	require.NoError(t, a.Client().Set(ctx, "only-a", "1", 0).Err())
	n, err := b.Client().Exists(ctx, "only-a").Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestFallbackToMiniredis(t *testing.T) {
	t.Setenv(EnvServer, filepath.Join(t.TempDir(), "no-such-redis-server"))
	t.Setenv(EnvRequire, "")
	s := Start(t)
	assert.False(t, s.Real())
	require.NoError(t, s.Client().Ping(context.Background()).Err())
}

// TestStopRestartKeepsDataAndAddress checks the outage drill's primitive:
// while stopped the address refuses connections; after Restart the same
// address serves the data written before Stop, on both backends.
func TestStopRestartKeepsDataAndAddress(t *testing.T) {
	for _, mini := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "miniredis"}[mini], func(t *testing.T) {
			if mini {
				t.Setenv(EnvServer, filepath.Join(t.TempDir(), "no-such-redis-server"))
				t.Setenv(EnvRequire, "")
			}
			s := Start(t)
			c := s.Client()
			ctx := context.Background()
			require.NoError(t, c.Set(ctx, "kept", "yes", 0).Err())
			require.NoError(t, c.HSet(ctx, "h", "f", "1").Err())

			require.NoError(t, s.Stop())
			probe := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
			defer probe.Close()
			require.Error(t, probe.Ping(ctx).Err(), "a stopped server refuses connections")
			if s.Real() {
				require.ErrorContains(t, s.Stop(), "not running")
			}

			require.NoError(t, s.Restart())
			got, err := c.Get(ctx, "kept").Result()
			require.NoError(t, err, "the old client reconnects to the same address")
			assert.Equal(t, "yes", got)
			assert.Equal(t, "1", c.HGet(ctx, "h", "f").Val())
			if s.Real() {
				require.ErrorContains(t, s.Restart(), "already running")
			}
		})
	}
}
