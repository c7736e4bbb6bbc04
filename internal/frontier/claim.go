package frontier

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/hostbudget"
)

// Claim moves up to n READY pages to CLAIMED for token, lowest depth
// first, then queue order (discovery order; a page retried after a
// transient failure goes to the back of its depth, a released page to the
// front). Each claimed page gets a new attempt number (Attempts + 1) and
// rulesVersion, the version of the job's rules its caller applies. It
// returns the pages and the counts after the claim.
//
// token names this claim request (e.g. the activity's id): a Claim repeated
// with a token that still holds pages returns those pages again and claims
// nothing new, so a retried activity never strands pages. Use a fresh token
// per request. Release(token) returns a token's pages to READY.
//
// Before claiming, Claim applies a bounded part of any propagation backlog
// (left by a Discover that was interrupted), which may promote pages, and
// puts postponed pages whose time has come back at the head of their
// depth's queue. With Options.HostBudget, a page whose host has no turn
// now stays READY, so a busy host's pages hold no claim while other
// hosts' pages wait: a host backed off or within its delay postpones
// the page until its turn; a host at its concurrency (counting the pages
// this claim took) leaves it where it was in its queue. A call passes
// over at most n+maxPassed pages.
func (f *Frontier) Claim(ctx context.Context, ident string, n int, token string, rulesVersion int64) ([]Page, Counts, error) {
	return f.ClaimWithin(ctx, ident, n, token, rulesVersion, 0)
}

// ClaimWithin is Claim under a page budget: at most budget pages of the
// job are ever charged (0 = no budget). A page is charged when it is
// first claimed as a page (a requisite never is) and stays charged once an
// attempt of it completed; a page released or skipped before any attempt
// completed is uncharged (it was not fetched). Counts.Charged is the
// number charged. The check and the charge are one script, so claims
// running at once never charge more than budget pages in all: once the
// budget is used up, only charged pages READY again (a transient failure
// with attempts left, a release after a completed attempt, a retry's
// requeue) are claimed, and new pages stay READY for a later run.
func (f *Frontier) ClaimWithin(ctx context.Context, ident string, n int, token string, rulesVersion, budget int64) ([]Page, Counts, error) {
	return f.claim(ctx, ident, n, token, rulesVersion, budget, f.opts.HostBudget)
}

// ClaimBatch is ClaimWithin for a page batch: pages are claimed in line
// whatever their host's turn (Options.HostBudget is not consulted). A
// batch runs its pages over a while and each fetch takes its host's turn
// then (internal/hostbudget); a claim capped by the hosts' turns of this
// instant would give a one-host crawl's batch a page or two.
func (f *Frontier) ClaimBatch(ctx context.Context, ident string, n int, token string, rulesVersion, budget int64) ([]Page, Counts, error) {
	return f.claim(ctx, ident, n, token, rulesVersion, budget, "")
}

func (f *Frontier) claim(ctx context.Context, ident string, n int, token string, rulesVersion, budget int64, hostBudget string) ([]Page, Counts, error) {
	if err := checkIdent(ident); err != nil {
		return nil, Counts{}, err
	}
	switch {
	case n < 1 || n > MaxClaim:
		return nil, Counts{}, fmt.Errorf("claim on job %s: n %d: %w: must be 1..%d", ident, n, ErrInvalidArgument, MaxClaim)
	case token == "":
		return nil, Counts{}, fmt.Errorf("claim on job %s: token: %w: must not be empty", ident, ErrInvalidArgument)
	case len(token) > 256:
		return nil, Counts{}, fmt.Errorf("claim on job %s: token of %d bytes: %w: at most 256", ident, len(token), ErrInvalidArgument)
	case rulesVersion < 0 || rulesVersion > maxRulesVersion:
		return nil, Counts{}, fmt.Errorf("claim on job %s: rules version %d: %w: must be 0..%d", ident, rulesVersion, ErrInvalidArgument, int64(maxRulesVersion))
	case budget < 0:
		return nil, Counts{}, fmt.Errorf("claim on job %s: page budget %d: %w: must be >= 0 (0 = none)", ident, budget, ErrInvalidArgument)
	}
	v, err := f.run(ctx, claimScript, ident, n, token, rulesVersion, f.opts.SettleBudget, budget, hostBudget, f.opts.HostConcurrency).Result()
	if err != nil {
		return nil, Counts{}, fmt.Errorf("claim on job %s: %w", ident, err)
	}
	code, rest, err := replyCode(v)
	if err != nil {
		return nil, Counts{}, fmt.Errorf("claim on job %s: %w", ident, err)
	}
	switch code {
	case retApplied, retRepeat:
	case retNoFrontier:
		return nil, Counts{}, fmt.Errorf("claim on job %s: %w", ident, ErrNoFrontier)
	default:
		return nil, Counts{}, fmt.Errorf("claim on job %s: unexpected reply code %d", ident, code)
	}
	if len(rest) != 2 {
		return nil, Counts{}, fmt.Errorf("claim on job %s: reply of %d parts", ident, len(rest))
	}
	counts, err := parseCounts(rest[0])
	if err != nil {
		return nil, Counts{}, fmt.Errorf("claim on job %s: %w", ident, err)
	}
	raw, _ := rest[1].([]any)
	pages := make([]Page, 0, len(raw))
	for _, r := range raw {
		p, err := parsePage(r)
		if err != nil {
			return nil, Counts{}, fmt.Errorf("claim on job %s: %w", ident, err)
		}
		p.Claimer = token
		pages = append(pages, p)
	}
	if code == retRepeat {
		f.log.Debug("claim repeated", zap.String("ident", ident), zap.String("token", token), zap.Int("pages", len(pages)))
	}
	return pages, counts, nil
}

