package frontier

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

type env struct {
	srv  *testredis.Server
	rdb  *redis.Client
	keys rkeys.Keys
	f    *Frontier
}

func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	srv := testredis.Start(t)
	rdb := srv.Client()
	keys, err := rkeys.NewKeys("ns:")
	require.NoError(t, err)
	f, err := New(rdb, keys, opts)
	require.NoError(t, err)
	return &env{srv: srv, rdb: rdb, keys: keys, f: f}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// twice runs op, dumps, runs it again and requires the same dump.
func twice(t *testing.T, e *env, op func() error) {
	t.Helper()
	require.NoError(t, op())
	first := testredis.Dump(t, e.rdb, "*")
	require.NoError(t, op())
	require.Equal(t, first, testredis.Dump(t, e.rdb, "*"), "repeating the write must leave the same state")
}

// requireNoKeys checks that nothing was written.
func requireNoKeys(t *testing.T, e *env, why string) {
	t.Helper()
	n, err := e.rdb.DBSize(ctxT(t)).Result()
	require.NoError(t, err)
	require.Zero(t, n, why)
}

// claimedSeed seeds job and claims the seed page (attempt 1).
func claimedSeed(t *testing.T, opts Options, cfg Config) (*env, Page) {
	t.Helper()
	e := newEnv(t, opts)
	seed(t, e, cfg)
	return e, claimOne(t, e, "seed-claim")
}

// numbered returns n URLs made from format and 0..n-1.
func numbered(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

func links(urls ...string) []Link {
	out := make([]Link, len(urls))
	for i, u := range urls {
		out[i] = Link{URL: u}
	}
	return out
}

func u(path string) string { return "http://site.example" + path }
