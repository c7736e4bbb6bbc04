package testsite

import (
	"fmt"
	"regexp"
	"slices"
)

// Unlimited as Scope.MaxDepth means no depth limit.
const Unlimited = -1

// maxCalendarPages bounds the calendar pages Expected walks: the calendar
// is infinite, so a walk without a depth limit or a skip rule for it would
// never end. CalendarSkipPattern(MaxCalendarWindow) keeps ~73,000.
const maxCalendarPages = 100_000

// Scope is what a crawl of the site is allowed to fetch.
type Scope struct {
	// MaxDepth is the depth limit (pages at MaxDepth are fetched, their
	// links are not followed); Unlimited for none.
	MaxDepth int
	// OffsiteOnce fetches pages on the other host linked from pages of the
	// start host, once and without following their links (ArchiveBot's
	// default); without it they are out of scope.
	OffsiteOnce bool
	// Skip are RE2 patterns (mnbot `skip` rules) matched against a page's
	// URL: a matching page is not fetched and its links are not
	// discovered. The start page is never skipped.
	Skip []string
	// RedirectAsLink makes a redirect's target a page of its own one level
	// below the redirect, instead of part of the redirecting page's fetch.
	RedirectAsLink bool
}

// Expectation is what a correct crawl of the site within a Scope fetches.
type Expectation struct {
	// Pages maps every page URL the crawl requests to its depth: 404 and
	// 500 pages, the 500-once pages, offsite pages (OffsiteOnce) and
	// redirect targets (at the redirecting page's depth unless
	// RedirectAsLink) included.
	Pages map[string]int
	// Requisites maps the requisite URLs (any host) of the pages that
	// answer 200 to the depth of the shallowest such page.
	Requisites map[string]int
	// Skipped maps the pages a Skip rule kept out to the depth they were
	// found at.
	Skipped map[string]int
}

// Depth returns the depth of a page URL in the expectation.
func (e *Expectation) Depth(url string) (int, bool) {
	d, ok := e.Pages[url]
	return d, ok
}

// PagesAt returns the number of pages at each depth (index = depth).
func (e *Expectation) PagesAt() []int {
	var counts []int
	for _, d := range e.Pages {
		for len(counts) <= d {
			counts = append(counts, 0)
		}
		counts[d]++
	}
	return counts
}

// Expected returns the pages a correct crawl fetches within sc, by a
// breadth-first walk of the site's graph from the start page (see the
// package doc for the rules). It fails on an invalid Skip pattern and when
// the walk does not end (the calendar trap is neither limited nor skipped).
func (s *Server) Expected(sc Scope) (*Expectation, error) {
	skips := make([]*regexp.Regexp, 0, len(sc.Skip))
	for _, p := range sc.Skip {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("testsite: expected: skip pattern %q: %w", p, err)
		}
		skips = append(skips, re)
	}
	skipped := func(k key) bool {
		if len(skips) == 0 || k == s.site.home {
			return false
		}
		u := s.url(k)
		return slices.ContainsFunc(skips, func(re *regexp.Regexp) bool { return re.MatchString(u) })
	}
	w, err := s.site.walk(sc, skipped)
	if err != nil {
		return nil, err
	}
	e := &Expectation{Pages: make(map[string]int, len(w.pages)), Requisites: map[string]int{}, Skipped: map[string]int{}}
	for k, d := range w.pages {
		e.Pages[s.url(k)] = d
	}
	for k, d := range w.skipped {
		e.Skipped[s.url(k)] = d
	}
	for id, d := range w.reqs {
		e.Requisites[s.url(key(id))] = d
	}
	return e, nil
}

// walked is the result of Site.walk, by key.
type walked struct {
	pages, skipped map[key]int
	reqs           map[int32]int
}

// walk is Expected's 0-1 breadth-first search: links cost one level, a
// redirect costs none (unless RedirectAsLink).
func (s *Site) walk(sc Scope, skipped func(key) bool) (*walked, error) {
	w := &walked{pages: map[key]int{}, skipped: map[key]int{}, reqs: map[int32]int{}}
	dist := map[key]int{s.home: 0}
	// The deque: front holds pages reached by a redirect at the depth being
	// walked (taken first), queue the others in breadth-first order.
	var front []key
	queue := []key{s.home}
	head := 0
	within := func(d int) bool { return sc.MaxDepth == Unlimited || d <= sc.MaxDepth }
	relax := func(k key, d int, zero bool) {
		if old, ok := dist[k]; ok && old <= d {
			return
		}
		if !within(d) {
			return
		}
		if s.host(k) == hostOther && !sc.OffsiteOnce {
			return
		}
		dist[k] = d
		if zero {
			front = append(front, k)
		} else {
			queue = append(queue, k)
		}
	}
	done := map[key]bool{}
	calendar := 0
	for len(front) > 0 || head < len(queue) {
		var k key
		if n := len(front); n > 0 {
			k, front = front[n-1], front[:n-1]
		} else {
			k = queue[head]
			head++
		}
		if done[k] {
			continue
		}
		done[k] = true
		d := dist[k]
		if k < 0 {
			if calendar++; calendar > maxCalendarPages {
				return nil, fmt.Errorf("testsite: expected: more than %d calendar pages within depth %d: the calendar trap needs a depth limit or a skip rule (CalendarSkipPattern)", maxCalendarPages, sc.MaxDepth)
			}
		}
		if skipped(k) {
			w.skipped[k] = d
			continue
		}
		w.pages[k] = d
		kind := s.kind(k)
		if kind == KindRedirect {
			t := key(s.nodes[k].target)
			if sc.RedirectAsLink {
				relax(t, d+1, false)
			} else {
				relax(t, d, true)
			}
			continue
		}
		if !kind.hasLinks() {
			continue
		}
		for _, r := range s.reqs(k) {
			if old, ok := w.reqs[r]; !ok || d < old {
				w.reqs[r] = d
			}
		}
		if kind == KindOffsite || !within(d+1) {
			continue
		}
		for _, l := range s.links(k) {
			relax(l, d+1, false)
		}
	}
	return w, nil
}
