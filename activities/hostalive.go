package activities

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// ErrTypeNoHostRegistry is HostAlive on a worker whose store cannot tell
// which hosts are alive. Never retried: the workflow then falls back to
// treating a host queue nobody started work from as lost.
const ErrTypeNoHostRegistry = "NoHostRegistry"

// HostRegistry tells whether a worker host is alive: whether some worker
// process that still reports itself (pipeline:ID records in Redis) serves a
// task queue. A Store that also implements HostRegistry (RedisStore does)
// is used by HostAlive.
type HostRegistry interface {
	// QueueAlive reports whether a live worker process lists queue among
	// the task queues it serves. An error means "cannot tell", never "dead".
	QueueAlive(ctx context.Context, queue string) (bool, error)
}

var _ HostRegistry = (*RedisStore)(nil)

// QueueAlive reads the live pipeline:ID records (internal/rkeys).
func (s *RedisStore) QueueAlive(ctx context.Context, queue string) (bool, error) {
	alive, err := s.Redis.QueueAlive(ctx, queue)
	if err != nil {
		return false, fmt.Errorf("check host queue %s: %w", queue, err)
	}
	return alive, nil
}

// HostAlive runs on a pool's shared task queue (any worker of the pool can
// answer) and reports whether the worker host serving hostQueue is alive.
// The workflow asks it when an activity waited on a host queue past its
// ScheduleToStart timeout: a busy host (every slot taken) keeps its
// pipeline:ID record fresh and is waited for; a dead one is re-claimed.
// A store error (Redis down) is returned as a retryable error: the workflow
// retries and never reads it as a dead host.
func (a *Activities) HostAlive(ctx context.Context, hostQueue string) (bool, error) {
	if hostQueue == "" {
		return false, invalidInput("host alive: host queue must not be empty")
	}
	if a.hosts == nil {
		return false, nonRetryable(ErrTypeNoHostRegistry, "host alive %s: this worker's store cannot tell which hosts are alive", hostQueue)
	}
	alive, err := a.hosts.QueueAlive(ctx, hostQueue)
	if err != nil {
		a.log.Warn("cannot tell whether a host is alive", zap.String("host_queue", hostQueue), zap.Error(err))
		return false, fmt.Errorf("host alive %s: %w", hostQueue, err)
	}
	a.log.Info("checked host liveness", zap.String("host_queue", hostQueue), zap.Bool("alive", alive))
	return alive, nil
}
