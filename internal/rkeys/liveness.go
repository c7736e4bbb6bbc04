package rkeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/redis/go-redis/v9"
)

// QueueAlive reports whether some live pipeline:ID record lists queue among
// the task queues its worker process serves. A record lives as long as its
// worker refreshes it (RefreshPipeline) within PipelineTTL; a crashed
// worker's record expires and a cleanly stopped one is deleted, so both
// read as not alive. It only reads: stale `pipelines` members are skipped,
// not pruned (ListPipelines prunes). A record whose task_queues field is
// not a JSON array cannot say which queues it serves: when no other record
// lists queue, that is an error (errMalformed), never a silent "dead".
func (s *Store) QueueAlive(ctx context.Context, queue string) (bool, error) {
	if queue == "" {
		return false, errors.New("queue alive: task queue must not be empty")
	}
	members, err := s.rdb.SMembers(ctx, s.keys.Pipelines()).Result()
	if err != nil {
		return false, fmt.Errorf("queue alive %s: list pipelines: %w", queue, err)
	}
	if len(members) == 0 {
		return false, nil
	}
	sort.Strings(members)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(members))
	for i, m := range members {
		cmds[i] = pipe.HGet(ctx, s.keys.Namespace()+m, "task_queues")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("queue alive %s: read pipelines: %w", queue, err)
	}
	var malformed error
	for i, m := range members {
		raw, err := cmds[i].Result()
		if errors.Is(err, redis.Nil) {
			continue // expired or unregistered record
		}
		if err != nil {
			return false, fmt.Errorf("queue alive %s: read %s: %w", queue, m, err)
		}
		var queues []string
		if err := json.Unmarshal([]byte(raw), &queues); err != nil {
			malformed = fmt.Errorf("queue alive %s: %s field task_queues = %q: %w: must be a JSON array of strings", queue, m, raw, errMalformed)
			continue
		}
		if slices.Contains(queues, queue) {
			return true, nil
		}
	}
	return false, malformed
}
