package rkeys

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/model"
)

// ArchiveBot's job queues (lib/job.rb Job#queue): the bot LPUSHes an
// ident into one of them and its pipelines take the oldest from the tail
// into `working`.
const (
	// QueuePending holds recursive (`!a`) jobs.
	QueuePending = keyPending
	// QueuePendingAO holds `!ao` (shallow) jobs.
	QueuePendingAO = "pending-ao"
	// QueuePendingLarge holds jobs queued with `--large`.
	QueuePendingLarge = "pending-large"
	// NamedQueuePrefix starts `pending:NAME`, the queue of `--pipeline NAME`.
	NamedQueuePrefix = "pending:"

	keyClaims = "pipeline-claims"

	// claimScan bounds how many entries of one queue a claim looks at;
	// the bot keeps its queues short (it refuses new jobs past a few).
	claimScan = 1000
)

// Queue is the key of one of ArchiveBot's queues named without namespace
// (QueuePending, QueuePendingAO, QueuePendingLarge or pending:NAME).
func (k Keys) Queue(name string) string { return k.ns + name }

// Claims is the zset of jobs claimed from ArchiveBot's queues whose
// workflow start is not yet confirmed (score: lease deadline, unix ms).
func (k Keys) Claims() string { return k.ns + keyClaims }

// NamedQueues returns the names (without namespace) of the existing
// `pending:NAME` queues, sorted, as ArchiveBot's pipelines find them (SCAN).
func (s *Store) NamedQueues(ctx context.Context) ([]string, error) {
	var names []string
	iter := s.rdb.Scan(ctx, 0, s.keys.Queue(NamedQueuePrefix)+"*", 100).Iterator()
	for iter.Next(ctx) {
		names = append(names, strings.TrimPrefix(iter.Val(), s.keys.ns))
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("list named ArchiveBot queues: %w", err)
	}
	sort.Strings(names)
	return names, nil
}

// ClaimRequest is one claim attempt of an ArchiveBot pipeline.
type ClaimRequest struct {
	// Queues are the candidate queue names (without namespace) in order.
	Queues []string
	// PipelineID is the claiming process's pipeline id (hex).
	PipelineID string
	// TaskQueue is the pool's task queue the job's workflow runs on.
	TaskQueue string
	// Token identifies this claim; ConfirmClaim and RequeueClaim need it.
	Token string
	// Lease is how long the claim may stay unconfirmed before any pipeline
	// may put the job back into its queue.
	Lease time.Duration
}

// Claim is a job taken from an ArchiveBot queue.
type Claim struct {
	Ident string
	Queue string // the queue it came from (without namespace)
	Token string
	// Dropped are idents removed from the queues on the way because their
	// job hash is gone or already final (nothing could run them).
	Dropped []string
}

// ClaimBotJob takes the oldest runnable job from the first candidate queue
// that has one and moves it to `working`, atomically, as ArchiveBot's
// pipelines do with RPOPLPUSH. A queue entry whose hash is missing or final
// is dropped; one that archiveflow itself submitted (its hash has
// create_op: it already has a workflow and is only mirrored in `pending`)
// is left in place. The job hash gets ArchiveBot's started_at and
// pipeline_id, archiveflow's fields it lacks (state pending, counters 0,
// workflow_id, task_queue), the claim (claim_queue, claim_token) and a
// lease in the claims zset. Claim.Ident is empty when nothing is queued.
func (s *Store) ClaimBotJob(ctx context.Context, r ClaimRequest) (Claim, error) {
	if r.Token == "" || r.PipelineID == "" || r.TaskQueue == "" || r.Lease <= 0 {
		return Claim{}, fmt.Errorf("claim ArchiveBot job: %w: token, pipeline id, task queue and lease must be set", ErrInvalid)
	}
	queues := make([]string, 0, len(r.Queues))
	for _, q := range r.Queues {
		queues = append(queues, s.keys.Queue(q))
	}
	now := s.now()
	keys := map[string]string{"working": s.keys.Working(), "time_index": s.keys.TimeIndex(), "claims": s.keys.Claims()}
	res, err := s.runExtra(ctx, claimScript, keys, queues,
		s.keys.ns, r.Token, PipelineMember(r.PipelineID), r.TaskQueue, unixFloat(now), unixInt(now),
		strconv.FormatInt(now.Add(r.Lease).UnixMilli(), 10), claimScan).StringSlice()
	if err != nil {
		return Claim{}, fmt.Errorf("claim ArchiveBot job from %s: %w", strings.Join(r.Queues, ", "), err)
	}
	// res: ident, queue, dropped...
	c := Claim{Dropped: res[2:]}
	if res[0] != "" {
		c.Ident, c.Queue, c.Token = res[0], strings.TrimPrefix(res[1], s.keys.ns), r.Token
	}
	return c, nil
}

