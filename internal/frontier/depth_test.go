package frontier

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crawl drives one frontier by page URL in tests.
type crawl struct {
	t *testing.T
	e *env
}

// claim claims the next n pages and returns them by path.
func (c crawl) claim(token string, n int) map[string]Page {
	c.t.Helper()
	ps, _, err := c.e.f.Claim(ctxT(c.t), job, n, token, 0)
	require.NoError(c.t, err)
	out := map[string]Page{}
	for _, p := range ps {
		out[p.URL[len(u("")):]] = p
	}
	return out
}

// succeed delivers a page's links and completes it.
func (c crawl) succeed(p Page, paths ...string) DiscoverResult {
	c.t.Helper()
	var ls []string
	for _, path := range paths {
		ls = append(ls, u(path))
	}
	res, err := c.e.f.Discover(ctxT(c.t), job, p.ID, p.Attempts, 0, links(ls...))
	require.NoError(c.t, err)
	_, err = c.e.f.Complete(ctxT(c.t), job, p.ID, p.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(c.t, err)
	return res
}

func (c crawl) fail(p Page) {
	c.t.Helper()
	_, err := c.e.f.Complete(ctxT(c.t), job, p.ID, p.Attempts, Outcome{Status: StatusTransient, Note: "500"})
	require.NoError(c.t, err)
}

func (c crawl) page(path string) Page {
	c.t.Helper()
	p, err := c.e.f.Page(ctxT(c.t), job, u(path))
	require.NoError(c.t, err)
	return p
}

// TestWpullDepthBug is the scenario mnbot was built for: a page that fails
// first and succeeds later must not push its links one level too deep.
// Depth is a property of the page (the minimum over all paths), not of the
// attempt, so the depth-limited crawl gets exactly the pages within the
// limit whatever order pages complete in.
//
//	S(0) → A(1) → A2(2) → X
//	S(0) → B(1) ───────→ X(2) → Y(3)
//
// With max depth 2, B fails once, so A2 reports X first, at depth 3
// (DEFERRED). When B's retry succeeds it offers X at depth 2: X is lowered,
// becomes READY and is fetched; Y, at depth 3, stays out of depth.
func TestWpullDepthBug(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	require.NoError(t, e.rdb.HSet(ctx, e.keys.Job(job), "items_queued", 0).Err())
	_, err := e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 2, MaxAttempts: 3, QueuedField: "items_queued"})
	require.NoError(t, err)
	c := crawl{t, e}

	c.succeed(c.claim("1", 1)["/"], "/a", "/b")
	lvl1 := c.claim("2", 2)
	c.fail(lvl1["/b"]) // B fails first
	c.succeed(lvl1["/a"], "/a2")
	next := c.claim("3", 2) // B's retry (depth 1) and A2 (depth 2)
	require.Contains(t, next, "/b")
	require.Contains(t, next, "/a2")
	res := c.succeed(next["/a2"], "/x")
	assert.Equal(t, 1, res.Deferred, "X via A2 is at depth 3: beyond the limit")
	assert.Equal(t, StateDeferred, c.page("/x").State)

	res = c.succeed(next["/b"], "/x") // the retry succeeds
	assert.Equal(t, DiscoverResult{Known: 1, Lowered: 1, Promoted: 1}, res)
	x := c.page("/x")
	assert.Equal(t, 2, x.Depth)
	assert.Equal(t, StateReady, x.State)
	assert.Equal(t, c.page("/b").ID, x.Parent, "the parent is the page of the shortest path")

	c.succeed(c.claim("4", 5)["/x"], "/y")
	assert.Empty(t, c.claim("5", 5))
	counts, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.True(t, counts.Finished())
	assert.Equal(t, StateCounts{Done: 5, Succeeded: 5, Deferred: 1}, counts.StateCounts)
	assert.Equal(t, 2, counts.MaxDepth, "the limit is read back for status")
	y := c.page("/y")
	assert.Equal(t, 3, y.Depth)
	assert.Equal(t, StateDeferred, y.State, "out of depth at the end of the crawl")
	queued, err := e.rdb.HGet(ctx, e.keys.Job(job), "items_queued").Int()
	require.NoError(t, err)
	assert.Equal(t, 0, queued, "S, A, B, A2 and X (when promoted) were queued, all done; Y never was")
}

