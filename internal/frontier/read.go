package frontier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// StateCounts counts pages per state; Succeeded + Failed = Done.
type StateCounts struct {
	Ready     int64 `json:"ready"`
	Claimed   int64 `json:"claimed"`
	Skipped   int64 `json:"skipped"`
	Done      int64 `json:"done"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Deferred  int64 `json:"deferred"`
}

// DepthCounts are the counts of one depth.
type DepthCounts struct {
	Depth int `json:"depth"`
	StateCounts
}

// Counts are a frontier's page counts.
type Counts struct {
	StateCounts
	// Total is the number of pages (discovered URLs).
	Total int64 `json:"total"`
	// Propagating is the backlog of depth propagation not yet applied
	// (non-zero only while a Discover runs or after one was interrupted);
	// it may still promote DEFERRED pages.
	Propagating int64 `json:"propagating"`
	// ByDepth lists the depths that have pages, lowest first.
	ByDepth []DepthCounts `json:"by_depth"`
	// MaxDepth is the crawl's depth limit (Config.MaxDepth): -1 = none.
	MaxDepth int `json:"max_depth"`
	// Charged is the pages charged to a page budget (ClaimWithin): pages
	// claimed as pages, not requisites, less those given back unfetched.
	Charged int64 `json:"charged"`
	// Waiting is the READY pages waiting for a later retry
	// (StatusWaiting, Config.RetryLater), RetryAt when the first of them
	// is due (Redis' clock; zero when none waits).
	Waiting int64     `json:"waiting,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	// ListPartial: the frontier was seeded from a list (SeedList) whose
	// seeding did not run to its end, so some of the list's URLs may be
	// missing; a SeedList of the list that ends clears it.
	ListPartial bool `json:"list_partial,omitempty"`
}

// Finished reports that no page is READY or CLAIMED and no propagation is
// pending: the crawl is over (DEFERRED pages are then out of depth).
func (c Counts) Finished() bool { return c.Ready == 0 && c.Claimed == 0 && c.Propagating == 0 }

// Draining reports that no page is READY but some are CLAIMED.
func (c Counts) Draining() bool { return c.Ready == 0 && c.Claimed > 0 }

// Counts returns the job's page counts.
func (f *Frontier) Counts(ctx context.Context, ident string) (Counts, error) {
	if err := checkIdent(ident); err != nil {
		return Counts{}, err
	}
	var meta *redis.MapStringStringCmd
	var prop, waiting *redis.IntCmd
	var first *redis.ZSliceCmd
	_, err := f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, f.key(ident, "meta"))
		prop = p.LLen(ctx, f.key(ident, "prop"))
		waiting = p.ZCard(ctx, f.key(ident, "retry"))
		first = p.ZRangeWithScores(ctx, f.key(ident, "retry"), 0, 0)
		return nil
	})
	if err != nil {
		return Counts{}, fmt.Errorf("counts of job %s: %w", ident, err)
	}
	if len(meta.Val()) == 0 {
		return Counts{}, fmt.Errorf("counts of job %s: %w", ident, ErrNoFrontier)
	}
	c, err := countsFromFields(meta.Val(), prop.Val())
	if err != nil {
		return Counts{}, fmt.Errorf("counts of job %s: %w", ident, err)
	}
	c.Waiting = waiting.Val()
	if z := first.Val(); len(z) > 0 {
		c.RetryAt = time.UnixMilli(int64(z[0].Score))
	}
	return c, nil
}

// PageByID returns one page (ErrUnknownPage when the job has no such page).
func (f *Frontier) PageByID(ctx context.Context, ident string, id int64) (Page, error) {
	if err := checkIdent(ident); err != nil {
		return Page{}, err
	}
	if err := checkPageID(ident, id); err != nil {
		return Page{}, err
	}
	return f.readPage(ctx, ident, fmt.Sprintf("page %d", id), "id", strconv.FormatInt(id, 10), "")
}

// Page returns the page of url (normalised first; ErrUnknownPage when the
// job has no page for it).
func (f *Frontier) Page(ctx context.Context, ident, url string) (Page, error) {
	if err := checkIdent(ident); err != nil {
		return Page{}, err
	}
	u, err := pageURL(url)
	if err != nil {
		return Page{}, fmt.Errorf("page of job %s: %w", ident, err)
	}
	return f.readPage(ctx, ident, "page "+u, "url", u, fingerprint(u))
}

func (f *Frontier) readPage(ctx context.Context, ident, what string, args ...any) (Page, error) {
	v, err := f.run(ctx, pageScript, ident, args...).Result()
	if err != nil {
		return Page{}, fmt.Errorf("%s of job %s: %w", what, ident, err)
	}
	code, rest, err := replyCode(v)
	if err != nil {
		return Page{}, fmt.Errorf("%s of job %s: %w", what, ident, err)
	}
	switch code {
	case retApplied:
	case retNoFrontier:
		return Page{}, fmt.Errorf("%s of job %s: %w", what, ident, ErrNoFrontier)
	case retUnknownPage:
		return Page{}, fmt.Errorf("%s of job %s: %w", what, ident, ErrUnknownPage)
	default:
		return Page{}, fmt.Errorf("%s of job %s: unexpected reply code %d", what, ident, code)
	}
	p, err := parsePage(rest[0])
	if err != nil {
		return Page{}, fmt.Errorf("%s of job %s: %w", what, ident, err)
	}
	p.Note, _ = rest[1].(string)
	p.Claimer, _ = rest[2].(string)
	if due, _ := rest[3].(string); due != "" {
		p.RetryAt, err = parseMillis(due)
		if err != nil {
			return Page{}, fmt.Errorf("%s of job %s: retry at: %w", what, ident, err)
		}
	}
	return p, nil
}

