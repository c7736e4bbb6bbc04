package frontier

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// TestSeedList: every listed URL is one depth-0 READY page, in order, over
// several script calls; a URL given twice and a repeated call add no page.
func TestSeedList(t *testing.T) {
	e := newEnv(t, Options{Chunk: 2})
	ctx := ctxT(t)
	cfg := Config{MaxDepth: 0, MaxAttempts: 2}
	urls := []string{u("/a"), "http://other.example/b", "HTTP://SITE.example:80/a", u("/c"), "ftp://x.example/", u("/d")}
	res, err := e.f.SeedList(ctx, job, "http://lists.example/l.txt", urls, cfg)
	require.NoError(t, err)
	assert.Equal(t, 4, res.Added)
	assert.Equal(t, 1, res.Known, "the repeated URL")
	require.Len(t, res.Invalid, 1)
	assert.Equal(t, "ftp://x.example/", res.Invalid[0].URL)

	twice(t, e, func() error {
		r, err := e.f.SeedList(ctx, job, "http://lists.example/l.txt", urls, cfg)
		if err == nil {
			assert.Zero(t, r.Added, "a repeated call adds nothing")
		}
		return err
	})
	var got []Page
	for i := int64(1); i <= 4; i++ {
		p, err := e.f.PageByID(ctx, job, i)
		require.NoError(t, err)
		got = append(got, p)
	}
	want := []string{u("/a"), "http://other.example/b", u("/c"), u("/d")}
	for i, p := range got {
		assert.Equal(t, Page{ID: int64(i + 1), URL: want[i], Depth: 0, State: StateReady, AttemptsRemaining: 2}, p)
	}
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, int64(4), c.Total)
	assert.Equal(t, int64(4), c.Ready)

	// Claims take them in list order.
	ps, _, err := e.f.Claim(ctx, job, 10, "claim-1", 0)
	require.NoError(t, err)
	require.Len(t, ps, 4)
	for i, p := range ps {
		assert.Equal(t, want[i], p.URL)
	}

	// Another list or configuration: conflict, nothing written.
	_, err = e.f.SeedList(ctx, job, "http://lists.example/other.txt", urls, cfg)
	require.ErrorIs(t, err, ErrSeedConflict)
	_, err = e.f.SeedList(ctx, job, "http://lists.example/l.txt", urls, Config{MaxDepth: -1, MaxAttempts: 2})
	require.ErrorIs(t, err, ErrSeedConflict)
}

func TestSeedListCountsQueuedItems(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	cfg := Config{MaxDepth: -1, MaxAttempts: 1, QueuedField: "items_queued"}
	_, err := e.f.SeedList(ctx, job, "l", []string{u("/a")}, cfg)
	require.ErrorIs(t, err, rkeys.ErrJobNotFound, "the job hash must exist")
	requireNoKeys(t, e, "a refused seed writes nothing")

	require.NoError(t, e.rdb.HSet(ctx, e.keys.Job(job), "url", "l").Err())
	_, err = e.f.SeedList(ctx, job, "l", []string{u("/a"), u("/b"), u("/a")}, cfg)
	require.NoError(t, err)
	_, err = e.f.SeedList(ctx, job, "l", []string{u("/a"), u("/b"), u("/c")}, cfg)
	require.NoError(t, err)
	n, err := e.rdb.HGet(ctx, e.keys.Job(job), "items_queued").Int()
	require.NoError(t, err)
	assert.Equal(t, 3, n, "one queued item per page, never two for one URL")
}

func TestSeedListRejectsBadInput(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	_, err := e.f.SeedList(ctx, job, "", []string{u("/")}, Config{MaxDepth: 0, MaxAttempts: 1})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = e.f.SeedList(ctx, job, "l", []string{"not a url", ""}, Config{MaxDepth: 0, MaxAttempts: 1})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = e.f.SeedList(ctx, job, "l", []string{u("/")}, Config{MaxDepth: -2, MaxAttempts: 1})
	require.ErrorIs(t, err, ErrInvalidArgument)
	requireNoKeys(t, e, "refused seeds write nothing")
}

// TestSeedListCutShortStaysPartial: a SeedList whose script calls stop
// after the first (Redis gone mid-list) leaves its first chunk's pages and
// the list marked partial; a SeedList of the same list then adds only the
// missing URLs, in list order after the others, and clears the mark. A
// list seeded in one call is never partial.
func TestSeedListCutShortStaysPartial(t *testing.T) {
	e := newEnv(t, Options{Chunk: 2})
	ctx := ctxT(t)
	cfg := Config{MaxDepth: 0, MaxAttempts: 2}
	const list = "http://lists.example/l.txt"
	urls := numbered("http://site.example/p%d", 5)
	gone := &testredis.CutScripts{After: 1}
	e.rdb.AddHook(gone)
	_, err := e.f.SeedList(ctx, job, list, urls, cfg)
	require.ErrorIs(t, err, testredis.ErrScriptsCut)
	c, err := e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.True(t, c.ListPartial, "the list was cut short")
	assert.Equal(t, int64(2), c.Total, "the first call's pages")

	gone.SetAfter(-1)
	res, err := e.f.SeedList(ctx, job, list, urls, cfg)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Added, "only the URLs the frontier did not have")
	assert.Equal(t, 2, res.Known)
	c, err = e.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.False(t, c.ListPartial, "seeded to the end")
	assert.Equal(t, int64(5), c.Total)
	for i, x := range urls {
		p, err := e.f.Page(ctx, job, x)
		require.NoError(t, err)
		assert.Equal(t, int64(i+1), p.ID, "list order")
	}

	one := newEnv(t, Options{Chunk: 10})
	_, err = one.f.SeedList(ctx, job, list, urls, cfg)
	require.NoError(t, err)
	c, err = one.f.Counts(ctx, job)
	require.NoError(t, err)
	assert.False(t, c.ListPartial)
	fields, err := one.rdb.HGetAll(ctx, one.f.key(job, "meta")).Result()
	require.NoError(t, err)
	assert.NotContains(t, fields, "list_partial")
}
