package frontier

import (
	"context"
	"fmt"
)

// Later retries (Config.RetryLater, the ArchiveBox plan's retry_at for
// crawl pages): Complete makes a page whose attempts all ended transiently
// wait for its next later retry while a delay is left for it. It stays
// READY (the crawl is not finished, items_queued still counts it) with
// StatusWaiting and fresh attempts, but out of the ready queues: the retry
// sorted set holds it (page id -> due time in ms, Redis' clock) until a
// claim (Claim and ClaimBatch alike, before any host's turn is asked)
// puts it back at the head of its depth's queue, status transient. Its
// count of later retries is the record's fourth byte, so nothing grows
// per page; only waiting pages have a retry entry. Counts.Waiting and
// Counts.RetryAt (the earliest due) come with every count.

// maxFailWaitingBatch is how many waiting pages one FailWaiting script
// call ends.
const maxFailWaitingBatch = 1000

// FailWaiting ends every page waiting for a later retry as DONE failed,
// its note prefixed with prefix (why its later retry will not run, e.g.
// the crawl was aborted): a crawl that stops while pages wait. It returns
// how many pages it failed and the counts after; repeating it fails none.
func (f *Frontier) FailWaiting(ctx context.Context, ident, prefix string) (int, Counts, error) {
	if err := checkIdent(ident); err != nil {
		return 0, Counts{}, err
	}
	total := 0
	for {
		v, err := f.run(ctx, failWaitingScript, ident, truncateNote(prefix), maxFailWaitingBatch).Result()
		if err != nil {
			return total, Counts{}, fmt.Errorf("fail waiting pages of job %s: %w", ident, err)
		}
		code, rest, err := replyCode(v)
		if err != nil {
			return total, Counts{}, fmt.Errorf("fail waiting pages of job %s: %w", ident, err)
		}
		switch code {
		case retApplied:
		case retNoFrontier:
			return total, Counts{}, fmt.Errorf("fail waiting pages of job %s: %w", ident, ErrNoFrontier)
		default:
			return total, Counts{}, fmt.Errorf("fail waiting pages of job %s: unexpected reply code %d", ident, code)
		}
		total += int(replyInt(rest, 0))
		c, err := parseCounts(replyAt(rest, 1))
		if err != nil {
			return total, Counts{}, fmt.Errorf("fail waiting pages of job %s: %w", ident, err)
		}
		if c.Waiting == 0 {
			return total, c, nil
		}
	}
}

// failWaitingScript fails up to batch waiting pages.
// ARGV: prefix batch
// Reply: {APPLIED, failed, counts}.
var failWaitingScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
local prefix = ARGV[1]
local failed = 0
for _, sid in ipairs(redis.call('ZRANGE', retry, 0, tonumber(ARGV[2]) - 1)) do
  redis.call('ZREM', retry, sid)
  local p = get(tonumber(sid))
  if p and waits_later(p) then
    tally(p, -1)
    p.state, p.status, p.remaining = DONE, ST_FAILED, 0
    local note = redis.call('HGET', notes, p.id) or ''
    if note ~= '' then note = prefix .. ': ' .. note else note = prefix end
    set_note(p, string.sub(note, 1, ` + fmt.Sprint(MaxNoteBytes) + `))
    tally(p, 1)
    put(p)
    failed = failed + 1
  end
end
finish()
return {APPLIED, failed, counts_reply()}
`)
