package luascript

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/testredis"
)

// Keys reach the script under their declared names whichever way the Go
// side passes them, keys after the named ones are EXTRA, and the prelude
// reads the named keys.
func TestNamedKeysReachTheirLocals(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	sc := New("local function both() return first .. '+' .. second end\n", []string{"first", "second"},
		`return {both(), #EXTRA, EXTRA[1] or '', ARGV[1]}`)

	got, err := sc.Run(ctx, rdb, []string{"a", "b"}, []string{"x"}, "arg").Slice()
	require.NoError(t, err)
	require.Equal(t, []any{"a+b", int64(1), "x", "arg"}, got)

	got, err = sc.RunNamed(ctx, rdb, map[string]string{"second": "b", "first": "a"}, nil, "arg").Slice()
	require.NoError(t, err)
	require.Equal(t, []any{"a+b", int64(0), "", "arg"}, got)
}

// A call that gives the wrong keys fails before Redis sees it, naming them.
func TestWrongKeysAreRefused(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	sc := New("", []string{"first", "second"}, `return 1`)

	err := sc.Run(ctx, rdb, []string{"a"}, nil).Err()
	require.ErrorContains(t, err, "[first second]: 1 given")
	err = sc.RunNamed(ctx, rdb, map[string]string{"first": "a"}, nil).Err()
	require.ErrorContains(t, err, `script key "second": not given`)
}

// Pipeline sends its ops in one round trip; the ops whose script Redis
// does not know (a fresh or restarted Redis) run once, after the scripts
// are loaded.
func TestPipelineLoadsTheScriptsRedisForgot(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	sc := New("", []string{"k"}, `return redis.call('INCR', k)`)
	ops := []Op{
		func(c redis.Cmdable) redis.Cmder { return sc.Run(ctx, c, []string{"n"}, nil) },
		func(c redis.Cmdable) redis.Cmder { return c.Get(ctx, "n") },
		func(c redis.Cmdable) redis.Cmder { return sc.Run(ctx, c, []string{"n"}, nil) },
	}
	for round, want := range []int64{2, 4} {
		cmds := Pipeline(ctx, rdb, ops)
		require.NoError(t, cmds[0].Err(), "round %d", round)
		require.NoError(t, cmds[2].Err(), "round %d", round)
		assert.Equal(t, want, cmds[2].(*redis.Cmd).Val(), "round %d: each script op ran once", round)
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
	}
}
