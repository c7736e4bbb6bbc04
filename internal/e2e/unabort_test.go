//go:build dev

package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/testsite"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestUnabortResumesACrawl is issue 25.9: a crawl aborted (starter abort)
// half-way is un-aborted within its retention (redis.retain_aborted,
// raised here from ArchiveBot's 5 s) by `starter unabort IDENT --wait`:
// the new run goes on from the pages the abort left and fetches none of
// the pages the aborted run had done; together the two runs fetch every
// page of the site's scope, and the job is counted once as completed, its
// jobs_aborted taken back. A finished job is refused (exit 4).
func TestUnabortResumesACrawl(t *testing.T) {
	const depth = 3
	srv := crawlSite(t, 400)
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Redis.RetainAborted = 10 * time.Minute
	})
	s.StartPools(t, env)
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")

	rulesFile, want := countedCrawlRules(t, srv, depth)

	srv.Reset()
	mark := srv.RequestCount()
	res := runStarter(t, bin, s, "submit", srv.StartURL(), "--depth", strconv.Itoa(depth),
		"--concurrency", "2", "--user-agent", crawlUA, "--rules", rulesFile)
	require.Equal(t, 0, res.code, "starter submit: %s%s", res.stdout, res.stderr)
	id, _, err := ident.FromURL(srv.StartURL())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f, err := frontier.New(s.Redis, s.Store.Keys(), frontier.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := f.Counts(ctx, id)
		return err == nil && c.Done >= 30
	}, 5*time.Minute, 100*time.Millisecond, "the crawl gets going")
	res = runStarter(t, bin, s, "abort", id, "--reason", "operator mistake")
	require.Equal(t, 0, res.code, "starter abort: %s%s", res.stdout, res.stderr)
	var st workflows.CrawlStatus
	require.NoError(t, s.Client.GetWorkflow(ctx, id, "").Get(ctx, &st))
	require.Equal(t, model.StateAborted, st.State, st.Error)
	require.Equal(t, "1", s.Redis.Get(ctx, "jobs_aborted").Val())

	firstLog := srv.RequestsSince(mark)
	first := testsite.Requested(firstLog, func(r testsite.Request) bool { return r.UserAgent == crawlUA })
	done := map[string]bool{}
	ready := 0
	for _, p := range crawlPages(t, s, id) {
		switch p.State {
		case frontier.StateDone:
			done[p.URL] = true
		case frontier.StateReady:
			ready++
		}
		assert.NotEqual(t, frontier.StateClaimed, p.State, "%s: an aborted crawl holds no claim", p.URL)
	}
	require.Positive(t, ready, "the abort left pages to fetch")
	require.Less(t, len(done), len(want.Pages), "aborted half-way")

	res = runStarter(t, bin, s, "retry", id)
	assert.Equal(t, 4, res.code, "retry refuses an aborted job: %s", res.stderr)
	assert.Contains(t, res.stderr, "starter unabort")

	mark = srv.RequestCount()
	res = runStarter(t, bin, s, "unabort", id, "--wait")
	require.Equal(t, 0, res.code, "starter unabort --wait: %s%s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "continuing crawl "+id)
	assert.Contains(t, res.stdout, id+"  FINISHED ")
	second := testsite.Requested(srv.RequestsSince(mark), func(r testsite.Request) bool { return r.UserAgent == crawlUA })
	again := 0
	for u := range second.Pages {
		assert.False(t, done[u], "%s was done by the aborted run: the un-abort must not fetch it again", u)
		if _, ok := first.Pages[u]; ok {
			again++ // its fetch was cut by the abort: not done, fetched now
		}
	}
	assertFetchedAll(t, want, first, second)

	st = workflows.CrawlStatus{}
	require.NoError(t, s.Client.GetWorkflow(ctx, id, "").Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.True(t, st.Counts.Finished())
	v, err := s.Store.GetJob(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, model.StateFinished, v.State)
	assert.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val(), "the job is counted once")
	assert.Equal(t, "0", s.Redis.Get(ctx, "jobs_aborted").Val(), "the abort is taken back")
	assert.False(t, s.Redis.HExists(ctx, id, "aborted").Val())

	res = runStarter(t, bin, s, "unabort", id)
	assert.Equal(t, 4, res.code, "a finished job is not un-aborted: %s", res.stderr)
	t.Logf("aborted run: %d pages done (%d requested); un-abort: %d pages, %d of them cut by the abort; expected in all: %d",
		len(done), len(first.Pages), len(second.Pages), again, len(want.Pages))
}
