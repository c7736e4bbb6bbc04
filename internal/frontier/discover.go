package frontier

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/luascript"
)

// Link is one link found on a page.
type Link struct {
	URL string
	// NoRecurse: fetch the page once, without following its links (an
	// offsite page). The flags of a page are those of its first discovery.
	NoRecurse bool
	// Requisite: a page requisite (image, stylesheet, ...); recorded on the
	// page for the caller, the frontier treats it as any link.
	Requisite bool
}

// InvalidLink is a link Discover refused; Err wraps ErrInvalidURL.
type InvalidLink struct {
	URL string // as given, cut to 200 bytes
	// Bytes is the link's whole length as given.
	Bytes int
	// Rule is the rule it broke, short: "longer than 8192 bytes" or "not a
	// valid URL" (Err says more).
	Rule string
	Err  error
}

// DiscoverResult counts what one Discover call did.
type DiscoverResult struct {
	// Added: new pages within the depth limit (READY).
	Added int
	// Deferred: new pages beyond the depth limit (DEFERRED).
	Deferred int
	// Known: links to pages the job already had.
	Known int
	// Lowered: known pages whose depth this call's links lowered.
	Lowered int
	// Promoted: DEFERRED pages that entered the depth limit because of this
	// call (directly or through propagation) and became READY.
	Promoted int
	// SelfLinks: links of the page to itself (no relation recorded).
	SelfLinks int
	// Dropped: links of a NoRecurse page (not added).
	Dropped int
	// Duplicates: links repeated within the batch (counted once).
	Duplicates int
	// Repeated: chunks already applied by an earlier call (a retry).
	Repeated int
	// Invalid: links refused (empty, not normalisable, too long).
	Invalid []InvalidLink
}

// Queued is what the call added to QueuedField: Added + Promoted.
func (r DiscoverResult) Queued() int { return r.Added + r.Promoted }

// preparedLink is a link ready for the script: normalised URL, fingerprint
// and flag bits.
type preparedLink struct {
	url, fp string
	flags   int
}

// prepare normalises, validates and de-duplicates links (first occurrence
// wins, order kept).
func prepare(links []Link, res *DiscoverResult) []preparedLink {
	out := make([]preparedLink, 0, len(links))
	seen := make(map[string]struct{}, len(links))
	for _, l := range links {
		u, err := pageURL(l.URL)
		if err != nil {
			shown := l.URL
			if len(shown) > 200 {
				shown = shown[:200]
			}
			rule := "not a valid URL"
			if errors.Is(err, errTooLong) {
				rule = fmt.Sprintf("longer than %d bytes", MaxURLBytes)
			}
			res.Invalid = append(res.Invalid, InvalidLink{URL: shown, Bytes: len(l.URL), Rule: rule, Err: err})
			continue
		}
		if _, dup := seen[u]; dup {
			res.Duplicates++
			continue
		}
		seen[u] = struct{}{}
		flags := 0
		if l.NoRecurse {
			flags |= flagNoRecurse
		}
		if l.Requisite {
			flags |= flagRequisite
		}
		out = append(out, preparedLink{url: u, fp: fingerprint(u), flags: flags})
	}
	return out
}

// Discover records the links found on page parentID by its claim attempt:
// a relation parent → child for each, a new page for each new URL (READY
// within the depth limit, else DEFERRED), and lower depths where the parent
// offers a shorter path, propagated through recorded relations before it
// returns. Links of a NoRecurse page are not added.
//
// Protocol: links are delivered at completion. After an attempt's fetch
// succeeded, its caller delivers the links in batches 0, 1, 2, … (each as
// long as it likes; Discover splits it into script calls of at most
// Options.Chunk links) and then calls Complete(succeeded). A transient or
// failed attempt delivers nothing, so only the attempt that succeeds adds
// pages. Discover is accepted only while the page is CLAIMED by attempt
// (ErrNotClaimed otherwise); repeating a batch already applied (same
// parent, attempt, batch, same links) is a no-op even after Complete; a
// batch that skips one gives ErrOutOfOrder. Invalid links are returned in
// the result, the others are applied.
func (f *Frontier) Discover(ctx context.Context, ident string, parentID int64, attempt, batch int, links []Link) (DiscoverResult, error) {
	ops, result, err := f.DiscoverOps(ctx, ident, parentID, attempt, batch, links)
	if err != nil {
		return result.res, err
	}
	cmds := make([]redis.Cmder, 0, len(ops))
	for _, op := range ops {
		c := op(f.rdb)
		cmds = append(cmds, c)
		if c.Err() != nil {
			break // the chunks after it would be out of order
		}
	}
	return result.Read(ctx, cmds)
}

// Discovery reads the replies of DiscoverOps' ops.
type Discovery struct {
	f              *Frontier
	ident          string
	parent         int64
	attempt, batch int
	res            DiscoverResult
}

