package rkeys

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
)

// DueJob is one entry of scheduled-purge whose purge time has come.
type DueJob struct {
	Ident string
	// Due is the purge time (finished_at + retention).
	Due time.Time
	// State is the job hash's state, empty when the hash already expired.
	State model.JobState
	// Keys are the job's own keys (JobKeys) that still exist.
	Keys []string
}

// PurgeDue returns up to limit jobs of scheduled-purge due at or before
// now, the earliest first, with what is left of each. It changes nothing
// (`starter purge --dry-run` shows it).
func (s *Store) PurgeDue(ctx context.Context, now time.Time, limit int) ([]DueJob, error) {
	if limit < 1 {
		return nil, fmt.Errorf("list jobs due for purge: %w: limit %d: must be >= 1", ErrInvalid, limit)
	}
	zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key: s.keys.ScheduledPurge(), Start: "-inf", Stop: unixInt(now), ByScore: true, Count: int64(limit),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("list jobs due for purge: %w", err)
	}
	out := make([]DueJob, len(zs))
	states := make([]*redis.StringCmd, len(zs))
	exists := make([][]*redis.IntCmd, len(zs))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range zs {
			ident, _ := z.Member.(string)
			out[i] = DueJob{Ident: ident, Due: time.Unix(int64(z.Score), 0)}
			states[i] = p.HGet(ctx, s.keys.Job(ident), "state")
			for _, k := range s.keys.JobKeys(ident) {
				exists[i] = append(exists[i], p.Exists(ctx, k))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("list jobs due for purge: %w", err)
	}
	for i := range out {
		out[i].State = model.JobState(states[i].Val())
		for j, k := range s.keys.JobKeys(out[i].Ident) {
			if exists[i][j].Val() == 1 {
				out[i].Keys = append(out[i].Keys, k)
			}
		}
	}
	return out, nil
}

// PurgeJob removes a job whose purge time has come, in one script: every
// key of it (JobKeys), its entries in every state:STATE set, time-index,
// scheduled, pending and working, and last its scheduled-purge entry. It
// reports whether the job was purged and how many of its keys were still
// there. A job not (or no longer) due, or not final (submitted again, or
// retried), is left alone; a not-final job's stale entry is dropped.
// Crawl frontier keys are internal/frontier's: delete them first.
func (s *Store) PurgeJob(ctx context.Context, ident string, now time.Time) (purged bool, keys int, err error) {
	if ident == "" {
		return false, 0, fmt.Errorf("purge job: %w: ident must not be empty", ErrInvalid)
	}
	k := s.jobKeys(ident)
	k["pending"], k["working"], k["time_index"] = s.keys.Pending(), s.keys.Working(), s.keys.TimeIndex()
	k["scheduled"], k["purge"] = s.keys.Scheduled(), s.keys.ScheduledPurge()
	res, err := s.run(ctx, purgeJobScript, k, ident, unixInt(now)).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("purge job %s: %w", ident, err)
	}
	if res[0] == codeApplied {
		s.log.Info("job purged", logging.Ident(ident), zap.Int64("keys", res[1]))
	}
	return res[0] == codeApplied, int(res[1]), nil
}

// purgeJobScript removes one due, final (or expired) job.
// ARGV: ident now. Returns {code, keys deleted}.
var purgeJobScript = newScript([]string{"job", "log", "ignores", "ops", "logbatches",
	"pending", "working", "time_index", "scheduled", "purge"}, withStates, `
local ident = ARGV[1]
local due = redis.call('ZSCORE', purge, ident)
if not due or tonumber(due) > tonumber(ARGV[2]) then return {CODE_NOOP, 0} end
local state = redis.call('HGET', job, 'state')
if state and not is_final(state) then
  redis.call('ZREM', purge, ident)
  return {CODE_NOOP, 0}
end
local n = redis.call('DEL', job, log, ignores, ops, logbatches)
for _, set in pairs(state_sets) do redis.call('SREM', set, ident) end
redis.call('ZREM', time_index, ident)
redis.call('ZREM', scheduled, ident)
redis.call('LREM', pending, 0, ident)
redis.call('LREM', working, 0, ident)
redis.call('ZREM', purge, ident)
return {CODE_APPLIED, n}
`)

