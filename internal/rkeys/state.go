package rkeys

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
)

// SetState moves a job between the non-final states (pending, active,
// draining): the hash's state, the state:STATE sets, the pending/working
// lists and time-index change in one script. Moving to active records
// started_at (once) and removes the job from `scheduled`. Final states are
// reached only through Finish.
func (s *Store) SetState(ctx context.Context, ident string, state model.JobState) error {
	if _, err := model.ParseJobState(string(state)); err != nil {
		return fmt.Errorf("set state of job %s: %w: %w", ident, ErrInvalid, err)
	}
	if state.Final() {
		return fmt.Errorf("set state of job %s to %s: %w: final states are written by Finish", ident, state, ErrInvalid)
	}
	now := s.now()
	keys := map[string]string{"job": s.keys.Job(ident), "pending": s.keys.Pending(), "working": s.keys.Working(),
		"scheduled": s.keys.Scheduled(), "time_index": s.keys.TimeIndex()}
	code, err := s.run(ctx, setStateScript, keys, ident, string(state), unixInt(now), unixFloat(now)).Int()
	if err != nil {
		return fmt.Errorf("set state of job %s to %s: %w", ident, state, err)
	}
	return codeErr(code, "set state of job %s to %s", ident, state)
}

// setStateScript moves a non-final job between states.
// ARGV: ident new_state ts now_float
var setStateScript = newScript([]string{"job", "pending", "working", "scheduled", "time_index"}, withStates, `
local ident = ARGV[1]
local new = ARGV[2]
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
local cur = redis.call('HGET', job, 'state')
if is_final(cur) then
  if cur == new then return CODE_NOOP end
  return CODE_FINAL
end
move_to(ident, new)
local function ensure(list)
  if not redis.call('LPOS', list, ident) then redis.call('LPUSH', list, ident) end
end
if new == 'pending' then
  ensure(pending)
  redis.call('LREM', working, 0, ident)
else
  redis.call('LREM', pending, 0, ident)
  ensure(working)
  redis.call('ZREM', scheduled, ident)
  if redis.call('HEXISTS', job, 'started_at') == 0 then
    redis.call('HSET', job, 'started_at', ARGV[4])
  end
end
local q = redis.call('HGET', job, 'queued_at') or ARGV[3]
redis.call('ZADD', time_index, 'NX', q, ident)
if cur == new then return CODE_NOOP end
redis.call('HSET', job, 'state', new, 'state_changed_at', ARGV[3], 'ts', ARGV[3])
return CODE_APPLIED
`)

// codeErr maps a script's negative return code to a typed error.
func codeErr(code int, format string, args ...any) error {
	switch code {
	case codeNotFound:
		return fmt.Errorf(format+": %w", append(args, ErrJobNotFound)...)
	case codeFinal:
		return fmt.Errorf(format+": %w", append(args, ErrJobFinal)...)
	}
	return nil
}

// Finish moves a job to its final state (finished, aborted or failed)
// exactly once: finished_at, ArchiveBot's aborted/failed flags, the
// jobs_completed/jobs_aborted/jobs_failed counter, finish_notifications,
// state sets, removal from pending/working/scheduled, a scheduled-purge
// entry and the retention EXPIRE of every key of the job. A repeated Finish
// of a job already final is a no-op; of an expired job, ErrJobNotFound.
func (s *Store) Finish(ctx context.Context, ident string, state model.JobState) error {
	return s.finish(ctx, ident, state, "")
}

// FinishLimited finishes a crawl that reached one of its limits
// (model.Settings' MaxPages, MaxBytes, MaxDuration) as Finish does with
// state finished, and records limit, the limit in words ("page limit 100
// reached"), in the job hash's FieldLimit and its finish notification.
// ReopenJob removes it.
func (s *Store) FinishLimited(ctx context.Context, ident, limit string) error {
	if limit == "" {
		return fmt.Errorf("finish job %s at a limit: %w: the limit must be named", ident, ErrInvalid)
	}
	return s.finish(ctx, ident, model.StateFinished, limit)
}

func (s *Store) finish(ctx context.Context, ident string, state model.JobState, limit string) error {
	if !state.Final() {
		return fmt.Errorf("finish job %s: %w: state %q: must be finished, aborted or failed", ident, ErrInvalid, state)
	}
	ret := s.retention(state)
	now := s.now()
	keys := s.jobKeys(ident)
	keys["pending"], keys["working"], keys["jobs_counter"] = s.keys.Pending(), s.keys.Working(), s.keys.JobsCounter(state)
	keys["notifications"], keys["scheduled"], keys["purge"] = s.keys.FinishNotifications(), s.keys.Scheduled(), s.keys.ScheduledPurge()
	keys["retry_at"] = s.keys.RetryAt()
	code, err := s.run(ctx, finishScript, keys,
		ident, string(state), unixInt(now), seconds(ret), unixInt(now.Add(ret)), s.keys.LogChannel(), limit).Int()
	if err != nil {
		return fmt.Errorf("finish job %s as %s: %w", ident, state, err)
	}
	if code == codeApplied {
		s.log.Info("job finished", logging.Ident(ident), zap.String("state", string(state)), zap.Duration("retention", ret))
	}
	return codeErr(code, "finish job %s as %s", ident, state)
}

// finishScript moves a job to its final state exactly once.
// ARGV: ident state finished_at retention_seconds purge_at channel limit
var finishScript = newScript([]string{"job", "log", "ignores", "ops", "logbatches", "rules", "tags",
	"pending", "working", "jobs_counter", "notifications", "scheduled", "purge", "retry_at"}, withStates, `
local ident = ARGV[1]
local state = ARGV[2]
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
local cur = redis.call('HGET', job, 'state')
if is_final(cur) then return CODE_NOOP end
redis.call('HSET', job, 'state', state, 'finished_at', ARGV[3], 'state_changed_at', ARGV[3], 'ts', ARGV[3])
if state == 'aborted' then redis.call('HSET', job, 'aborted', 'true') end
if state == 'failed' then redis.call('HSET', job, 'failed', 'true') end
if ARGV[7] ~= '' then redis.call('HSET', job, '`+FieldLimit+`', ARGV[7]) end
redis.call('LREM', pending, 0, ident)
redis.call('LREM', working, 0, ident)
redis.call('INCR', jobs_counter)
local info = {ident = ident, state = state, aborted = (state == 'aborted'), failed = (state == 'failed'),
  finished_at = tonumber(ARGV[3])}
if ARGV[7] ~= '' then info.limit = ARGV[7] end
for _, f in ipairs({'fetch_depth', 'pipeline_id', 'queued_at', 'started_by', 'started_in', 'url', 'url_file', 'workflow_id', 'run_id'}) do
  local v = redis.call('HGET', job, f)
  if v then info[f] = v end
end
redis.call('RPUSH', notifications, cjson.encode(info))
redis.call('ZREM', scheduled, ident)
redis.call('ZREM', retry_at, ident)
redis.call('HDEL', job, 'retry_at')
redis.call('ZADD', purge, ARGV[5], ident)
move_to(ident, state)
for _, k in ipairs({job, log, ignores, ops, logbatches, rules, tags}) do redis.call('EXPIRE', k, ARGV[4]) end
redis.call('PUBLISH', ARGV[6], ident)
return CODE_APPLIED
`)

func (s *Store) retention(state model.JobState) time.Duration { return s.opts.Retention.Of(state) }
