package testredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDumpRendersEveryType(t *testing.T) {
	s := Start(t)
	c := s.Client()
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, "s", "ab\x00\x00", 0).Err())
	require.NoError(t, c.HSet(ctx, "h", "z", "1", "a", "2").Err())
	require.NoError(t, c.RPush(ctx, "l", "x", "y").Err())
	require.NoError(t, c.SAdd(ctx, "set", "q", "p").Err())
	require.NoError(t, c.ZAdd(ctx, "z", redisZ(2, "b"), redisZ(1, "a")).Err())
	require.NoError(t, c.Expire(ctx, "l", time.Hour).Err())
	want := `h hash ttl=false "a"="2" "z"="1" 
l list ttl=true ["x" "y"]
s string ttl=false "ab"
set set ttl=false ["p" "q"]
z zset ttl=false 1:"a" 2:"b" 
`
	assert.Equal(t, want, Dump(t, c, "*"))
	assert.Equal(t, "s string ttl=false \"ab\"\n", Dump(t, c, "s"))
	first := Dump(t, c, "*")
	require.NoError(t, c.HSet(ctx, "h", "a", "3").Err())
	assert.NotEqual(t, first, Dump(t, c, "*"), "a changed value shows")
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
