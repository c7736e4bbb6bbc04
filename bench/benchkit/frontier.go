package benchkit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/frontier"
)

// FrontierMemory sums MEMORY USAGE (SAMPLES 0: every element) over every
// key of ident's crawl frontier (Frontier.JobKeys), in all and per kind of
// key (the key name after the ident, up to its first ':').
func FrontierMemory(ctx context.Context, rdb redis.UniversalClient, f *frontier.Frontier, ident string) (int64, map[string]int64, error) {
	keys, err := f.JobKeys(ctx, ident)
	if err != nil {
		return 0, nil, fmt.Errorf("frontier keys of %s: %w", ident, err)
	}
	cmds := make([]*redis.IntCmd, len(keys))
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.MemoryUsage(ctx, k, 0)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, nil, fmt.Errorf("MEMORY USAGE of %s's frontier: %w", ident, err)
	}
	var total int64
	kinds := map[string]int64{}
	for i, c := range cmds {
		n := c.Val() // 0 for a key that does not exist
		total += n
		kind := strings.TrimPrefix(keys[i], ident)
		if j := strings.IndexByte(kind, ':'); j >= 0 {
			kind = kind[:j]
		}
		kinds[kind] += n
	}
	return total, kinds, nil
}
