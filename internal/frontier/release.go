package frontier

import (
	"context"
	"fmt"
)

// Release returns every page token still holds from CLAIMED to READY
// (front of its depth's queue) without spending an attempt: a run that
// stops before running the pages it claimed. A late Complete of such an
// attempt is refused (the next claim is a new attempt). It returns how
// many pages moved and the counts after; repeating it moves none.
func (f *Frontier) Release(ctx context.Context, ident, token string) (int, Counts, error) {
	if err := checkIdent(ident); err != nil {
		return 0, Counts{}, err
	}
	if token == "" {
		return 0, Counts{}, fmt.Errorf("release on job %s: token: %w: must not be empty", ident, ErrInvalidArgument)
	}
	return f.release(ctx, ident, "release token "+token, token, nil)
}

// ReleasePages is Release for the given pages, whoever claimed them; pages
// not CLAIMED are left alone. Ids are processed MaxChunk per script call.
func (f *Frontier) ReleasePages(ctx context.Context, ident string, ids []int64) (int, Counts, error) {
	if err := checkIdent(ident); err != nil {
		return 0, Counts{}, err
	}
	for _, id := range ids {
		if err := checkPageID(ident, id); err != nil {
			return 0, Counts{}, err
		}
	}
	total := 0
	var counts Counts
	for first := true; first || len(ids) > 0; first = false {
		part := ids[:min(len(ids), MaxChunk)]
		n, c, err := f.release(ctx, ident, "release pages", "", part)
		total += n
		if err != nil {
			return total, c, err
		}
		counts = c
		ids = ids[len(part):]
	}
	return total, counts, nil
}

func (f *Frontier) release(ctx context.Context, ident, what, token string, ids []int64) (int, Counts, error) {
	args := make([]any, 0, 1+len(ids))
	args = append(args, token)
	for _, id := range ids {
		args = append(args, id)
	}
	v, err := f.run(ctx, releaseScript, ident, args...).Result()
	if err != nil {
		return 0, Counts{}, fmt.Errorf("%s on job %s: %w", what, ident, err)
	}
	code, rest, err := replyCode(v)
	if err != nil {
		return 0, Counts{}, fmt.Errorf("%s on job %s: %w", what, ident, err)
	}
	switch code {
	case retApplied:
	case retNoFrontier:
		return 0, Counts{}, fmt.Errorf("%s on job %s: %w", what, ident, ErrNoFrontier)
	default:
		return 0, Counts{}, fmt.Errorf("%s on job %s: unexpected reply code %d", what, ident, code)
	}
	c, err := parseCounts(rest[1])
	if err != nil {
		return 0, Counts{}, fmt.Errorf("%s on job %s: %w", what, ident, err)
	}
	return int(replyInt(rest, 0)), c, nil
}

// releaseScript moves claimed pages back to READY.
// ARGV: token (” = the pages given), page ids...
// Reply: {code, released, counts}.
var releaseScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
local token = ARGV[1]
local ids = {}
if token ~= '' then
  local held = redis.call('HGET', claims, 't:' .. token) or ''
  for off = 1, #held, 4 do ids[#ids + 1] = struct.unpack('>I4', held, off) end
else
  for i = 2, #ARGV do ids[#ids + 1] = tonumber(ARGV[i]) end
end
local released = 0
for _, id in ipairs(ids) do
  local p = get(id)
  if p and p.state == CLAIMED and (token == '' or redis.call('HGET', claims, 'p:' .. id) == token) then
    tally(p, -1)
    detach(id)
    uncharge_unfetched(p)
    p.state = READY
    enqueue(p, true)
    tally(p, 1)
    put(p)
    released = released + 1
  end
end
finish()
return {APPLIED, released, counts_reply()}
`)