// maxPassed bounds the pages one Claim of n passes over (n+maxPassed):
// the cost of a claim while the first pages in line are of busy hosts.
const maxPassed = 100

// claimScript claims pages for a token.
// ARGV: n token rules_version settle_budget page_budget host_prefix host_concurrency
// Reply: {code, counts, {page...}}.
var claimScript = newScript(hostbudget.LuaHostWait + fmt.Sprintf("local MAX_PASSED = %d\n", maxPassed) + `
if not load_meta() then return {NO_FRONTIER} end
local n, token, rules, budget = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[5])
local out = {}
local held = redis.call('HGET', claims, 't:' .. token)
if held then
  for off = 1, #held, 4 do
    local p = get((struct.unpack('>I4', held, off)))
    if p and p.state == CLAIMED then out[#out + 1] = page_reply(p) end
  end
  return {REPEAT, counts_reply(), out}
end
if redis.call('LLEN', prop) > 0 then settle(tonumber(ARGV[4])) end
local now = now_ms()
promote_due(now, 1000)
local hprefix, hconc = ARGV[6], tonumber(ARGV[7])
local planned, postponed, busy = {}, 0, {}
local spent = tonumber(redis.call('HGET', meta, 'charged') or '0')
local function full() return budget > 0 and spent >= budget end
local ids = {}
-- passed reports whether p's host cannot take it now (the host budget,
-- internal/hostbudget): a busy host's page goes back to the head of its
-- queue after the claim, a host waiting out its delay or a backoff
-- postpones it.
local function passed(p)
  if hprefix == '' then return false, nil end
  local h = host_of(url_of(p.id))
  if not h then return false, nil end
  local wait = host_wait(hprefix, h, now, planned[h] or 0, hconc)
  if wait == 0 then return false, h end
  if wait < 0 then busy[#busy + 1] = p else postpone(p, now + wait) end
  postponed = postponed + 1
  return true, h
end
local function take(p, h)
  if h then planned[h] = (planned[h] or 0) + 1 end
  tally(p, -1)
  if p.attempts >= 65535 then
    -- the attempt counter is exhausted (65535 claims): give up on the page
    p.state, p.status, p.remaining = DONE, ST_FAILED, 0
    set_note(p, 'attempt counter exhausted after 65535 claims')
    tally(p, 1)
    put(p)
    return
  end
  if charge(p) then spent = spent + 1 end
  p.state = CLAIMED
  p.attempts = p.attempts + 1
  p.rules = rules
  p.lbatch, p.lchunk = 0, 0
  tally(p, 1)
  put(p)
  redis.call('HSET', claims, 'p:' .. p.id, token)
  ids[#ids + 1] = struct.pack('>I4', p.id)
  out[#out + 1] = page_reply(p)
end
local pops, max_pops = 0, 4 * n + 1000
while #ids < n and pops < max_pops and postponed < n + MAX_PASSED do
  local p
  if full() then
    -- the budget is spent: only charged pages READY again are claimed
    local id = redis.call('LPOP', again)
    pops = pops + 1
    if not id then break end
    p = get(tonumber(id))
    if not (p and p.state == READY and charged(p)) then p = nil end
  else
    local top = redis.call('ZRANGE', readyz, 0, 0)
    if #top == 0 then break end
    local q = ready_p .. top[1]
    local id = redis.call('LPOP', q)
    pops = pops + 1
    if redis.call('EXISTS', q) == 0 then redis.call('ZREM', readyz, top[1]) end
    if id then
      p = get(tonumber(id))
      if not (p and p.state == READY and p.depth == tonumber(top[1])) then p = nil end
    end
  end
  if p then
    local skip, h = passed(p)
    if not skip then take(p, h) end
  end
end
for i = #busy, 1, -1 do enqueue(busy[i], true) end
if #ids > 0 then
  redis.call('HSET', claims, 't:' .. token, table.concat(ids))
  touch(claims)
end
finish()
return {APPLIED, counts_reply(), out}
`)
