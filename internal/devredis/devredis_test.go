package devredis

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.DebugLevel)
	return zap.New(core), logs
}

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func client(t *testing.T, s *Server) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(s.URL())
	require.NoError(t, err)
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func requireRealRedis(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("ARCHIVEFLOW_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server required: %v", err)
		}
		t.Skip("redis-server not installed")
	}
	return p
}

func TestEmbeddedModeServesRedisOverTCPAndSaysSo(t *testing.T) {
	log, logs := observed()
	s := start(t, Options{Mode: ModeEmbedded, Log: log})

	assert.Equal(t, KindEmbedded, s.Kind())
	assert.False(t, s.Real())
	c := client(t, s)
	require.NoError(t, c.Set(context.Background(), "k", "v", 0).Err())
	assert.Equal(t, "v", c.Get(context.Background(), "k").Val())

	warn := logs.FilterMessageSnippet("EMBEDDED").All()
	require.Len(t, warn, 1)
	assert.Equal(t, s.URL(), warn[0].ContextMap()["url"])
}

func TestAutoFallsBackToEmbeddedWhenConfiguredServerIsMissing(t *testing.T) {
	log, logs := observed()
	missing := filepath.Join(t.TempDir(), "no-such-redis-server")
	s := start(t, Options{ServerPath: missing, Log: log})

	assert.Equal(t, KindEmbedded, s.Kind())
	warn := logs.FilterMessageSnippet("EMBEDDED").All()
	require.Len(t, warn, 1)
	assert.Contains(t, warn[0].ContextMap()["reason"], missing)
}

func TestRealModeRefusesAMissingServer(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-redis-server")
	_, err := Start(context.Background(), Options{Mode: ModeReal, ServerPath: missing})
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)
	assert.Contains(t, err.Error(), EnvServer)
}

func TestEnvVarNamesTheServer(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "env-redis-server")
	t.Setenv(EnvServer, missing)
	_, err := Start(context.Background(), Options{Mode: ModeReal})
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)
}

func TestRealServerIsUsedAndSaysSo(t *testing.T) {
	bin := requireRealRedis(t)
	log, logs := observed()
	s := start(t, Options{ServerPath: bin, Log: log})

	assert.Equal(t, KindReal, s.Kind())
	info, err := client(t, s).Info(context.Background(), "server").Result()
	require.NoError(t, err)
	assert.Contains(t, info, "redis_version")
	assert.Contains(t, info, "process_id:")
	got := logs.FilterMessage("using a real redis-server").All()
	require.Len(t, got, 1)
	assert.Equal(t, bin, got[0].ContextMap()["binary"])
	assert.Empty(t, logs.FilterMessageSnippet("EMBEDDED").All())
}

func TestRealServerPersistsUnderDataDirAcrossRestarts(t *testing.T) {
	bin := requireRealRedis(t)
	dir := t.TempDir()
	ctx := context.Background()

	s1 := start(t, Options{ServerPath: bin, DataDir: dir, Persist: true})
	require.NoError(t, client(t, s1).Set(ctx, "job", "kept", 0).Err())
	require.NoError(t, s1.Stop())
	_, err := client(t, s1).Ping(ctx).Result()
	require.Error(t, err, "Stop returns once redis-server is gone")

	s2 := start(t, Options{ServerPath: bin, DataDir: dir, Persist: true})
	assert.Equal(t, "kept", client(t, s2).Get(ctx, "job").Val())
	assert.FileExists(t, filepath.Join(dir, "redis.log"))
}

func TestServerThatExitsAtOnceIsReportedWithItsOutput(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "redis-server")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho 'fatal: bad config' >&2\nexit 3\n"), 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Start(ctx, Options{Mode: ModeReal, ServerPath: fake, Port: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited before answering PING")
	assert.Contains(t, err.Error(), fake)
}

func TestStopIsIdempotent(t *testing.T) {
	s := start(t, Options{Mode: ModeEmbedded})
	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop())
	_, err := client(t, s).Ping(context.Background()).Result()
	assert.Error(t, err, "server still answers after Stop")
}

func TestOptionsAreValidated(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"unknown mode", Options{Mode: "cluster"}, `redis mode "cluster": must be auto, real or embedded`},
		{"negative port", Options{Port: -1}, "redis port -1: must be 0"},
		{"port too large", Options{Port: 70000}, "redis port 70000"},
		{"negative timeout", Options{StartTimeout: -time.Second}, "redis start timeout -1s: must be >= 0"},
		{"persist without a data dir", Options{Persist: true}, "redis persist: needs a data dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(context.Background(), tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Without a data dir a real server runs in a temporary one, which Stop
// removes.
func TestRealServerRemovesItsTemporaryDir(t *testing.T) {
	bin := requireRealRedis(t)
	s := start(t, Options{ServerPath: bin})
	dir := s.dir
	require.DirExists(t, dir)
	require.NoError(t, s.Stop())
	assert.NoDirExists(t, dir)
}
