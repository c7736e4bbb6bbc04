package frontier

import (
	"context"
	"fmt"
)

// Outcome is how a claimed attempt ended.
type Outcome struct {
	// Status: StatusSucceeded or StatusFailed end the page (DONE);
	// StatusTransient spends one attempt and makes the page READY again
	// while attempts remain, else DONE failed.
	Status Status
	// Note (error message, …) is kept with the page, cut to MaxNoteBytes.
	Note string
}

var completeCodes = map[Status]int{StatusSucceeded: statusSucceeded, StatusFailed: statusFailed, StatusTransient: statusTransient}

// Complete records the outcome of attempt on page pageID and returns the
// counts after it. Repeating it for the same (page, attempt) is a no-op
// (the first outcome stands). A page not CLAIMED by that attempt gives
// ErrNotClaimed.
func (f *Frontier) Complete(ctx context.Context, ident string, pageID int64, attempt int, o Outcome) (Counts, error) {
	if err := checkIdent(ident); err != nil {
		return Counts{}, err
	}
	if err := checkPageID(ident, pageID); err != nil {
		return Counts{}, err
	}
	if err := checkAttempt(ident, pageID, attempt); err != nil {
		return Counts{}, err
	}
	code, ok := completeCodes[o.Status]
	if !ok {
		return Counts{}, fmt.Errorf("complete job %s page %d: status %q: %w: must be succeeded, failed or transient", ident, pageID, o.Status, ErrInvalidArgument)
	}
	v, err := f.run(ctx, completeScript, ident, pageID, attempt, code, truncateNote(o.Note)).Result()
	if err != nil {
		return Counts{}, fmt.Errorf("complete job %s page %d attempt %d: %w", ident, pageID, attempt, err)
	}
	rc, rest, err := replyCode(v)
	if err != nil {
		return Counts{}, fmt.Errorf("complete job %s page %d: %w", ident, pageID, err)
	}
	switch rc {
	case retApplied, retRepeat:
		c, err := parseCounts(rest[0])
		if err != nil {
			return Counts{}, fmt.Errorf("complete job %s page %d: %w", ident, pageID, err)
		}
		return c, nil
	case retNoFrontier:
		return Counts{}, fmt.Errorf("complete job %s page %d: %w", ident, pageID, ErrNoFrontier)
	case retUnknownPage:
		return Counts{}, fmt.Errorf("complete job %s page %d: %w", ident, pageID, ErrUnknownPage)
	case retNotClaimed:
		return Counts{}, fmt.Errorf("complete job %s page %d attempt %d as %s: %w (page is %s at attempt %d)",
			ident, pageID, attempt, o.Status, ErrNotClaimed, stateName(replyInt(rest, 0)), replyInt(rest, 1))
	default:
		return Counts{}, fmt.Errorf("complete job %s page %d: unexpected reply code %d", ident, pageID, rc)
	}
}

// completeScript ends one attempt.
// ARGV: page attempt status_code note
// Reply: {code, counts} or {NOT_CLAIMED, state, attempts}.
var completeScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
local id, attempt, status, note = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local p = get(id)
if not p then return {UNKNOWN_PAGE} end
if p.done_attempt == attempt then return {REPEAT, counts_reply()} end
if p.state ~= CLAIMED or p.attempts ~= attempt then return {NOT_CLAIMED, p.state, p.attempts} end
tally(p, -1)
detach(id)
p.done_attempt = attempt
p.status = status
if status == ST_TRANSIENT then
  if p.remaining > 0 then p.remaining = p.remaining - 1 end
  if p.remaining > 0 then
    p.state = READY
    enqueue(p, false)
  else
    p.state, p.status = DONE, ST_FAILED
  end
else
  p.state, p.remaining = DONE, 0
end
set_note(p, note)
tally(p, 1)
put(p)
finish()
return {APPLIED, counts_reply()}
`)
