package frontier

import (
	"context"
	"fmt"
)

// Skip moves a READY or CLAIMED page to SKIPPED (status skipped, reason
// kept as its note): the rules skip a page when it is dequeued. Skipping a
// SKIPPED page is a no-op; a DONE or DEFERRED page gives ErrInvalidState.
// A claim of the page ends: its attempt can no longer complete.
func (f *Frontier) Skip(ctx context.Context, ident string, pageID int64, reason string) error {
	if err := checkIdent(ident); err != nil {
		return err
	}
	if err := checkPageID(ident, pageID); err != nil {
		return err
	}
	v, err := f.run(ctx, skipScript, ident, pageID, truncateNote(reason)).Result()
	if err != nil {
		return fmt.Errorf("skip job %s page %d: %w", ident, pageID, err)
	}
	code, rest, err := replyCode(v)
	if err != nil {
		return fmt.Errorf("skip job %s page %d: %w", ident, pageID, err)
	}
	switch code {
	case retApplied, retRepeat:
		return nil
	case retNoFrontier:
		return fmt.Errorf("skip job %s page %d: %w", ident, pageID, ErrNoFrontier)
	case retUnknownPage:
		return fmt.Errorf("skip job %s page %d: %w", ident, pageID, ErrUnknownPage)
	case retInvalidState:
		return fmt.Errorf("skip job %s page %d: %w: the page is %s (only ready or claimed pages are skipped)",
			ident, pageID, ErrInvalidState, stateName(replyInt(rest, 0)))
	default:
		return fmt.Errorf("skip job %s page %d: unexpected reply code %d", ident, pageID, code)
	}
}

// skipScript skips one page. ARGV: page reason.
var skipScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
local id = tonumber(ARGV[1])
local p = get(id)
if not p then return {UNKNOWN_PAGE} end
if p.state == SKIPPED then return {REPEAT} end
if p.state ~= READY and p.state ~= CLAIMED then return {INVALID_STATE, p.state} end
tally(p, -1)
detach(id)
uncharge_unfetched(p)
if waits_later(p) then redis.call('ZREM', retry, id) end
p.state, p.status = SKIPPED, ST_SKIPPED
set_note(p, ARGV[2])
tally(p, 1)
put(p)
finish()
return {APPLIED}
`)
