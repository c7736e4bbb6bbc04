package frontier

import (
	"context"
	"fmt"
	"strconv"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Seed creates the job's frontier with url as page 1 (depth 0, READY) and
// returns that page. Repeating it with the same URL and configuration is a
// no-op; a frontier seeded differently gives ErrSeedConflict. With
// cfg.QueuedField set, the job hash must exist (rkeys.ErrJobNotFound
// otherwise) and the seed counts as the first queued item.
func (f *Frontier) Seed(ctx context.Context, ident, url string, cfg Config) (Page, error) {
	if err := checkIdent(ident); err != nil {
		return Page{}, err
	}
	if err := cfg.validate(); err != nil {
		return Page{}, fmt.Errorf("seed frontier of job %s: %w", ident, err)
	}
	u, err := pageURL(url)
	if err != nil {
		return Page{}, fmt.Errorf("seed frontier of job %s: %w", ident, err)
	}
	v, err := f.run(ctx, seedScript, ident, u, fingerprint(u),
		strconv.Itoa(cfg.MaxDepth), strconv.Itoa(cfg.MaxAttempts), cfg.QueuedField, cfg.retryLaterArg()).Result()
	if err != nil {
		return Page{}, fmt.Errorf("seed frontier of job %s: %w", ident, err)
	}
	code, rest, err := replyCode(v)
	if err != nil {
		return Page{}, fmt.Errorf("seed frontier of job %s: %w", ident, err)
	}
	switch code {
	case retApplied:
		f.log.Info("frontier seeded", zap.String("ident", ident), zap.String("url", u),
			zap.Int("max_depth", cfg.MaxDepth), zap.Int("max_attempts", cfg.MaxAttempts))
	case retRepeat:
		f.log.Debug("frontier seed repeated", zap.String("ident", ident))
	default:
		return Page{}, seedError(ident, u, cfg, code, rest)
	}
	return f.PageByID(ctx, ident, 1)
}

// seedError is the error of a seed script's reply code other than
// APPLIED and REPEAT; seed is what the caller seeds with.
func seedError(ident, seed string, cfg Config, code int64, rest []any) error {
	switch code {
	case retConflict:
		return fmt.Errorf("seed frontier of job %s with %s (max depth %d, max attempts %d, queued field %q): %w: seeded with %v (max depth %v, max attempts %v, queued field %q)",
			ident, seed, cfg.MaxDepth, cfg.MaxAttempts, cfg.QueuedField, ErrSeedConflict, rest[0], rest[1], rest[2], rest[3])
	case retNoJob:
		return fmt.Errorf("seed frontier of job %s: counter field %s: %w (the job hash must exist before its frontier)", ident, cfg.QueuedField, rkeys.ErrJobNotFound)
	case retLeftover:
		return fmt.Errorf("seed frontier of job %s: %w: Delete it first", ident, ErrLeftoverKeys)
	case retNoFrontier:
		return fmt.Errorf("seed frontier of job %s: %w: a Delete is in progress", ident, ErrNoFrontier)
	}
	return fmt.Errorf("seed frontier of job %s: unexpected reply code %d", ident, code)
}

// seedScript creates the metadata hash and page 1.
// ARGV: url fingerprint max_depth max_attempts queued_field retry_later
var seedScript = newScript(`
local url, fp = ARGV[1], ARGV[2]
local cur = redis.call('HMGET', meta, 'seed', 'max_depth', 'max_attempts', 'queued_field', 'deleting', 'retry_later')
if cur[1] then
  if cur[5] then return {NO_FRONTIER} end
  if cur[1] == url and cur[2] == ARGV[3] and cur[3] == ARGV[4] and (cur[4] or '') == ARGV[5] and (cur[6] or '') == ARGV[6] then return {REPEAT} end
  return {CONFLICT, cur[1], cur[2], cur[3], cur[4] or ''}
end
if redis.call('EXISTS', urls_p .. '0', pages_p .. '0', fp_p .. '0') > 0 then return {LEFTOVER} end
if ARGV[5] ~= '' and redis.call('EXISTS', job) == 0 then return {NO_JOB} end
redis.call('HSET', meta, 'seed', url, 'max_depth', ARGV[3], 'max_attempts', ARGV[4], 'queued_field', ARGV[5],
  'next_id', 0, 'lh_level', 0, 'lh_split', 0, 'lh_n', 0, 'format', 1)
if ARGV[6] ~= '' then redis.call('HSET', meta, 'retry_later', ARGV[6]) end
load_meta()
create(url, fp, true, 0, 0, 0)
finish()
return {APPLIED}
`)

// SeedListResult counts what SeedList did.
type SeedListResult struct {
	// Added: new start pages (depth 0, READY).
	Added int
	// Known: URLs the frontier had already (a repeated call, or a URL
	// given twice): no second page.
	Known int
	// Invalid: URLs refused (empty, not normalisable, too long).
	Invalid []InvalidLink
}

// SeedList creates the job's frontier from a list of start URLs, each a
// page at depth 0 (READY), in order, one script call per Options.Chunk
// URLs. list names the list (the frontier's seed, e.g. the list's URL). A
// URL the frontier has already is not added again, so repeating the call
// (or a part of it) is a no-op; a frontier seeded from another list or
// configuration gives ErrSeedConflict. With cfg.QueuedField set, the job
// hash must exist and every new page counts as a queued item. Every call
// but the last marks the frontier's list partial and the last clears it,
// each in the same script call as its URLs: a SeedList that did not end
// (Redis gone, the worker dead between calls) leaves Counts.ListPartial
// set until a SeedList of the list runs to its end (a crawl's retry).
func (f *Frontier) SeedList(ctx context.Context, ident, list string, urls []string, cfg Config) (SeedListResult, error) {
	var res SeedListResult
	if err := checkIdent(ident); err != nil {
		return res, err
	}
	if err := cfg.validate(); err != nil {
		return res, fmt.Errorf("seed frontier of job %s: %w", ident, err)
	}
	if list == "" {
		return res, fmt.Errorf("seed frontier of job %s: list: %w: must name the list", ident, ErrInvalidArgument)
	}
	var dr DiscoverResult
	ls := make([]Link, len(urls))
	for i, u := range urls {
		ls[i] = Link{URL: u}
	}
	prepared := prepare(ls, &dr)
	res.Invalid, res.Known = dr.Invalid, dr.Duplicates
	if len(prepared) == 0 {
		return res, fmt.Errorf("seed frontier of job %s from %s: %w: no valid URL", ident, list, ErrInvalidArgument)
	}
	for c := 0; c*f.opts.Chunk < len(prepared); c++ {
		part := prepared[c*f.opts.Chunk : min((c+1)*f.opts.Chunk, len(prepared))]
		partial := ""
		if (c+1)*f.opts.Chunk < len(prepared) {
			partial = "1"
		}
		args := make([]any, 0, 6+2*len(part))
		args = append(args, list, strconv.Itoa(cfg.MaxDepth), strconv.Itoa(cfg.MaxAttempts), cfg.QueuedField, cfg.retryLaterArg(), partial)
		for _, l := range part {
			args = append(args, l.url, l.fp)
		}
		v, err := f.run(ctx, seedListScript, ident, args...).Result()
		if err != nil {
			return res, fmt.Errorf("seed frontier of job %s from %s (chunk %d): %w", ident, list, c, err)
		}
		code, rest, err := replyCode(v)
		if err != nil {
			return res, fmt.Errorf("seed frontier of job %s from %s: %w", ident, list, err)
		}
		if code != retApplied {
			return res, seedError(ident, "list "+list, cfg, code, rest)
		}
		res.Added += int(replyInt(rest, 0))
		res.Known += int(replyInt(rest, 1))
	}
	f.log.Info("frontier seeded from a list", zap.String("ident", ident), zap.String("list", list),
		zap.Int("added", res.Added), zap.Int("known", res.Known), zap.Int("invalid", len(res.Invalid)))
	return res, nil
}

// seedListScript creates the metadata hash (first call) and a depth-0
// page for every URL the frontier does not have yet; partial ('1': more
// calls follow) sets list_partial, its absence clears it.
// ARGV: list max_depth max_attempts queued_field retry_later partial, then url fingerprint per URL.
// Reply: {code, added, known}.
var seedListScript = newScript(`
local cur = redis.call('HMGET', meta, 'seed', 'max_depth', 'max_attempts', 'queued_field', 'deleting', 'retry_later')
if cur[1] then
  if cur[5] then return {NO_FRONTIER} end
  if not (cur[1] == ARGV[1] and cur[2] == ARGV[2] and cur[3] == ARGV[3] and (cur[4] or '') == ARGV[4] and (cur[6] or '') == ARGV[5]) then
    return {CONFLICT, cur[1], cur[2], cur[3], cur[4] or ''}
  end
else
  if redis.call('EXISTS', urls_p .. '0', pages_p .. '0', fp_p .. '0') > 0 then return {LEFTOVER} end
  if ARGV[4] ~= '' and redis.call('EXISTS', job) == 0 then return {NO_JOB} end
  redis.call('HSET', meta, 'seed', ARGV[1], 'max_depth', ARGV[2], 'max_attempts', ARGV[3], 'queued_field', ARGV[4],
    'next_id', 0, 'lh_level', 0, 'lh_split', 0, 'lh_n', 0, 'format', 1)
  if ARGV[5] ~= '' then redis.call('HSET', meta, 'retry_later', ARGV[5]) end
end
if not load_meta() then return {NO_FRONTIER} end
local added, known = 0, 0
for i = 7, #ARGV, 2 do
  local id, free = find(ARGV[i], ARGV[i + 1])
  if id then
    known = known + 1
  else
    create(ARGV[i], ARGV[i + 1], free, 0, 0, 0)
    added = added + 1
  end
end
if ARGV[6] == '1' then redis.call('HSET', meta, 'list_partial', 1) else redis.call('HDEL', meta, 'list_partial') end
finish()
return {APPLIED, added, known}
`)
