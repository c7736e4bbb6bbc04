package frontier

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/luascript"
)

// Outcome is how a claimed attempt ended.
type Outcome struct {
	// Status: StatusSucceeded or StatusFailed end the page (DONE);
	// StatusTransient spends one attempt and makes the page READY again
	// while attempts remain, else waiting for its next later retry while
	// Config.RetryLater has a delay left for it (READY, StatusWaiting, not
	// claimed before the delay is over, then with fresh attempts), else
	// DONE failed. StatusPostponed makes it
	// READY again after NotBefore without spending an attempt (its host
	// was busy or rate-limited: internal/hostbudget).
	Status Status
	// NotBefore is when a postponed page may be claimed again (Redis'
	// clock); zero: at once.
	NotBefore time.Time
	// Note (error message, …) is kept with the page, cut to MaxNoteBytes.
	Note string
	// Last, with StatusTransient, spends every attempt the page has left:
	// the attempt ran the page's in-run attempts itself (a crawl's start
	// page, whose snapshot retried its hooks), so the page waits for its
	// next later retry at once, or is DONE failed when no delay is left.
	Last bool
	// JobCounters are increments of fields of the job hash
	// (rkeys.Keys.Job), applied in the same script as the outcome and only
	// when it is applied: a repeated Complete never counts twice. The crawl
	// counts the attempt's responses with them (items_downloaded,
	// bytes_downloaded, r1xx..r5xx, ...). A missing job hash is not
	// recreated.
	JobCounters []JobCounter
	// Once are increments counted once per crawl, by key: the first
	// applied outcome that names a key adds its counters, later ones
	// (another page, host or attempt fetching the same requisite) add
	// nothing.
	Once []OnceCounters
}

// OnceCounters are job counter increments counted once per crawl by Key.
type OnceCounters struct {
	Key      string
	Counters []JobCounter
}

// maxOnce bounds Outcome.Once.
const maxOnce = 4096

// JobCounter is one increment of a job hash field.
type JobCounter struct {
	Field string
	Delta int64
}

// maxJobCounters bounds Outcome.JobCounters.
const maxJobCounters = 32

var completeCodes = map[Status]int{StatusSucceeded: statusSucceeded, StatusFailed: statusFailed, StatusTransient: statusTransient,
	StatusPostponed: statusPostponed}

// Complete records the outcome of attempt on page pageID and returns the
// counts after it. Repeating it for the same (page, attempt) is a no-op
// (the first outcome stands). A page not CLAIMED by that attempt gives
// ErrNotClaimed.
func (f *Frontier) Complete(ctx context.Context, ident string, pageID int64, attempt int, o Outcome) (Counts, error) {
	c, err := f.CompleteCounted(ctx, ident, pageID, attempt, o)
	return c.Counts, err
}

// Completed is what CompleteCounted did.
type Completed struct {
	// Counts are the counts after the outcome.
	Counts Counts
	// Counted: this call applied the outcome and added its JobCounters to
	// the job hash (false: a repeat of an applied outcome, or the job hash
	// is gone).
	Counted bool
	// Once[i] says whether Outcome.Once[i]'s counters were added (this is
	// the first applied outcome naming its key); all false unless Counted.
	Once []bool
}

// CompleteCounted is Complete, saying also which of the outcome's counters
// it added to the job hash: what a caller counting the same increments
// elsewhere (internal/metrics) adds exactly.
func (f *Frontier) CompleteCounted(ctx context.Context, ident string, pageID int64, attempt int, o Outcome) (Completed, error) {
	op, result, err := f.CompleteOp(ctx, ident, pageID, attempt, o)
	if err != nil {
		return Completed{}, err
	}
	return result(op(f.rdb))
}

// CompleteOp is CompleteCounted as an op of a pipeline (luascript.Pipeline);
// result reads the op's command once the pipeline ran. It is
// CompleteBatchOp of one attempt.
func (f *Frontier) CompleteOp(ctx context.Context, ident string, pageID int64, attempt int, o Outcome) (op luascript.Op, result func(redis.Cmder) (Completed, error), err error) {
	op, results, err := f.CompleteBatchOp(ctx, ident, []Completion{{PageID: pageID, Attempt: attempt, Outcome: o}})
	if err != nil {
		return nil, nil, err
	}
	result = func(c redis.Cmder) (Completed, error) {
		done, errs, err := results(c)
		if err != nil {
			return Completed{}, err
		}
		return done[0], errs[0]
	}
	return op, result, nil
}

// Completion is one attempt's outcome in a CompleteBatchOp.
type Completion struct {
	PageID  int64
	Attempt int
	Outcome Outcome
}

