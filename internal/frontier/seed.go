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
		strconv.Itoa(cfg.MaxDepth), strconv.Itoa(cfg.MaxAttempts), cfg.QueuedField).Result()
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
	case retConflict:
		return Page{}, fmt.Errorf("seed frontier of job %s with %s (max depth %d, max attempts %d, queued field %q): %w: seeded with %v (max depth %v, max attempts %v, queued field %q)",
			ident, u, cfg.MaxDepth, cfg.MaxAttempts, cfg.QueuedField, ErrSeedConflict, rest[0], rest[1], rest[2], rest[3])
	case retNoJob:
		return Page{}, fmt.Errorf("seed frontier of job %s: counter field %s: %w (the job hash must exist before its frontier)", ident, cfg.QueuedField, rkeys.ErrJobNotFound)
	case retLeftover:
		return Page{}, fmt.Errorf("seed frontier of job %s: %w: Delete it first", ident, ErrLeftoverKeys)
	case retNoFrontier:
		return Page{}, fmt.Errorf("seed frontier of job %s: %w: a Delete is in progress", ident, ErrNoFrontier)
	default:
		return Page{}, fmt.Errorf("seed frontier of job %s: unexpected reply code %d", ident, code)
	}
	return f.PageByID(ctx, ident, 1)
}

// seedScript creates the metadata hash and page 1.
// ARGV: url fingerprint max_depth max_attempts queued_field
var seedScript = newScript(`
local url, fp = ARGV[1], ARGV[2]
local cur = redis.call('HMGET', meta, 'seed', 'max_depth', 'max_attempts', 'queued_field', 'deleting')
if cur[1] then
  if cur[5] then return {NO_FRONTIER} end
  if cur[1] == url and cur[2] == ARGV[3] and cur[3] == ARGV[4] and (cur[4] or '') == ARGV[5] then return {REPEAT} end
  return {CONFLICT, cur[1], cur[2], cur[3], cur[4] or ''}
end
if redis.call('EXISTS', urls_p .. '0', pages_p .. '0', fp_p .. '0') > 0 then return {LEFTOVER} end
if ARGV[5] ~= '' and redis.call('EXISTS', job) == 0 then return {NO_JOB} end
redis.call('HSET', meta, 'seed', url, 'max_depth', ARGV[3], 'max_attempts', ARGV[4], 'queued_field', ARGV[5],
  'next_id', 0, 'lh_level', 0, 'lh_split', 0, 'lh_n', 0, 'format', 1)
load_meta()
create(url, fp, true, 0, 0, 0)
finish()
return {APPLIED}
`)