// claimScript moves the first runnable ident of the queues (EXTRA) to
// working and adopts its hash. ARGV: namespace token pipeline task_queue
// started_at(float) now(int) lease_deadline_ms scan_limit
var claimScript = newScript([]string{"working", "time_index", "claims"}, withStates, `
local ns = ARGV[1]
local dropped = {}
local limit = tonumber(ARGV[8])
for _, q in ipairs(EXTRA) do
  local idx, seen = -1, 0
  while seen < limit do
    local ident = redis.call('LINDEX', q, idx)
    if not ident then break end
    seen = seen + 1
    local job = ns .. ident
    local gone = redis.call('EXISTS', job) == 0
    if not gone then
      gone = is_final(redis.call('HGET', job, 'state')) or redis.call('HEXISTS', job, 'finished_at') == 1
    end
    if gone then
      redis.call('LREM', q, -1, ident)
      dropped[#dropped + 1] = ident
    elseif redis.call('HEXISTS', job, 'create_op') == 1 then
      idx = idx - 1
    else
      redis.call('LREM', q, -1, ident)
      redis.call('LPUSH', working, ident)
      redis.call('HSET', job, 'started_at', ARGV[5], 'pipeline_id', ARGV[3], 'workflow_id', ident,
        'task_queue', ARGV[4], 'claim_queue', string.sub(q, #ns + 1), 'claim_token', ARGV[2],
        'claimed_at', ARGV[6], 'state', 'pending', 'state_changed_at', ARGV[6], 'ts', ARGV[6])
      for _, f in ipairs({'items_queued', 'items_downloaded', 'bytes_downloaded', 'error_count',
          'r1xx', 'r2xx', 'r3xx', 'r4xx', 'r5xx', 'runk', 'log_score', 'heartbeat', 'settings_age',
          'last_analyzed_log_entry', 'last_broadcasted_log_entry', 'last_trimmed_log_entry',
          'current_step', 'hooks_total', 'hooks_succeeded', 'hooks_failed', 'hooks_skipped', 'hooks_noresults'}) do
        redis.call('HSETNX', job, f, '0')
      end
      redis.call('HSETNX', job, 'queued_at', ARGV[6])
      move_to(ident, 'pending')
      redis.call('ZADD', time_index, 'NX', redis.call('HGET', job, 'queued_at'), ident)
      redis.call('ZADD', claims, ARGV[7], ident)
      local out = {ident, q}
      for _, d in ipairs(dropped) do out[#out + 1] = d end
      return out
    end
  end
end
local out = {'', ''}
for _, d in ipairs(dropped) do out[#out + 1] = d end
return out
`)

// ConfirmClaim ends a claim's lease once its workflow runs: the job stays
// in working, owned by its workflow. It reports false when the claim is no
// longer this token's (it was requeued and perhaps claimed again).
func (s *Store) ConfirmClaim(ctx context.Context, ident, token string) (bool, error) {
	keys := map[string]string{"job": s.keys.Job(ident), "claims": s.keys.Claims()}
	n, err := s.run(ctx, confirmClaimScript, keys, ident, token).Int()
	if err != nil {
		return false, fmt.Errorf("confirm claim of job %s: %w", ident, err)
	}
	return n == codeApplied, nil
}

// confirmClaimScript ARGV: ident token
var confirmClaimScript = newScript([]string{"job", "claims"}, false, `
if redis.call('HGET', job, 'claim_token') ~= ARGV[2] then return CODE_NOOP end
redis.call('ZREM', claims, ARGV[1])
return CODE_APPLIED
`)