// Invalid are the links refused before any was sent (no I/O).
func (d Discovery) Invalid() []InvalidLink { return d.res.Invalid }

// DiscoverOps is Discover as ops of a pipeline (luascript.Pipeline: many
// pages' links in one round trip), one per chunk, in order; result.Read
// reads their commands once the pipeline ran (and settles the depth
// propagation they left, in round trips of its own: rare).
func (f *Frontier) DiscoverOps(ctx context.Context, ident string, parentID int64, attempt, batch int, links []Link) ([]luascript.Op, Discovery, error) {
	d := Discovery{f: f, ident: ident, parent: parentID, attempt: attempt, batch: batch}
	if err := checkIdent(ident); err != nil {
		return nil, d, err
	}
	if err := checkPageID(ident, parentID); err != nil {
		return nil, d, err
	}
	if err := checkAttempt(ident, parentID, attempt); err != nil {
		return nil, d, err
	}
	if batch < 0 || int64(batch) >= math.MaxUint32-1 {
		return nil, d, fmt.Errorf("discover on job %s page %d: batch %d: %w: must be 0..%d", ident, parentID, batch, ErrInvalidArgument, math.MaxUint32-2)
	}
	prepared := prepare(links, &d.res)
	chunks := (len(prepared) + f.opts.Chunk - 1) / f.opts.Chunk
	if chunks == 0 {
		chunks = 1 // an empty batch still takes its place in the sequence
	}
	if chunks > math.MaxUint16 {
		return nil, d, fmt.Errorf("discover on job %s page %d batch %d: %d links: %w: at most %d per batch",
			ident, parentID, batch, len(prepared), ErrInvalidArgument, math.MaxUint16*f.opts.Chunk)
	}
	ops := make([]luascript.Op, chunks)
	for c := range chunks {
		part := prepared[min(c*f.opts.Chunk, len(prepared)):min((c+1)*f.opts.Chunk, len(prepared))]
		args := make([]any, 0, 5+3*len(part))
		last := 0
		if c == chunks-1 {
			last = 1
		}
		args = append(args, parentID, attempt, batch, c, last)
		for _, l := range part {
			args = append(args, l.url, l.fp, l.flags)
		}
		ops[c] = func(cl redis.Cmdable) redis.Cmder { return f.runOn(ctx, cl, discoverScript, ident, args...) }
	}
	return ops, d, nil
}

// Read reads the chunks' commands (in DiscoverOps' order; fewer when the
// caller stopped at an error) and settles what they left to propagate.
func (d Discovery) Read(ctx context.Context, cmds []redis.Cmder) (DiscoverResult, error) {
	res, backlog, err := d.Replies(cmds)
	if err != nil || !backlog {
		return res, err
	}
	promoted, err := d.f.Settle(ctx, d.ident)
	res.Promoted += promoted
	if err != nil {
		return res, fmt.Errorf("discover on job %s page %d: %w", d.ident, d.parent, err)
	}
	return res, nil
}

// Settle propagates the depths discoveries lowered (what DiscoverOps'
// replies left, Replies' backlog; several pages' at once) and returns the
// pages it promoted into the depth limit.
func (f *Frontier) Settle(ctx context.Context, ident string) (int, error) {
	return f.settle(ctx, ident)
}

// Replies is Read without the settling: the chunks' result, and whether
// depths are left to propagate (Settle).
func (d Discovery) Replies(cmds []redis.Cmder) (DiscoverResult, bool, error) {
	res, ident, parentID, attempt, batch := d.res, d.ident, d.parent, d.attempt, d.batch
	backlog := false
	for c, cmd := range cmds {
		v, err := cmd.(*redis.Cmd).Result()
		if err != nil {
			return res, false, fmt.Errorf("discover on job %s page %d attempt %d batch %d chunk %d: %w", ident, parentID, attempt, batch, c, err)
		}
		code, rest, err := replyCode(v)
		if err != nil {
			return res, false, fmt.Errorf("discover on job %s page %d: %w", ident, parentID, err)
		}
		switch code {
		case retApplied:
			res.Added += int(replyInt(rest, 0))
			res.Deferred += int(replyInt(rest, 1))
			res.Known += int(replyInt(rest, 2))
			res.Lowered += int(replyInt(rest, 3))
			res.Promoted += int(replyInt(rest, 4))
			res.SelfLinks += int(replyInt(rest, 5))
			res.Dropped += int(replyInt(rest, 6))
			backlog = replyInt(rest, 7) > 0
		case retRepeat:
			res.Repeated++
			backlog = true // a retry: finish what an interrupted call may have left
		case retNoFrontier:
			return res, false, fmt.Errorf("discover on job %s page %d: %w", ident, parentID, ErrNoFrontier)
		case retUnknownPage:
			return res, false, fmt.Errorf("discover on job %s: parent page %d: %w", ident, parentID, ErrUnknownPage)
		case retNotClaimed:
			return res, false, fmt.Errorf("discover on job %s page %d attempt %d: %w (page is %s at attempt %d)",
				ident, parentID, attempt, ErrNotClaimed, stateName(replyInt(rest, 0)), replyInt(rest, 1))
		case retOutOfOrder:
			return res, false, fmt.Errorf("discover on job %s page %d attempt %d: batch %d chunk %d: %w: expected batch %d chunk %d",
				ident, parentID, attempt, batch, c, ErrOutOfOrder, replyInt(rest, 0), replyInt(rest, 1))
		default:
			return res, false, fmt.Errorf("discover on job %s page %d: unexpected reply code %d", ident, parentID, code)
		}
	}
	if res.Repeated > 0 {
		d.f.log.Debug("discover repeated", zap.String("ident", ident), zap.Int64("page", parentID),
			zap.Int("attempt", attempt), zap.Int("batch", batch), zap.Int("chunks", res.Repeated))
	}
	return res, backlog, nil
}

