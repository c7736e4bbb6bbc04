package frontier

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// budgetSite seeds job, completes the start page with pages /p/0../p/N-1
// and requisites /r/0../r/R-1, and returns the env.
func budgetSite(t *testing.T, pages, requisites int) *env {
	t.Helper()
	e, s := claimedSeed(t, Options{}, Config{MaxDepth: -1, MaxAttempts: 3})
	ctx := ctxT(t)
	ls := links(numbered(u("/p/%d"), pages)...)
	for _, r := range numbered(u("/r/%d"), requisites) {
		ls = append(ls, Link{URL: r, Requisite: true})
	}
	_, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 0, ls)
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	return e
}

// A page budget is exact under concurrent claims: eight claimers claiming
// 1..4 pages at a time, with transient failures, releases and skips among
// the pages, charge exactly the budget; every charged page ends (a
// transient one is claimed again past the budget); unclaimed pages stay
// READY and a claim without a budget then takes each of them once.
func TestPageBudgetExactUnderConcurrentClaims(t *testing.T) {
	const pages, requisites, budget = 400, 30, 100
	e := budgetSite(t, pages, requisites)
	ctx := ctxT(t)

	var mu sync.Mutex
	fetched := map[string]int{}   // URL -> completed attempts (a fetch each)
	released := map[string]bool{} // released once, unfetched
	skipped := map[string]bool{}
	work := func(w int, budget int64, deadline time.Time, errs chan<- error) {
		r := rand.New(rand.NewPCG(uint64(w), 9))
		for n := 0; ; n++ {
			if time.Now().After(deadline) {
				errs <- fmt.Errorf("claimer %d: not done before the deadline", w)
				return
			}
			ps, counts, err := e.f.ClaimWithin(ctx, job, 1+r.IntN(4), fmt.Sprintf("w%d-b%d-%d", w, budget, n), 0, budget)
			if err != nil {
				errs <- err
				return
			}
			if len(ps) == 0 {
				if counts.Claimed == 0 {
					return // nothing held by anyone: what is READY is over the budget
				}
				time.Sleep(time.Millisecond) // others hold pages that may come back
				continue
			}
			for _, p := range ps {
				id := p.ID
				mu.Lock()
				first := fetched[p.URL] == 0
				rel := first && id%13 == 0 && !released[p.URL]
				skip := first && id%17 == 0
				transient := first && id%10 == 0
				switch {
				case rel:
					released[p.URL] = true
				case skip:
					skipped[p.URL] = true
				default:
					fetched[p.URL]++
				}
				mu.Unlock()
				switch {
				case rel:
					_, _, err = e.f.ReleasePages(ctx, job, []int64{id})
				case skip:
					err = e.f.Skip(ctx, job, id, "rule")
				case transient:
					_, err = e.f.Complete(ctx, job, id, p.Attempts, Outcome{Status: StatusTransient})
				default:
					_, err = e.f.Complete(ctx, job, id, p.Attempts, Outcome{Status: StatusSucceeded})
				}
				if err != nil {
					errs <- fmt.Errorf("claimer %d page %d: %w", w, id, err)
					return
				}
			}
		}
	}
	run := func(budget int64) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		deadline := time.Now().Add(45 * time.Second)
		for w := range 8 {
			wg.Go(func() { work(w, budget, deadline, errs) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}

	run(budget)
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.EqualValues(t, budget, c.Charged, "the budget is charged exactly")
	require.Zero(t, c.Claimed)
	all, _, err := e.f.Pages(ctx, job, Filter{}, 0, MaxPagesLimit)
	require.NoError(t, err)
	charged, fetchedPages := 0, 0
	for _, p := range all {
		if p.Charged {
			charged++
			require.Equal(t, StateDone, p.State, "page %s: a charged page ends, a transient one claimed again past the budget", p.URL)
			require.Equal(t, StatusSucceeded, p.Status, p.URL)
		}
		if strings.Contains(p.URL, "/r/") {
			require.False(t, p.Charged, "a requisite is never charged: %s", p.URL)
		}
		if !p.Requisite && p.State == StateDone {
			fetchedPages++
		}
		if p.State == StateReady {
			require.False(t, p.Charged, "a READY page left over is uncharged: %s", p.URL)
		}
	}
	require.Equal(t, budget, charged)
	require.Equal(t, budget, fetchedPages, "exactly the budget's pages were fetched (the start page among them)")
	require.Positive(t, c.Ready, "pages over the budget stay READY")
	require.Positive(t, c.Skipped, "skipped pages are uncharged")

	// Continue without a budget: every page left is fetched, none twice.
	run(0)
	c, err = e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.True(t, c.Finished(), "%+v", c)
	for url, n := range fetched {
		p, err := e.f.Page(ctx, job, url)
		require.NoError(t, err)
		want := 1
		if p.ID%10 == 0 {
			want = 2 // its first attempt was transient
		}
		require.Equal(t, want, n, "page %s fetched %d times", url, n)
	}
	skippedPages := 0
	for url := range skipped {
		if strings.Contains(url, "/p/") {
			skippedPages++
		}
	}
	require.EqualValues(t, pages-skippedPages+1, c.Charged, "every page but the skipped ones, and the start page, charged once; no requisite")
}

// Release and skip give an unfetched page's charge back; a page that
// completed an attempt keeps it; a requisite is claimed uncharged below
// the budget and not at all once it is spent.
func TestPageBudgetChargesFetchedPagesOnly(t *testing.T) {
	e := budgetSite(t, 3, 1)
	ctx := ctxT(t)
	// The start page is charged by its claim without a budget.
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Charged)

	ps, c, err := e.f.ClaimWithin(ctx, job, 2, "a", 0, 3)
	require.NoError(t, err)
	require.Len(t, ps, 2)
	require.EqualValues(t, 3, c.Charged)
	more, _, err := e.f.ClaimWithin(ctx, job, 5, "b", 0, 3)
	require.NoError(t, err)
	require.Empty(t, more, "the budget is spent")

	// Released unfetched: uncharged, claimable again under the budget.
	_, c, err = e.f.Release(ctx, job, "a")
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Charged)
	ps, _, err = e.f.ClaimWithin(ctx, job, 2, "c", 0, 3)
	require.NoError(t, err)
	require.Len(t, ps, 2)
	// One transient (keeps its charge), one skipped (gives it back).
	_, err = e.f.Complete(ctx, job, ps[0].ID, ps[0].Attempts, Outcome{Status: StatusTransient})
	require.NoError(t, err)
	require.NoError(t, e.f.Skip(ctx, job, ps[1].ID, "rule"))
	c, err = e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.EqualValues(t, 2, c.Charged)

	// Budget 2 is spent: only the transient page comes back.
	again, c, err := e.f.ClaimWithin(ctx, job, 5, "d", 0, 2)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, ps[0].ID, again[0].ID)
	require.EqualValues(t, 2, c.Charged)
	// Released after a completed attempt: stays charged.
	_, c, err = e.f.Release(ctx, job, "d")
	require.NoError(t, err)
	require.EqualValues(t, 2, c.Charged)

	// Budget 3: the charged page READY again and one new page; then the
	// budget is spent and the requisite is not claimed.
	rest, c, err := e.f.ClaimWithin(ctx, job, 5, "e", 0, 3)
	require.NoError(t, err)
	var urls []string
	for _, p := range rest {
		urls = append(urls, strings.TrimPrefix(p.URL, u("")))
		require.True(t, p.Charged, p.URL)
	}
	require.ElementsMatch(t, []string{"/p/1", "/p/2"}, urls)
	require.EqualValues(t, 3, c.Charged)
	// Below the budget a requisite is claimed uncharged.
	req, c, err := e.f.ClaimWithin(ctx, job, 5, "g", 0, 4)
	require.NoError(t, err)
	require.Len(t, req, 1)
	require.Equal(t, u("/r/0"), req[0].URL)
	require.False(t, req[0].Charged)
	require.EqualValues(t, 3, c.Charged)

	_, _, err = e.f.ClaimWithin(ctx, job, 1, "f", 0, -1)
	require.ErrorIs(t, err, ErrInvalidArgument)
}