// Reopen is what ReopenJob needs to take a final job back for a retry run.
type Reopen struct {
	// Op identifies the retry run (its run id): a repeat with the same Op
	// changes nothing.
	Op string
	// Hooks is how many failed results the retry runs again; they leave
	// hooks_failed now and are counted anew when the retry records them.
	// bytes_downloaded keeps the bytes the failed runs fetched, as
	// ArchiveBot's counters keep every response (RecordResult).
	Hooks int
}

// ReopenJob takes a finished, failed or aborted job back for a retry run
// (`starter retry`, `starter unabort`), exactly once per Reopen.Op: the
// job leaves its final state and
// scheduled-purge and goes back to pending (the retry's workflow moves it
// on), its keys lose their retention TTL, finished_at, the failed and
// aborted flags and the limit a crawl finished at (FieldLimit) are removed,
// its jobs_completed/jobs_failed/jobs_aborted count is taken back (the
// retry's Finish counts the job again) and hooks_failed loses the results
// the retry runs again. retry_op and retries record the retry. A job still
// running is refused with ErrJobExists.
func (s *Store) ReopenJob(ctx context.Context, ident string, r Reopen) error {
	switch {
	case r.Op == "":
		return fmt.Errorf("reopen job %s: %w: op must not be empty (repeat-safety key)", ident, ErrInvalid)
	case r.Hooks < 0:
		return fmt.Errorf("reopen job %s: %w: hooks %d: must be >= 0", ident, ErrInvalid, r.Hooks)
	}
	k := s.jobKeys(ident)
	k["pending"], k["purge"] = s.keys.Pending(), s.keys.ScheduledPurge()
	k["completed"], k["failed"] = s.keys.JobsCounter(model.StateFinished), s.keys.JobsCounter(model.StateFailed)
	k["aborted"] = s.keys.JobsCounter(model.StateAborted)
	now := unixInt(s.now())
	// Negative increments go as Go-rendered strings: Lua would render -0 as
	// "-0", which HINCRBY refuses.
	code, err := s.run(ctx, reopenScript, k, ident, r.Op, strconv.Itoa(-r.Hooks), now).Int()
	if err != nil {
		return fmt.Errorf("reopen job %s: %w", ident, err)
	}
	switch code {
	case codeRunning:
		return fmt.Errorf("reopen job %s: %w: it has not ended", ident, ErrJobExists)
	case codeApplied:
		s.log.Info("job reopened for a retry", logging.Ident(ident), zap.Int("hooks", r.Hooks))
	}
	return codeErr(code, "reopen job %s", ident)
}

// reopenScript takes a finished/failed job back to pending once per op.
// ARGV: ident op -hooks now
var reopenScript = newScript([]string{"job", "log", "ignores", "ops", "logbatches", "tags",
	"pending", "purge", "completed", "failed", "aborted"}, withStates, `
local ident = ARGV[1]
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
if redis.call('HGET', job, 'retry_op') == ARGV[2] then return CODE_NOOP end
local cur = redis.call('HGET', job, 'state')
local counters = {finished = completed, failed = failed, aborted = aborted}
if not counters[cur] then return CODE_RUNNING end
redis.call('DECR', counters[cur])
for _, k in ipairs({job, log, ignores, ops, logbatches, tags}) do redis.call('PERSIST', k) end
redis.call('HDEL', job, 'finished_at', 'failed', 'aborted', '`+FieldLimit+`')
redis.call('HINCRBY', job, 'hooks_failed', ARGV[3])
redis.call('HINCRBY', job, 'retries', 1)
redis.call('HSET', job, 'retry_op', ARGV[2], 'state', 'pending', 'state_changed_at', ARGV[4], 'ts', ARGV[4])
redis.call('ZREM', purge, ident)
move_to(ident, 'pending')
if not redis.call('LPOS', pending, ident) then redis.call('LPUSH', pending, ident) end
return CODE_APPLIED
`)