// CompleteBatchOp completes many attempts of one job's pages in one
// script (a page sink flush's: activities' RecordPages), each as
// CompleteCounted does alone, in order: the job counters of the outcomes
// it applies are summed, one HINCRBY per field for all of them, in the
// same script as the outcomes, so a repeated batch counts none of them
// twice. result reads the op's command once the pipeline ran: per
// attempt what it did (its Counts are those after the whole batch) or
// its own error (ErrNotClaimed, ErrUnknownPage), or an error of the
// whole batch (ErrNoFrontier, the command's).
func (f *Frontier) CompleteBatchOp(ctx context.Context, ident string, cs []Completion) (op luascript.Op, result func(redis.Cmder) ([]Completed, []error, error), err error) {
	if err := checkIdent(ident); err != nil {
		return nil, nil, err
	}
	var args []any
	for _, c := range cs {
		if args, err = appendCompletion(args, ident, c); err != nil {
			return nil, nil, err
		}
	}
	op = func(c redis.Cmdable) redis.Cmder { return f.runOn(ctx, c, completeScript, ident, args...) }
	result = func(c redis.Cmder) ([]Completed, []error, error) { return completedBatch(c, ident, cs) }
	return op, result, nil
}

// appendCompletion appends one attempt's arguments of completeScript to
// args.
func appendCompletion(args []any, ident string, c Completion) ([]any, error) {
	pageID, attempt, o := c.PageID, c.Attempt, c.Outcome
	if err := checkPageID(ident, pageID); err != nil {
		return nil, err
	}
	if err := checkAttempt(ident, pageID, attempt); err != nil {
		return nil, err
	}
	code, ok := completeCodes[o.Status]
	if !ok {
		return nil, fmt.Errorf("complete job %s page %d: status %q: %w: must be succeeded, failed, transient or postponed", ident, pageID, o.Status, ErrInvalidArgument)
	}
	if len(o.JobCounters) > maxJobCounters {
		return nil, fmt.Errorf("complete job %s page %d: %d job counters: %w: at most %d", ident, pageID, len(o.JobCounters), ErrInvalidArgument, maxJobCounters)
	}
	if len(o.Once) > maxOnce {
		return nil, fmt.Errorf("complete job %s page %d: %d once-counted keys: %w: at most %d", ident, pageID, len(o.Once), ErrInvalidArgument, maxOnce)
	}
	var notBefore int64
	if !o.NotBefore.IsZero() {
		notBefore = o.NotBefore.UnixMilli()
	}
	last := 0
	if o.Last {
		last = 1
	}
	args = append(args, pageID, attempt, code, truncateNote(o.Note), notBefore, last, len(o.JobCounters), len(o.Once))
	var err error
	if args, err = appendCounters(args, o.JobCounters); err != nil {
		return nil, fmt.Errorf("complete job %s page %d: %w", ident, pageID, err)
	}
	for _, once := range o.Once {
		if once.Key == "" || len(once.Counters) > maxJobCounters {
			return nil, fmt.Errorf("complete job %s page %d: once-counted key %q with %d counters: %w: a key must not be empty, at most %d counters",
				ident, pageID, once.Key, len(once.Counters), ErrInvalidArgument, maxJobCounters)
		}
		args = append(args, fingerprint(once.Key), len(once.Counters))
		if args, err = appendCounters(args, once.Counters); err != nil {
			return nil, fmt.Errorf("complete job %s page %d: %w", ident, pageID, err)
		}
	}
	return args, nil
}

// completedBatch reads a complete script's reply.
func completedBatch(c redis.Cmder, ident string, cs []Completion) ([]Completed, []error, error) {
	cmd, _ := c.(*redis.Cmd)
	if cmd == nil {
		return nil, nil, fmt.Errorf("complete job %s: not a script's reply (a bug)", ident)
	}
	what := func() string {
		if len(cs) == 1 {
			return fmt.Sprintf("complete job %s page %d", ident, cs[0].PageID)
		}
		return fmt.Sprintf("complete %d pages of job %s", len(cs), ident)
	}
	v, err := cmd.Result()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what(), err)
	}
	rc, rest, err := replyCode(v)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what(), err)
	}
	switch rc {
	case retApplied:
	case retNoFrontier:
		return nil, nil, fmt.Errorf("%s: %w", what(), ErrNoFrontier)
	default:
		return nil, nil, fmt.Errorf("%s: unexpected reply code %d", what(), rc)
	}
	counts, err := parseCounts(replyAt(rest, 0))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what(), err)
	}
	replies, _ := replyAt(rest, 1).([]any)
	if len(replies) != len(cs) {
		return nil, nil, fmt.Errorf("%s: %d replies", what(), len(replies))
	}
	done, errs := make([]Completed, len(cs)), make([]error, len(cs))
	for i, r := range replies {
		done[i], errs[i] = completed(r, counts, ident, cs[i])
	}
	return done, errs, nil
}

