package testredis

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Dump renders every key matching pattern ("*" for all) with its type,
// whether it has a TTL, and its value (strings without trailing NUL bytes,
// hashes by sorted field, lists in order, sets sorted, sorted sets with
// scores), so a test can compare whole states, e.g. before and after a
// repeated write.
func Dump(tb testing.TB, rdb redis.UniversalClient, pattern string) string {
	tb.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, pattern).Result()
	if err != nil {
		tb.Fatalf("testredis: dump %s: %v", pattern, err)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			tb.Fatalf("testredis: dump %s: %v", k, err)
		}
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			tb.Fatalf("testredis: dump %s: %v", k, err)
		}
		fmt.Fprintf(&b, "%s %s ttl=%v ", k, typ, ttl > 0)
		switch typ {
		case "string":
			v, _ := rdb.Get(ctx, k).Result()
			fmt.Fprintf(&b, "%q", strings.TrimRight(v, "\x00"))
		case "hash":
			h, _ := rdb.HGetAll(ctx, k).Result()
			names := make([]string, 0, len(h))
			for n := range h {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(&b, "%q=%q ", n, h[n])
			}
		case "list":
			v, _ := rdb.LRange(ctx, k, 0, -1).Result()
			fmt.Fprintf(&b, "%q", v)
		case "set":
			v, _ := rdb.SMembers(ctx, k).Result()
			sort.Strings(v)
			fmt.Fprintf(&b, "%q", v)
		case "zset":
			v, _ := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			for _, z := range v {
				fmt.Fprintf(&b, "%v:%q ", z.Score, z.Member)
			}
		default:
			b.WriteString("(not rendered)")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// UsedMemory is the server's INFO memory used_memory in bytes.
func UsedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO memory: no used_memory")
}

// CommandCalls is how many calls of each command the server ran, by
// command name in lower case (INFO commandstats: a script's own calls
// included, the script call too), so a test or bench can count the
// commands a write costs. miniredis (the fallback) has none: an empty
// map.
func CommandCalls(ctx context.Context, rdb redis.UniversalClient) (map[string]int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats line %q: %w", line, err)
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out, nil
}
