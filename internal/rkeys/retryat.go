package rkeys

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
)

// FieldRetryAt is the job hash's field holding when its hooks waiting for
// a later retry are due (Unix seconds), as the RetryAt set scores it.
const FieldRetryAt = "retry_at"

// SetRetryAt indexes job ident as waiting for a later retry of its hooks,
// due at at: the RetryAt sorted set (score: at in Unix seconds) and the
// job hash's FieldRetryAt. A zero at takes the job out of both (its later
// retry started). A final job is never indexed (finishing takes it out).
// Repeats change nothing.
func (s *Store) SetRetryAt(ctx context.Context, ident string, at time.Time) error {
	due := ""
	if !at.IsZero() {
		due = unixInt(at)
	}
	keys := map[string]string{"job": s.keys.Job(ident), "retry_at": s.keys.RetryAt()}
	code, err := s.run(ctx, setRetryAtScript, keys, ident, due).Int()
	if err != nil {
		return fmt.Errorf("set retry_at of job %s: %w", ident, err)
	}
	if code == codeApplied && due != "" {
		s.log.Info("job waits for a later retry", logging.Ident(ident), zap.Time("retry_at", at))
	}
	return codeErr(code, "set retry_at of job %s", ident)
}

// setRetryAtScript indexes or unindexes a running job's later retry.
// ARGV: ident due (Unix seconds; empty: remove)
var setRetryAtScript = newScript([]string{"job", "retry_at"}, withStates, `
local ident = ARGV[1]
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
if ARGV[2] == '' then
  redis.call('ZREM', retry_at, ident)
  redis.call('HDEL', job, '`+FieldRetryAt+`')
  return CODE_APPLIED
end
if is_final(redis.call('HGET', job, 'state')) then return CODE_FINAL end
redis.call('ZADD', retry_at, ARGV[2], ident)
redis.call('HSET', job, '`+FieldRetryAt+`', ARGV[2])
return CODE_APPLIED
`)
