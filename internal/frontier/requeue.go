package frontier

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// MaxRequeueBatch is the most page records one Requeue script call reads.
const MaxRequeueBatch = 5000

// Requeued is what a Requeue did.
type Requeued struct {
	// Pages is how many failed pages this requeue (its token) made READY,
	// counted once however often it was repeated or resumed.
	Pages int64
	// Seed reports that page 1 (the start page) is among them.
	Seed bool
	// Counts are the page counts after it.
	Counts Counts
}

// Requeue makes every page whose final status is failed (DONE, failed:
// attempts exhausted or a fatal failure) READY again at its recorded depth
// with fresh attempts (Config.MaxAttempts) and later retries, for a retry of the crawl
// (`starter retry`). Relations, depths and every other page stay as they
// are; items_queued (Config.QueuedField) counts a requeued page as waiting
// again. It reads the page records in id order, batch records per script
// call (1..MaxRequeueBatch), and keeps its cursor in the frontier under
// token: repeating or resuming a Requeue with the same token (a retried
// activity, a caller that crashed between batches) continues where it
// stopped and never requeues a page twice; a new token starts a new
// requeue from the first page. ErrNoFrontier when the job has none.
func (f *Frontier) Requeue(ctx context.Context, ident, token string, batch int) (Requeued, error) {
	if err := checkIdent(ident); err != nil {
		return Requeued{}, err
	}
	switch {
	case token == "":
		return Requeued{}, fmt.Errorf("requeue failed pages of job %s: token: %w: must not be empty (repeat-safety key)", ident, ErrInvalidArgument)
	case batch < 1 || batch > MaxRequeueBatch:
		return Requeued{}, fmt.Errorf("requeue failed pages of job %s: batch %d: %w: must be 1..%d", ident, batch, ErrInvalidArgument, MaxRequeueBatch)
	}
	for {
		v, err := f.run(ctx, requeueScript, ident, token, strconv.Itoa(batch)).Result()
		if err != nil {
			return Requeued{}, fmt.Errorf("requeue failed pages of job %s: %w", ident, err)
		}
		code, rest, err := replyCode(v)
		if err != nil {
			return Requeued{}, fmt.Errorf("requeue failed pages of job %s: %w", ident, err)
		}
		switch code {
		case retApplied:
			continue // more records to read
		case retRepeat:
		case retNoFrontier:
			return Requeued{}, fmt.Errorf("requeue failed pages of job %s: %w", ident, ErrNoFrontier)
		default:
			return Requeued{}, fmt.Errorf("requeue failed pages of job %s: unexpected reply code %d", ident, code)
		}
		c, err := parseCounts(rest[2])
		if err != nil {
			return Requeued{}, fmt.Errorf("requeue failed pages of job %s: %w", ident, err)
		}
		return Requeued{Pages: replyInt(rest, 0), Seed: replyInt(rest, 1) == 1, Counts: c}, nil
	}
}

// requeueScript requeues the failed pages of the next batch records after
// the token's cursor. The metadata hash keeps rq_token, rq_cursor (last
// page id read), rq_end (the last page id when the token's requeue began:
// pages discovered later are never its business), rq_pages (pages
// requeued) and rq_seed (page 1 was one).
// ARGV: token batch
// Reply: {APPLIED} while records remain, then {REPEAT, pages, seed, counts}.
var requeueScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
local token, batch = ARGV[1], tonumber(ARGV[2])
local rq = redis.call('HMGET', meta, 'rq_token', 'rq_cursor', 'rq_end', 'rq_pages', 'rq_seed')
local cursor, last, pages, seed = 0, tonumber(redis.call('HGET', meta, 'next_id')), 0, 0
if rq[1] == token then
  cursor, last, pages, seed = tonumber(rq[2]), tonumber(rq[3]), tonumber(rq[4]), tonumber(rq[5])
  if cursor >= last then return {REPEAT, pages, seed, counts_reply()} end
end
local stop = math.min(cursor + batch, last)
for id = cursor + 1, stop do
  local p = get(id)
  if p and p.state == DONE and p.status == ST_FAILED then
    tally(p, -1)
    p.state, p.status, p.remaining, p.later = READY, ST_NONE, cfg.max_attempts, 0
    enqueue(p, false)
    tally(p, 1)
    put(p)
    pages = pages + 1
    if id == 1 then seed = 1 end
  end
end
redis.call('HSET', meta, 'rq_token', token, 'rq_cursor', stop, 'rq_end', last, 'rq_pages', pages, 'rq_seed', seed)
finish()
if stop < last then return {APPLIED} end
return {REPEAT, pages, seed, counts_reply()}
`)

// Persist removes the retention TTL from every key of the job's frontier
// (the metadata hash first, so keys scripts create afterwards get none):
// a retried crawl runs on. Expire gives it back when the job ends again.
// It returns ErrNoFrontier when the job has none.
func (f *Frontier) Persist(ctx context.Context, ident string) error {
	if err := checkIdent(ident); err != nil {
		return err
	}
	keys, err := f.JobKeys(ctx, ident)
	if err != nil {
		return fmt.Errorf("persist frontier of job %s: %w", ident, err)
	}
	if len(keys) == 0 {
		return fmt.Errorf("persist frontier of job %s: %w", ident, ErrNoFrontier)
	}
	if err := f.rdb.Persist(ctx, keys[0]).Err(); err != nil {
		return fmt.Errorf("persist frontier of job %s: %w", ident, err)
	}
	for rest := keys[1:]; len(rest) > 0; {
		n := min(len(rest), keyBatch)
		_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range rest[:n] {
				p.Persist(ctx, k)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("persist frontier of job %s: %w", ident, err)
		}
		rest = rest[n:]
	}
	return nil
}