// ExpiredClaims returns up to n claims whose lease ended before now.
func (s *Store) ExpiredClaims(ctx context.Context, now time.Time, n int) ([]Claim, error) {
	idents, err := s.rdb.ZRangeByScore(ctx, s.keys.Claims(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(n),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("list expired ArchiveBot claims: %w", err)
	}
	out := make([]Claim, 0, len(idents))
	for _, id := range idents {
		vals, err := s.rdb.HMGet(ctx, s.keys.Job(id), "claim_queue", "claim_token").Result()
		if err != nil {
			return nil, fmt.Errorf("read claim of job %s: %w", id, err)
		}
		c := Claim{Ident: id}
		c.Queue, _ = vals[0].(string)
		c.Token, _ = vals[1].(string)
		out = append(out, c)
	}
	return out, nil
}

// RequeueClaim puts a claimed job whose workflow never started back at the
// tail of its queue (it is the next one taken), undoing the claim:
// working, started_at, pipeline_id, the state sets and the lease. A claim
// whose token changed is left alone (false); a job whose hash is gone or
// final, or that holds no claim, only loses its lease.
func (s *Store) RequeueClaim(ctx context.Context, c Claim) (bool, error) {
	if c.Queue == "" || c.Token == "" {
		return false, fmt.Errorf("requeue claim of job %s: %w: queue and token must be set", c.Ident, ErrInvalid)
	}
	keys := map[string]string{"job": s.keys.Job(c.Ident), "claims": s.keys.Claims(), "working": s.keys.Working(),
		"queue": s.keys.Queue(c.Queue)}
	n, err := s.run(ctx, requeueClaimScript, keys, c.Ident, c.Token, unixInt(s.now())).Int()
	if err != nil {
		return false, fmt.Errorf("requeue claim of job %s: %w", c.Ident, err)
	}
	return n == codeApplied, nil
}

// requeueClaimScript ARGV: ident token now
var requeueClaimScript = newScript([]string{"job", "claims", "working", "queue"}, withStates, `
local ident = ARGV[1]
if redis.call('EXISTS', job) == 0 or is_final(redis.call('HGET', job, 'state')) or redis.call('HEXISTS', job, 'finished_at') == 1 then
  redis.call('ZREM', claims, ident)
  return CODE_NOOP
end
local tok = redis.call('HGET', job, 'claim_token')
if not tok then
  redis.call('ZREM', claims, ident)
  return CODE_NOOP
end
if tok ~= ARGV[2] then return CODE_NOOP end
redis.call('ZREM', claims, ident)
redis.call('LREM', working, 0, ident)
redis.call('RPUSH', queue, ident)
redis.call('HDEL', job, 'started_at', 'pipeline_id', 'claim_token', 'claimed_at')
redis.call('HSET', job, 'ts', ARGV[3])
move_to(ident, 'pending')
return CODE_APPLIED
`)

// BotJob is what an ArchiveBot pipeline watches of a running bot job.
type BotJob struct {
	Ident          string
	SettingsAge    int64
	AbortRequested bool
}

// WorkingBotJobs returns the jobs in `working` that were claimed from
// ArchiveBot's queues (their hash has claim_queue) and are not final, with
// their settings_age and abort_requested, in two round trips.
func (s *Store) WorkingBotJobs(ctx context.Context) ([]BotJob, error) {
	idents, err := s.rdb.LRange(ctx, s.keys.Working(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list working jobs: %w", err)
	}
	if len(idents) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(idents))
	for i, id := range idents {
		cmds[i] = pipe.HMGet(ctx, s.keys.Job(id), "claim_queue", "settings_age", "abort_requested", "state", "finished_at")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read working jobs: %w", err)
	}
	var out []BotJob
	seen := make(map[string]bool, len(idents))
	for i, id := range idents {
		v := cmds[i].Val()
		if seen[id] || v[0] == nil || v[4] != nil {
			continue
		}
		if st, _ := v[3].(string); st != "" && model.JobState(st).Final() {
			continue
		}
		seen[id] = true
		j := BotJob{Ident: id, AbortRequested: v[2] != nil}
		if a, ok := v[1].(string); ok {
			j.SettingsAge, _ = strconv.ParseInt(a, 10, 64)
		}
		out = append(out, j)
	}
	return out, nil
}

// JobFromChannel returns the ident of a job channel (archivebot:job:IDENT)
// and whether the name is one.
func (k Keys) JobFromChannel(channel string) (string, bool) {
	return strings.CutPrefix(channel, k.JobChannel(""))
}

// SubscribeJobChannels subscribes to every job's settings channel
// (archivebot:job:*), on which ArchiveBot's bot publishes the new
// settings_age after each change (and after !abort).
func (s *Store) SubscribeJobChannels(ctx context.Context) *redis.PubSub {
	return s.rdb.PSubscribe(ctx, s.keys.JobChannel("*"))
}
