package frontier

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/rkeys"
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