// A shorter path to a page that was already fetched lowers the pages below
// it, recursively through the recorded relations.
func TestLoweringPropagatesThroughFetchedPages(t *testing.T) {
	for _, opts := range []Options{{}, {SettleBudget: 1}} {
		e := newEnv(t, opts)
		seed(t, e, Config{MaxDepth: 3, MaxAttempts: 3})
		c := crawl{t, e}
		c.succeed(c.claim("1", 1)["/"], "/a", "/c")
		lvl1 := c.claim("2", 2) // C is slow: it completes last
		c.succeed(lvl1["/a"], "/b")
		c.succeed(c.claim("3", 1)["/b"], "/x")
		c.succeed(c.claim("4", 1)["/x"], "/y", "/x", "/b") // Y at 4: DEFERRED; a cycle back to B
		assert.Equal(t, StateDeferred, c.page("/y").State)
		res := c.succeed(lvl1["/c"], "/x")
		assert.Equal(t, 1, res.Lowered)
		assert.Equal(t, 1, res.Promoted, "Y moved to depth 3 through X's relation")
		assert.Equal(t, 2, c.page("/x").Depth)
		y := c.page("/y")
		assert.Equal(t, 3, y.Depth)
		assert.Equal(t, StateReady, y.State)
		assert.Equal(t, c.page("/x").ID, y.Parent)
		assert.Equal(t, 2, c.page("/b").Depth, "B keeps its shorter path through A")
		c.succeed(c.claim("5", 5)["/y"], "/z")
		z := c.page("/z")
		assert.Equal(t, 4, z.Depth)
		assert.Equal(t, StateDeferred, z.State)
	}
}

func TestCyclesAndSelfLinks(t *testing.T) {
	e := newEnv(t, Options{})
	seed(t, e, Config{MaxDepth: -1, MaxAttempts: 3})
	c := crawl{t, e}
	res := c.succeed(c.claim("1", 1)["/"], "/", "/a", "/slow")
	assert.Equal(t, 1, res.SelfLinks)
	lvl1 := c.claim("2", 2)
	c.fail(lvl1["/slow"])
	res = c.succeed(lvl1["/a"], "/a", "/b", "/")
	assert.Equal(t, DiscoverResult{Added: 1, Known: 1, SelfLinks: 1}, res)
	next := c.claim("3", 2)
	c.succeed(next["/b"], "/c", "/a", "/b")
	c.succeed(c.claim("4", 1)["/c"], "/a", "/b", "/c", "/d")
	// The slow page links straight to C: C drops from 3 to 2, D from 4 to 3.
	res = c.succeed(next["/slow"], "/c", "/slow")
	assert.Equal(t, DiscoverResult{Known: 1, Lowered: 1, SelfLinks: 1}, res)
	assert.Equal(t, 2, c.page("/c").Depth)
	assert.Equal(t, 3, c.page("/d").Depth)
	assert.Equal(t, 2, c.page("/b").Depth)
	c.succeed(c.claim("5", 1)["/d"], "/", "/d")
	counts, err := e.f.Counts(ctxT(t), job)
	require.NoError(t, err)
	assert.True(t, counts.Finished())
	assert.Equal(t, int64(6), counts.Succeeded)
	assert.Equal(t, -1, counts.MaxDepth, "no limit")
}

// Propagation is done in bounded script calls; a backlog left by an
// interrupted Discover is reported and finished by later calls.
func TestPropagationBacklog(t *testing.T) {
	e := newEnv(t, Options{SettleBudget: 1, SettleRounds: 1})
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: 4, MaxAttempts: 3})
	c := crawl{t, e}
	c.succeed(c.claim("1", 1)["/"], "/a", "/slow")
	lvl1 := c.claim("2", 2) // /slow completes last
	c.succeed(lvl1["/a"], "/b")
	c.succeed(c.claim("3", 1)["/b"], "/c")
	c.succeed(c.claim("4", 1)["/c"], "/d1", "/d2", "/d3") // depth 4
	c.succeed(c.claim("5", 3)["/d1"], "/e")               // depth 5: DEFERRED
	// /d2 and /d3 stay claimed.
	res := c.succeed(lvl1["/slow"], "/c")
	assert.Equal(t, 1, res.Lowered)
	counts, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	require.Positive(t, counts.Propagating, "one settle round of budget 1 leaves work")
	assert.False(t, counts.Finished())
	// Claims settle the backlog; /e becomes READY at depth 4.
	var claimed []Page
	for i := 0; i < 20 && len(claimed) == 0; i++ {
		ps, _, err := e.f.Claim(ctx, job, 5, "drain-"+string(rune('a'+i)), 0)
		require.NoError(t, err)
		claimed = ps
	}
	require.Len(t, claimed, 1)
	assert.Equal(t, u("/e"), claimed[0].URL)
	assert.Equal(t, 4, claimed[0].Depth)
	counts, err = e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.Zero(t, counts.Propagating)
	assert.Equal(t, 2, c.page("/c").Depth)
	assert.Equal(t, 3, c.page("/d2").Depth)
}