// pageScript reads one page by id or URL (read-only).
// ARGV: 'id' ID | 'url' URL fingerprint
// Reply: {code, page, note, claimer, due} (due: a waiting page's due ms, else empty).
var pageScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
local id
if ARGV[1] == 'id' then id = tonumber(ARGV[2]) else id = find(ARGV[2], ARGV[3]) end
local p = id and get(id)
if not p then return {UNKNOWN_PAGE} end
local due = ''
if waits_later(p) then due = redis.call('ZSCORE', retry, id) or '' end
return {APPLIED, page_reply(p), redis.call('HGET', notes, id) or '', redis.call('HGET', claims, 'p:' .. id) or '', due}
`)

// Filter selects pages; the zero value selects all.
type Filter struct {
	State  State  // "" = any
	Status Status // "" = any (StatusFailed with StateDone: the pages a retry requeues)
	Depth  *int   // nil = any
}

// MaxPagesLimit is the largest page listing.
const MaxPagesLimit = 10000

// Pages lists up to limit pages matching filter in id (discovery) order,
// starting at page cursor (0 = the first). It returns the cursor to pass
// next, 0 when the listing is complete. Pages are read bucket by bucket
// (1000 records per round trip), so a selective filter over a large job
// takes a few round trips per thousand pages.
func (f *Frontier) Pages(ctx context.Context, ident string, filter Filter, cursor int64, limit int) ([]Page, int64, error) {
	if err := checkIdent(ident); err != nil {
		return nil, 0, err
	}
	if limit < 1 || limit > MaxPagesLimit {
		return nil, 0, fmt.Errorf("pages of job %s: limit %d: %w: must be 1..%d", ident, limit, ErrInvalidArgument, MaxPagesLimit)
	}
	if cursor < 0 {
		return nil, 0, fmt.Errorf("pages of job %s: cursor %d: %w: must be >= 0", ident, cursor, ErrInvalidArgument)
	}
	if filter.State != "" {
		if _, err := ParseState(string(filter.State)); err != nil {
			return nil, 0, fmt.Errorf("pages of job %s: %w", ident, err)
		}
	}
	last, err := f.rdb.HGet(ctx, f.key(ident, "meta"), "next_id").Int64()
	if errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("pages of job %s: %w", ident, ErrNoFrontier)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("pages of job %s: %w", ident, err)
	}
	type hit struct {
		id  int64
		rec record
	}
	var hits []hit
	id := max(cursor, 1)
	for id <= last && len(hits) < limit {
		b := (id - 1) / pagesPerBucket
		raw, err := f.rdb.Get(ctx, f.key(ident, "pages_p")+strconv.FormatInt(b, 10)).Bytes()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, 0, fmt.Errorf("pages of job %s: %w", ident, err)
		}
		for ; id <= last && (id-1)/pagesPerBucket == b && len(hits) < limit; id++ {
			off := int((id - 1) % pagesPerBucket * recordSize)
			if off+recordSize > len(raw) || raw[off] == 0 {
				continue
			}
			r, err := decodeRecord(raw[off : off+recordSize])
			if err != nil {
				return nil, 0, fmt.Errorf("pages of job %s: page %d: %w", ident, id, err)
			}
			if filter.State != "" && States[r.state-1] != filter.State {
				continue
			}
			if filter.Status != "" && statuses[r.status] != filter.Status {
				continue
			}
			if filter.Depth != nil && int(r.depth) != *filter.Depth {
				continue
			}
			hits = append(hits, hit{id, r})
		}
	}
	next := int64(0)
	if id <= last {
		next = id
	}
	if len(hits) == 0 {
		return nil, next, nil
	}
	urls := make([]*redis.StringCmd, len(hits))
	claimers := make([]*redis.StringCmd, len(hits))
	notes := make([]*redis.StringCmd, len(hits))
	dues := make([]*redis.FloatCmd, len(hits))
	_, err = f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, h := range hits {
			b, slot := (h.id-1)/pagesPerBucket, (h.id-1)%pagesPerBucket
			urls[i] = p.LIndex(ctx, f.key(ident, "urls_p")+strconv.FormatInt(b, 10), slot)
			if h.rec.state == codeClaimed {
				claimers[i] = p.HGet(ctx, f.key(ident, "claims"), "p:"+strconv.FormatInt(h.id, 10))
			}
			if h.rec.flags&flagNote != 0 {
				notes[i] = p.HGet(ctx, f.key(ident, "notes"), strconv.FormatInt(h.id, 10))
			}
			if h.rec.waiting() {
				dues[i] = p.ZScore(ctx, f.key(ident, "retry"), strconv.FormatInt(h.id, 10))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("pages of job %s: %w", ident, err)
	}
	pages := make([]Page, len(hits))
	for i, h := range hits {
		pages[i] = h.rec.page(h.id, urls[i].Val())
		if claimers[i] != nil {
			pages[i].Claimer = claimers[i].Val()
		}
		if notes[i] != nil {
			pages[i].Note = notes[i].Val()
		}
		if dues[i] != nil && dues[i].Err() == nil {
			pages[i].RetryAt = time.UnixMilli(int64(dues[i].Val()))
		}
	}
	return pages, next, nil
}

// AllPages lists every page matching filter in id (discovery) order, the
// whole listing in MaxPagesLimit pieces.
func (f *Frontier) AllPages(ctx context.Context, ident string, filter Filter) ([]Page, error) {
	var all []Page
	cursor := int64(1)
	for cursor > 0 {
		ps, next, err := f.Pages(ctx, ident, filter, cursor, MaxPagesLimit)
		if err != nil {
			return nil, err
		}
		all = append(all, ps...)
		cursor = next
	}
	return all, nil
}
