package luascript

import (
	"context"
	"testing"

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
