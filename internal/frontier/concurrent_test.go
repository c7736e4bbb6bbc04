package frontier

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Several claimers claim and complete pages of one job at once: a page is
// held by one claimer at a time, every attempt number is handed out once,
// and the crawl ends with exactly the BFS pages.
func TestConcurrentClaimers(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	r := rand.New(rand.NewPCG(7, 7))
	g := randomGraph(r, 400, 6)
	for i := range g.out { // keep every page fetchable: this test is about concurrency
		if i > 0 {
			g.failPerm[i], g.skip[i], g.transient[i] = false, false, i%7/6
		}
	}
	const maxDepth, maxAttempts = 4, 3
	_, err := e.f.Seed(ctx, job, nodeURL(0), Config{MaxDepth: maxDepth, MaxAttempts: maxAttempts})
	require.NoError(t, err)

	var mu sync.Mutex
	holder := map[int64]string{}   // page -> claimer holding it now
	lastAttempt := map[int64]int{} // page -> highest attempt handed out
	failures := map[int]int{}
	deadline := time.Now().Add(45 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			fail := func(err error) { errs <- fmt.Errorf("claimer %d: %w", w, err) }
			for n := 0; ; n++ {
				if time.Now().After(deadline) {
					fail(fmt.Errorf("crawl not finished before the deadline"))
					return
				}
				token := fmt.Sprintf("w%d-%d", w, n)
				ps, counts, err := e.f.Claim(ctx, job, 1+n%3, token, 0)
				if err != nil {
					fail(err)
					return
				}
				if len(ps) == 0 {
					if counts.Finished() {
						return
					}
					time.Sleep(time.Millisecond) // others hold the remaining pages: poll
					continue
				}
				mu.Lock()
				for _, p := range ps {
					if h, held := holder[p.ID]; held {
						mu.Unlock()
						fail(fmt.Errorf("page %d claimed by %s while %s holds it", p.ID, token, h))
						return
					}
					if p.Attempts <= lastAttempt[p.ID] {
						mu.Unlock()
						fail(fmt.Errorf("page %d attempt %d handed out again", p.ID, p.Attempts))
						return
					}
					holder[p.ID], lastAttempt[p.ID] = token, p.Attempts
				}
				mu.Unlock()
				for _, p := range ps {
					node, err := strconv.Atoi(strings.TrimPrefix(p.URL, u("/n/")))
					if err != nil {
						fail(err)
						return
					}
					mu.Lock()
					transient := failures[node] < g.transient[node]
					if transient {
						failures[node]++
					}
					delete(holder, p.ID) // before Complete: the page is reclaimable right after
					mu.Unlock()
					if transient {
						_, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusTransient})
					} else {
						var ls []Link
						for _, c := range g.out[node] {
							ls = append(ls, Link{URL: nodeURL(c), NoRecurse: g.noRecurse[c]})
						}
						if _, err = e.f.Discover(ctx, job, p.ID, p.Attempts, 0, ls); err == nil {
							_, err = e.f.Complete(ctx, job, p.ID, p.Attempts, Outcome{Status: StatusSucceeded})
						}
					}
					if err != nil {
						fail(err)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	ex := g.bfs(maxDepth, maxAttempts)
	require.Greater(t, len(ex.depth), 150, "a crawl big enough to interleave")
	verify(t, e, job, g, ex)
}