// discoverScript applies one chunk of a batch of links.
// ARGV: parent attempt batch chunk last(0|1), then url fingerprint flags per link.
// Reply: {code, added, deferred, known, lowered, promoted, self, dropped,
// propagation backlog}.
var discoverScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
local pid, attempt, batch, chunk = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local last = ARGV[5] == '1'
local p = get(pid)
if not p then return {UNKNOWN_PAGE} end
if p.attempts ~= attempt then return {NOT_CLAIMED, p.state, p.attempts} end
-- (links_batch, links_chunk) is the next chunk expected from this attempt
if batch < p.lbatch or (batch == p.lbatch and chunk < p.lchunk) then return {REPEAT} end
if batch > p.lbatch or chunk > p.lchunk then return {OUT_OF_ORDER, p.lbatch, p.lchunk} end
if p.state ~= CLAIMED then return {NOT_CLAIMED, p.state, p.attempts} end
local added, deferred, known, lowered, self, dropped = 0, 0, 0, 0, 0, 0
local n = (#ARGV - 5) / 3
local children = {}
if bit.band(p.flags, F_NORECURSE) ~= 0 then
  dropped = n
else
  for i = 0, n - 1 do
    local url, fp, fl = ARGV[6 + 3 * i], ARGV[7 + 3 * i], tonumber(ARGV[8 + 3 * i])
    local id, fp_free = find(url, fp)
    if not id then
      local c = create(url, fp, fp_free, p.depth + 1, pid, fl)
      if c.state == READY then added = added + 1 else deferred = deferred + 1 end
      children[#children + 1] = struct.pack('>I4', c.id)
    elseif id == pid then
      self = self + 1
    else
      known = known + 1
      local c = get(id)
      if relax(p, c) then lowered = lowered + 1 end
      children[#children + 1] = struct.pack('>I4', id)
    end
  end
end
if #children > 0 then
  local lk = links_p .. bucket(pid)
  local len = redis.call('RPUSH', lk, struct.pack('>I4', p.lastseg) .. table.concat(children))
  if len == 1 then touch(lk) end
  p.lastseg = len
end
if last then p.lbatch, p.lchunk = batch + 1, 0 else p.lchunk = chunk + 1 end
put(p)
finish()
return {APPLIED, added, deferred, known, lowered, promoted, self, dropped, redis.call('LLEN', prop)}
`)

// settle runs propagation calls until the backlog is empty (or
// Options.SettleRounds calls were made: the rest is left to later calls,
// which Counts reports as Propagating). It returns the pages promoted.
func (f *Frontier) settle(ctx context.Context, ident string) (int, error) {
	promoted := 0
	for round := 0; round < f.opts.SettleRounds; round++ {
		v, err := f.run(ctx, settleScript, ident, f.opts.SettleBudget).Result()
		if err != nil {
			return promoted, fmt.Errorf("propagate depths: %w", err)
		}
		code, rest, err := replyCode(v)
		if err != nil {
			return promoted, fmt.Errorf("propagate depths: %w", err)
		}
		if code == retNoFrontier {
			return promoted, fmt.Errorf("propagate depths: %w", ErrNoFrontier)
		}
		promoted += int(replyInt(rest, 0))
		if replyInt(rest, 1) == 0 {
			return promoted, nil
		}
	}
	return promoted, nil
}

// settleScript applies up to ARGV[1] relations of the propagation backlog.
// Reply: {code, promoted, backlog left}.
var settleScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
if redis.call('LLEN', prop) == 0 then return {REPEAT, 0, 0} end
settle(tonumber(ARGV[1]))
finish()
return {APPLIED, promoted, redis.call('LLEN', prop)}
`)

// Refused returns the links Discover would refuse (InvalidLink), without
// I/O: what a caller reports before it sends them.
func Refused(links []Link) []InvalidLink {
	var res DiscoverResult
	prepare(links, &res)
	return res.Invalid
}
