package frontier

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// graph is a generated site: node 0 is the seed; out[i] are the links of
// node i (with duplicates, self-links and cycles). Node properties decide
// how its fetch goes.
type graph struct {
	out       [][]int
	noRecurse []bool // linked as NoRecurse (offsite): fetched, links dropped
	failPerm  []bool // fails for good: a leaf
	skip      []bool // skipped when dequeued: a leaf
	transient []int  // transient failures before it succeeds
	slow      []bool // completes late: shorter paths through it show up late
}

func nodeURL(i int) string { return u("/n/" + strconv.Itoa(i)) }

func nodeOf(t testing.TB, url string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(url, u("/n/")))
	require.NoError(t, err, url)
	return n
}

func randomGraph(r *rand.Rand, maxNodes, maxOut int) graph {
	n := 1 + r.IntN(maxNodes)
	if r.IntN(4) > 0 {
		n = maxNodes/2 + r.IntN(maxNodes/2) // mostly sizeable sites
	}
	g := graph{out: make([][]int, n), noRecurse: make([]bool, n), failPerm: make([]bool, n),
		skip: make([]bool, n), transient: make([]int, n)}
	g.slow = make([]bool, n)
	for i := range n {
		if i+1 < n && r.IntN(3) > 0 {
			g.out[i] = append(g.out[i], i+1) // long chains: deep pages
		}
		for range 1 + r.IntN(maxOut) {
			g.out[i] = append(g.out[i], r.IntN(n))
		}
		g.slow[i] = r.IntN(5) == 0
		if i == 0 {
			continue
		}
		g.noRecurse[i] = r.IntN(15) == 0
		g.failPerm[i] = r.IntN(20) == 0
		g.skip[i] = r.IntN(20) == 0
		g.transient[i] = []int{0, 0, 0, 1, 2, 3}[r.IntN(6)]
	}
	return g
}

// expected is what a correct frontier ends with: BFS from the seed where
// only pages within the limit that succeed (and are not NoRecurse) expand.
type expected struct {
	depth map[int]int
	state map[int]State
	stat  map[int]Status
}

func (g graph) bfs(maxDepth, maxAttempts int) expected {
	ex := expected{depth: map[int]int{0: 0}, state: map[int]State{}, stat: map[int]Status{}}
	queue := []int{0}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		d := ex.depth[i]
		within := maxDepth < 0 || d <= maxDepth
		switch {
		case !within:
			ex.state[i] = StateDeferred
		case g.skip[i]:
			ex.state[i], ex.stat[i] = StateSkipped, StatusSkipped
		case g.failPerm[i] || g.transient[i] >= maxAttempts:
			ex.state[i], ex.stat[i] = StateDone, StatusFailed
		default:
			ex.state[i], ex.stat[i] = StateDone, StatusSucceeded
		}
		if ex.stat[i] != StatusSucceeded || g.noRecurse[i] {
			continue
		}
		for _, c := range g.out[i] {
			if _, seen := ex.depth[c]; !seen {
				ex.depth[c] = d + 1
				queue = append(queue, c)
			}
		}
	}
	return ex
}

// simulate crawls g through the frontier in a random order: random claim
// sizes, completions of random in-flight pages, transient failures before
// success, links delivered in random batches (shuffled, with duplicates,
// some batches and completions repeated), random releases.
func simulate(t *testing.T, e *env, ident string, g graph, r *rand.Rand, maxDepth, maxAttempts int) {
	ctx := ctxT(t)
	_, err := e.f.Seed(ctx, ident, nodeURL(0), Config{MaxDepth: maxDepth, MaxAttempts: maxAttempts})
	require.NoError(t, err)
	inflight := map[int64]Page{}
	failures := map[int]int{}
	claimSeq := map[int64]int{}
	tokens := 0
	for step := 0; ; step++ {
		require.Less(t, step, 100000, "the crawl must end")
		if len(inflight) == 0 || r.IntN(3) == 0 {
			tokens++
			ps, counts, err := e.f.Claim(ctx, ident, 1+r.IntN(8), "tok-"+strconv.Itoa(tokens), 0)
			require.NoError(t, err)
			for _, p := range ps {
				require.NotContains(t, inflight, p.ID, "page claimed twice at once")
				inflight[p.ID] = p
				claimSeq[p.ID] = step
			}
			if len(ps) == 0 && len(inflight) == 0 {
				require.True(t, counts.Finished(), "nothing claimable and nothing in flight: %+v", counts)
				return
			}
			continue
		}
		// Pick the page claimed last (depth-first-like: pages claimed
		// early stay in flight, so shorter paths show up late and lower
		// pages already fetched) or a random one; sorted: deterministic.
		ids := make([]int64, 0, len(inflight))
		for id := range inflight {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b int64) int {
			return cmp.Or(cmp.Compare(claimSeq[a], claimSeq[b]), cmp.Compare(a, b))
		})
		p := inflight[ids[len(ids)-1]]
		if r.IntN(5) == 0 {
			p = inflight[ids[r.IntN(len(ids))]]
		}
		if g.slow[nodeOf(t, p.URL)] {
			for i := len(ids) - 1; i >= 0; i-- {
				if q := inflight[ids[i]]; !g.slow[nodeOf(t, q.URL)] {
					p = q
					break
				}
			}
		}
		delete(inflight, p.ID)
		node := nodeOf(t, p.URL)
		switch {
		case r.IntN(12) == 0:
			if r.IntN(2) == 0 {
				_, _, err = e.f.ReleasePages(ctx, ident, []int64{p.ID})
			} else {
				_, _, err = e.f.Release(ctx, ident, p.Claimer)
				for id, q := range inflight { // the token's other pages go too
					if q.Claimer == p.Claimer {
						delete(inflight, id)
					}
				}
			}
			require.NoError(t, err)
		case g.skip[node]:
			require.NoError(t, e.f.Skip(ctx, ident, p.ID, "rule"))
		case g.failPerm[node]:
			_, err = e.f.Complete(ctx, ident, p.ID, p.Attempts, Outcome{Status: StatusFailed, Note: "404"})
			require.NoError(t, err)
		case failures[node] < g.transient[node]:
			failures[node]++
			_, err = e.f.Complete(ctx, ident, p.ID, p.Attempts, Outcome{Status: StatusTransient, Note: "503"})
			require.NoError(t, err)
		default:
			ls := append([]int(nil), g.out[node]...)
			if len(ls) > 0 && r.IntN(3) == 0 {
				ls = append(ls, ls[r.IntN(len(ls))]) // a duplicate link
			}
			r.Shuffle(len(ls), func(i, j int) { ls[i], ls[j] = ls[j], ls[i] })
			batch := 0
			for len(ls) > 0 || batch == 0 {
				n := min(len(ls), 1+r.IntN(4))
				var bl []Link
				for _, c := range ls[:n] {
					bl = append(bl, Link{URL: nodeURL(c), NoRecurse: g.noRecurse[c]})
				}
				for range 1 + r.IntN(2) { // sometimes repeated
					_, err := e.f.Discover(ctx, ident, p.ID, p.Attempts, batch, bl)
					require.NoError(t, err)
				}
				ls = ls[n:]
				batch++
			}
			for range 1 + r.IntN(2) {
				_, err = e.f.Complete(ctx, ident, p.ID, p.Attempts, Outcome{Status: StatusSucceeded})
				require.NoError(t, err)
			}
		}
	}
}

