package hostbudget

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/archiveflow/archiveflow/internal/hostname"
	"go.uber.org/zap"
)

// Page applies the gate to one page attempt's fetches and keeps its
// verdict: whether the page must be postponed or failed. A nil *Page
// applies nothing (politeness off, or a fetcher outside a crawl page).
type Page struct {
	g  *Gate
	mu sync.Mutex
	v  Verdict
}

// Verdict is what the host budget decided about a page attempt.
type Verdict struct {
	// Postpone: the page goes back to READY, not before NotBefore (Redis'
	// clock), its attempt kept.
	Postpone  bool
	NotBefore time.Time
	// Fail: the page's host stayed rate-limited past the give-up limit.
	Fail bool
	Note string
}

type pageKey struct{}

// WithPage returns ctx carrying a fresh Page of g (nil g: ctx unchanged,
// nil Page).
func WithPage(ctx context.Context, g *Gate) (context.Context, *Page) {
	if g == nil {
		return ctx, nil
	}
	p := &Page{g: g}
	return context.WithValue(ctx, pageKey{}, p), p
}

// PageFrom returns the Page WithPage put in ctx, or nil.
func PageFrom(ctx context.Context) *Page {
	p, _ := ctx.Value(pageKey{}).(*Page)
	return p
}

// Verdict returns the page's verdict so far.
func (p *Page) Verdict() Verdict {
	if p == nil {
		return Verdict{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.v
}

func (p *Page) decide(v Verdict) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.v.Fail:
	case v.Fail:
		p.v = v
	case p.v.Postpone && !v.NotBefore.After(p.v.NotBefore):
	default:
		p.v = v
	}
}

// RateLimited says whether an answer is a rate limit (false for a nil
// Page).
func (p *Page) RateLimited(status int, retryAfter string, body []byte) bool {
	return p != nil && p.g.RateLimited(status, retryAfter, body)
}

// ErrPostponed: the page's fetching stops; its verdict says why.
var ErrPostponed = errors.New("page postponed by its host's budget")

// ErrGivenUp: a requisite's host stayed rate-limited past the give-up
// limit; the requisite is not fetched.
var ErrGivenUp = errors.New("host rate-limited past crawl.rate_limit.give_up_after")

// Fetch is one fetch under the budget.
type Fetch struct {
	p         *Page
	slot      *Slot
	host      string
	requisite bool
}

// Start waits for the turn of rawURL's host. A page's own fetch (not
// requisite) on a host past the give-up limit fails the page; a
// requisite's gives ErrGivenUp; a turn further than MaxWait postpones the
// page (ErrPostponed). End must be called after the fetch.
func (p *Page) Start(ctx context.Context, rawURL string, requisite bool) (*Fetch, error) {
	if p == nil {
		return nil, nil
	}
	host, err := hostname.Of(rawURL)
	if err != nil {
		return nil, nil // not a fetch the budget can name; the fetcher fails it
	}
	slot, err := p.g.Acquire(ctx, host)
	var w *Wait
	if errors.As(err, &w) {
		if p.g.GivenUp(w.Since, w.Until) {
			if requisite {
				return nil, fmt.Errorf("%w: host %s rate-limited since %s", ErrGivenUp, host, w.Since.UTC().Format(time.RFC3339))
			}
			p.decide(Verdict{Fail: true, Note: fmt.Sprintf("host %s rate-limited since %s, longer than crawl.rate_limit.give_up_after (%s): page failed",
				host, w.Since.UTC().Format(time.RFC3339), p.g.cfg.RateLimit.GiveUpAfter)})
			return nil, fmt.Errorf("%w: %v", ErrPostponed, w)
		}
		p.decide(Verdict{Postpone: true, NotBefore: w.Until, Note: fmt.Sprintf("postponed without spending an attempt: %v", w)})
		return nil, fmt.Errorf("%w: %v", ErrPostponed, w)
	}
	if err != nil {
		return nil, err
	}
	return &Fetch{p: p, slot: slot, host: host, requisite: requisite}, nil
}

// Answer takes the fetch's answer into account: a rate limit backs its
// host off and, for the page's own fetch, postpones (or, past the
// give-up limit, fails) the page. It reports whether the answer was a
// rate limit.
func (f *Fetch) Answer(ctx context.Context, resp *http.Response, body []byte) bool {
	if f == nil || resp == nil {
		return false
	}
	b, err := f.p.g.Observe(ctx, f.slot, f.host, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	if err != nil {
		f.p.g.log.Warn("host budget: answer not taken into account", zap.Error(err))
		return false
	}
	if b == nil {
		return false
	}
	if !f.requisite {
		if b.GiveUp {
			f.p.decide(Verdict{Fail: true, Note: b.Note(f.p.g)})
		} else {
			f.p.decide(Verdict{Postpone: true, NotBefore: b.Until, Note: b.Note(f.p.g)})
		}
	}
	return true
}

// End frees the fetch's slot.
func (f *Fetch) End() {
	if f != nil {
		f.slot.Release()
	}
}