// completed reads one attempt's part of a complete script's reply.
func completed(v any, counts Counts, ident string, c Completion) (Completed, error) {
	pageID, attempt, o := c.PageID, c.Attempt, c.Outcome
	rc, rest, err := replyCode(v)
	if err != nil {
		return Completed{}, fmt.Errorf("complete job %s page %d: %w", ident, pageID, err)
	}
	switch rc {
	case retApplied, retRepeat:
		done := Completed{Counts: counts, Once: make([]bool, len(o.Once))}
		if rc == retApplied && replyInt(rest, 0) == 1 {
			done.Counted = true
			firsts, _ := replyAt(rest, 1).([]any)
			for _, i := range firsts {
				if n, ok := i.(int64); ok && n >= 1 && int(n) <= len(done.Once) {
					done.Once[n-1] = true
				}
			}
		}
		return done, nil
	case retUnknownPage:
		return Completed{}, fmt.Errorf("complete job %s page %d: %w", ident, pageID, ErrUnknownPage)
	case retNotClaimed:
		return Completed{}, fmt.Errorf("complete job %s page %d attempt %d as %s: %w (page is %s at attempt %d)",
			ident, pageID, attempt, o.Status, ErrNotClaimed, stateName(replyInt(rest, 0)), replyInt(rest, 1))
	default:
		return Completed{}, fmt.Errorf("complete job %s page %d: unexpected reply code %d", ident, pageID, rc)
	}
}

// appendCounters appends field, delta pairs to args.
func appendCounters(args []any, cs []JobCounter) ([]any, error) {
	for _, c := range cs {
		if c.Field == "" {
			return nil, fmt.Errorf("job counter field: %w: must not be empty", ErrInvalidArgument)
		}
		args = append(args, c.Field, c.Delta)
	}
	return args, nil
}

// completeScript ends attempts, in order, each once.
// ARGV, per attempt: page attempt status_code note not_before_ms last n m,
// then n job counter field delta pairs, then m once-counted keys: each its
// fingerprint, k, k field delta pairs.
// Reply: {NO_FRONTIER} or {APPLIED, counts, replies}, a reply per attempt:
// {APPLIED, counted, firsts} (counted 1 when the job hash got the
// counters, firsts the 1-based indexes of the once-counted keys that
// counted), {REPEAT}, {UNKNOWN_PAGE} or {NOT_CLAIMED, state, attempts}.
// The job counters of the applied outcomes are summed: one HINCRBY per
// field, after them all.
var completeScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
local has_job = redis.call('EXISTS', job) == 1
local sums, fields = {}, {}
local function add_counters(from, n, apply)
  for i = from, from + 2 * n - 1, 2 do
    local f, d = ARGV[i], tonumber(ARGV[i + 1])
    if apply and has_job and d ~= 0 then
      if not sums[f] then sums[f], fields[#fields + 1] = 0, f end
      sums[f] = sums[f] + d
    end
  end
  return from + 2 * n
end
-- complete ends the attempt whose arguments start at ARGV[a]; it returns
-- its reply and where the next attempt's start.
local function complete(a)
  local id, attempt, status, note = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), ARGV[a + 3]
  local n, m = tonumber(ARGV[a + 6]), tonumber(ARGV[a + 7])
  local onces, nxt = {}, a + 8 + 2 * n
  for k = 1, m do
    onces[k] = nxt
    nxt = nxt + 2 + 2 * tonumber(ARGV[nxt + 1])
  end
  local p = get(id)
  if not p then return {UNKNOWN_PAGE}, nxt end
  if p.done_attempt == attempt then return {REPEAT}, nxt end
  if p.state ~= CLAIMED or p.attempts ~= attempt then return {NOT_CLAIMED, p.state, p.attempts}, nxt end
  tally(p, -1)
  detach(id)
  p.done_attempt = attempt
  p.status = status
  if status == ST_POSTPONED then
    p.state = READY
    local at = tonumber(ARGV[a + 4])
    if at > now_ms() then postpone(p, at) else enqueue(p, true) end
  elseif status == ST_TRANSIENT then
    if p.remaining > 0 then p.remaining = p.remaining - 1 end
    if ARGV[a + 5] == '1' then p.remaining = 0 end
    if p.remaining > 0 then
      p.state = READY
      enqueue(p, false)
    elseif not retry_later(p) then
      p.state, p.status = DONE, ST_FAILED
    end
  else
    p.state, p.remaining = DONE, 0
  end
  set_note(p, note)
  tally(p, 1)
  put(p)
  add_counters(a + 8, n, true)
  local firsts = {}
  for k, at in ipairs(onces) do
    local first = redis.call('SADD', once, ARGV[at]) == 1
    touch(once)
    if first and has_job then firsts[#firsts + 1] = k end
    add_counters(at + 2, tonumber(ARGV[at + 1]), first)
  end
  return {APPLIED, has_job and 1 or 0, firsts}, nxt
end
local replies, a = {}, 1
while a <= #ARGV do
  replies[#replies + 1], a = complete(a)
end
for _, f in ipairs(fields) do redis.call('HINCRBY', job, f, sums[f]) end
finish()
return {APPLIED, counts_reply(), replies}
`)
