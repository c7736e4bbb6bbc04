package rkeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// QueueAlive reports whether some live pipeline:ID record lists queue among
// the task queues its worker process serves (QueueLease > 0).
func (s *Store) QueueAlive(ctx context.Context, queue string) (bool, error) {
	lease, err := s.QueueLease(ctx, queue)
	return lease > 0, err
}

// QueueLease reports how much longer queue's worker counts as alive without
// refreshing its record: the remaining time to live of the live
// pipeline:ID records that list queue among the task queues their worker
// process serves (the longest, if several do), 0 when none does. A record
// lives as long as its worker refreshes it (RefreshPipeline) within
// PipelineTTL; a crashed worker's record expires and a cleanly stopped one
// is deleted, so both read as 0. It only reads: stale `pipelines` members
// are skipped, not pruned (ListPipelines prunes). A record whose
// task_queues field is not a JSON array cannot say which queues it serves:
// when no other record lists queue, that is an error (errMalformed), never
// a silent "dead".
func (s *Store) QueueLease(ctx context.Context, queue string) (time.Duration, error) {
	_, lease, err := s.queueRecord(ctx, queue)
	return lease, err
}

// QueuePipeline is the id (hex, RunInfo.PipelineID) of the live pipeline
// whose worker process serves queue, "" when none does: the process a
// snapshot's host queue sends its work to. Read as QueueLease reads (the
// longest-lived record if several list queue).
func (s *Store) QueuePipeline(ctx context.Context, queue string) (string, error) {
	member, _, err := s.queueRecord(ctx, queue)
	return strings.TrimPrefix(member, pipelinePrefix), err
}

// queueRecord is the live pipeline:ID record listing queue with the most
// time to live, and that time (QueueLease's rules).
func (s *Store) queueRecord(ctx context.Context, queue string) (string, time.Duration, error) {
	if queue == "" {
		return "", 0, errors.New("queue alive: task queue must not be empty")
	}
	members, err := s.rdb.SMembers(ctx, s.keys.Pipelines()).Result()
	if err != nil {
		return "", 0, fmt.Errorf("queue alive %s: list pipelines: %w", queue, err)
	}
	if len(members) == 0 {
		return "", 0, nil
	}
	sort.Strings(members)
	pipe := s.rdb.Pipeline()
	queues := make([]*redis.StringCmd, len(members))
	ttls := make([]*redis.DurationCmd, len(members))
	for i, m := range members {
		queues[i] = pipe.HGet(ctx, s.keys.Namespace()+m, "task_queues")
		ttls[i] = pipe.PTTL(ctx, s.keys.Namespace()+m)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, fmt.Errorf("queue alive %s: read pipelines: %w", queue, err)
	}
	var lease time.Duration
	var best string
	var malformed error
	for i, m := range members {
		raw, err := queues[i].Result()
		if errors.Is(err, redis.Nil) {
			continue // expired or unregistered record
		}
		if err != nil {
			return "", 0, fmt.Errorf("queue alive %s: read %s: %w", queue, m, err)
		}
		var listed []string
		if err := json.Unmarshal([]byte(raw), &listed); err != nil {
			malformed = fmt.Errorf("queue alive %s: %s field task_queues = %q: %w: must be a JSON array of strings", queue, m, raw, errMalformed)
			continue
		}
		if !slices.Contains(listed, queue) {
			continue
		}
		ttl, err := ttls[i].Result()
		switch {
		case err != nil:
			return "", 0, fmt.Errorf("queue alive %s: ttl of %s: %w", queue, m, err)
		case ttl == -1:
			// No expiry (a record written without one): alive for as
			// long as a refreshed record would be.
			ttl = s.opts.PipelineTTL
		case ttl <= 0:
			continue // expired between the two reads
		}
		if ttl > lease {
			lease, best = ttl, m
		}
	}
	if lease > 0 {
		return best, lease, nil
	}
	return "", 0, malformed
}