// verify compares the frontier's pages and counts with the BFS.
func verify(t *testing.T, e *env, ident string, g graph, ex expected) {
	ctx := ctxT(t)
	pages, next, err := e.f.Pages(ctx, ident, Filter{}, 0, MaxPagesLimit)
	require.NoError(t, err)
	require.Zero(t, next)
	require.Len(t, pages, len(ex.depth), "one page per reachable URL")
	byID := map[int64]Page{}
	var sc StateCounts
	for _, p := range pages {
		byID[p.ID] = p
		node := nodeOf(t, p.URL)
		d, ok := ex.depth[node]
		require.True(t, ok, "page %s is not reachable", p.URL)
		require.Equal(t, d, p.Depth, "depth of %s", p.URL)
		require.Equal(t, ex.state[node], p.State, "state of %s", p.URL)
		if ex.state[node] != StateDeferred {
			require.Equal(t, ex.stat[node], p.Status, "status of %s", p.URL)
		}
		require.Equal(t, g.noRecurse[node], p.NoRecurse, "flags of %s", p.URL)
		(&sc).add(p)
	}
	for _, p := range pages {
		if p.ID == 1 {
			require.Zero(t, p.Parent)
			continue
		}
		parent, ok := byID[p.Parent]
		require.True(t, ok, "parent of %s", p.URL)
		require.Equal(t, p.Depth-1, parent.Depth, "the parent of %s is on a shortest path", p.URL)
		require.Contains(t, g.out[nodeOf(t, parent.URL)], nodeOf(t, p.URL), "the parent of %s links to it", p.URL)
	}
	counts, err := e.f.Counts(ctx, ident)
	require.NoError(t, err)
	require.True(t, counts.Finished())
	require.Equal(t, sc, counts.StateCounts)
	require.Equal(t, int64(len(pages)), counts.Total)
	var sum StateCounts
	for _, dc := range counts.ByDepth {
		for _, name := range []string{"ready", "claimed", "skipped", "done", "succeeded", "failed", "deferred"} {
			*sum.field(name) += *dc.field(name)
		}
	}
	require.Equal(t, sc, sum, "by-depth counts add up")
	claims, err := e.rdb.HLen(ctx, e.f.key(ident, "claims")).Result()
	require.NoError(t, err)
	require.Zero(t, claims, "no claim left")
}

func (s *StateCounts) add(p Page) {
	*s.field(string(p.State))++
	if p.State == StateDone {
		*s.field(map[bool]string{true: "succeeded", false: "failed"}[p.Status == StatusSucceeded])++
	}
}

// TestRandomGraphsMatchBFS: whatever the order pages complete in, with
// transient failures, releases, duplicate and repeated discoveries, the
// crawl ends with exactly the pages a BFS within the depth limit reaches,
// each at its BFS depth.
func TestRandomGraphsMatchBFS(t *testing.T) {
	graphs := 300
	if testing.Short() {
		graphs = 50
	}
	// Tiny budgets so propagation is resumed across many script calls.
	e := newEnv(t, Options{Chunk: 3, SettleBudget: 4})
	for i := 0; i < graphs; i++ {
		seed := uint64(i)
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		g := randomGraph(r, 60, 4)
		maxDepth := []int{-1, 0, 1, 2, 3, 5, 8}[r.IntN(7)]
		maxAttempts := 1 + r.IntN(3)
		ident := fmt.Sprintf("graph%d", i)
		ok := t.Run(ident, func(t *testing.T) {
			simulate(t, e, ident, g, r, maxDepth, maxAttempts)
			verify(t, e, ident, g, g.bfs(maxDepth, maxAttempts))
		})
		if !ok {
			t.Fatalf("graph seed %d (max depth %d, max attempts %d): %+v", seed, maxDepth, maxAttempts, g)
		}
	}
}
