//go:build dev

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/internal/testsite"
	"github.com/archiveflow/archiveflow/workflows"
)

// responseTally counts a site log's answers as the crawl's counters do.
func responseTally(log []testsite.Request) (ok, r5xx int64) {
	counted := map[string]bool{} // requisites count once per crawl
	for _, r := range log {
		if r.Kind == testsite.KindAsset {
			if counted[r.URL] {
				continue
			}
			counted[r.URL] = true
		}
		switch {
		case r.Status >= 200 && r.Status < 400:
			ok++
		case r.Status >= 500:
			r5xx++
		}
	}
	return ok, r5xx
}

// TestCrawlRetryFetchesOnlyTheFailedPage is issue 13.5 for crawls: a page
// that answers 500 to every attempt ends failed; once it is repaired,
// `starter retry IDENT --wait` (the binary) fetches only that page and the
// pages it now links, never the others again, and the counters move once:
// the new responses are added, items_queued ends equal to items_downloaded
// (nothing queued), jobs_completed still counts the job once. A second retry finds
// nothing failed (exit 4).
func TestCrawlRetryFetchesOnlyTheFailedPage(t *testing.T) {
	const depth = 3
	srv := crawlSite(t, testsite.MinPages)
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, crawlConfig)
	s.StartPools(t, env)
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	broken := srv.URL(testsite.PathBehind1)
	srv.Break(testsite.PathBehind1)
	// The site's always-500 and 404 pages are skipped: the broken page is
	// the crawl's only failure.
	first := runSiteCrawl(t, s, srv, depth, func(r *submit.Request) {
		r.Rules = append(r.Rules, scope.Rule{Pattern: "/(error|missing)/", Skip: scope.Bool(true)})
	}, nil)
	require.Equal(t, model.StateFinished, first.status.State, first.status.Error)
	p, ok := pageByURL(first.pages, broken)
	require.True(t, ok)
	require.Equal(t, frontier.StateDone, p.State)
	require.Equal(t, frontier.StatusFailed, p.Status, "500 on every attempt")
	_, found := pageByURL(first.pages, srv.URL(testsite.PathBehind1a))
	require.False(t, found, "only the broken page links it")
	require.EqualValues(t, 1, first.status.Counts.Failed)
	before := first.job
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val())

	srv.Repair(testsite.PathBehind1)
	mark := srv.RequestCount()
	res := runStarter(t, bin, s, "retry", first.status.Ident, "--wait")
	require.Equal(t, 0, res.code, "starter retry --wait: %s%s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "retrying 1 failed page(s) of crawl "+first.status.Ident)
	assert.Contains(t, res.stdout, broken+" (depth 2)")
	assert.Contains(t, res.stdout, first.status.Ident+"  FINISHED ")
	var st workflows.CrawlStatus
	require.NoError(t, s.Client.GetWorkflow(ctx, first.status.Ident, "").Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Zero(t, st.Counts.Failed)

	log := srv.RequestsSince(mark)
	fetched := testsite.Requested(log, func(r testsite.Request) bool { return r.UserAgent == crawlUA })
	assert.Equal(t, 200, fetched.Pages[broken], "the repaired page is fetched")
	assert.Contains(t, fetched.Pages, srv.URL(testsite.PathBehind1a), "the pages it links are crawled")
	assert.Contains(t, fetched.Pages, srv.URL(testsite.PathBehind1b))
	for u := range fetched.Pages {
		if u == broken {
			continue
		}
		_, known := pageByURL(first.pages, u)
		assert.False(t, known, "%s was crawled by the first run: the retry must not fetch it again", u)
	}
	after := crawlPages(t, s, first.status.Ident)
	for _, p := range after {
		assert.NotEqual(t, frontier.StatusFailed, p.Status, "%s", p.URL)
		assert.NotContains(t, []frontier.State{frontier.StateReady, frontier.StateClaimed}, p.State, "%s", p.URL)
	}

	v, err := s.Store.GetJob(ctx, first.status.Ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateFinished, v.State)
	// A requisite the first run counted is fetched again by the retry (a
	// new crawl setup on the host) and not counted again: the tally runs
	// over both runs' requests, each requisite URL once.
	okAll, _ := responseTally(append(srv.RequestsSince(0)[:mark:mark], log...))
	okFirst, _ := responseTally(srv.RequestsSince(0)[:mark])
	_, r5xx := responseTally(log)
	assert.Equal(t, before.ItemsDownloaded+okAll-okFirst, v.ItemsDownloaded, "the retry's responses are added once")
	assert.Equal(t, before.Responses.R5xx+r5xx, v.Responses.R5xx, "the failed attempts' 500s stay counted")
	assert.Greater(t, v.BytesDownloaded, before.BytesDownloaded)
	assert.Equal(t, v.ItemsDownloaded, v.ItemsQueued, "!status: nothing queued once the retry is done")
	assert.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val(), "the job is counted once")
	assert.Empty(t, s.Redis.Get(ctx, "jobs_failed").Val())
	f, err := frontier.New(s.Redis, s.Store.Keys(), frontier.Options{})
	require.NoError(t, err)
	keys, err := f.JobKeys(ctx, first.status.Ident)
	require.NoError(t, err)
	assert.Positive(t, s.Redis.PTTL(ctx, keys[0]).Val(), "the frontier has the job's retention again")

	res = runStarter(t, bin, s, "retry", first.status.Ident)
	assert.Equal(t, 4, res.code, "nothing failed: exit 4")
	assert.Contains(t, res.stderr, "no page failed")
	_, _, err = submit.Rerun(ctx, s.Client, f, first.status.Ident)
	require.ErrorIs(t, err, submit.ErrNothingFailed)
}

// starterResult is one run of the starter CLI.
type starterResult struct {
	code           int
	stdout, stderr string
}

// runStarter runs the starter binary bin against the stack's Temporal
// server and Redis.
func runStarter(t *testing.T, bin string, s *Stack, args ...string) starterResult {
	t.Helper()
	cmd := starterCommand(t, bin, s, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return starterExit(t, cmd, cmd.Run(), &stdout, &stderr)
}

// starterExit is how a starter command ended (err from Run or Wait).
func starterExit(t *testing.T, cmd *exec.Cmd, err error, stdout, stderr *strings.Builder) starterResult {
	t.Helper()
	res := starterResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run starter %v: %v", cmd.Args, err)
	}
	return res
}

// starterCommand is the starter binary bin set up against the stack's
// Temporal server and Redis (append to its Env to change that).
func starterCommand(t *testing.T, bin string, s *Stack, args ...string) *exec.Cmd {
	t.Helper()
	pools, err := json.Marshal(s.Config.Pools)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		// The stack's pools and queues: a job the starter submits runs
		// on the stack's workers.
		"ARCHIVEFLOW_POOLS="+string(pools),
		"ARCHIVEFLOW_JOB_TASK_QUEUE="+s.Config.Job.TaskQueue,
		"ARCHIVEFLOW_TEMPORAL_HOST_PORT="+s.Config.Temporal.HostPort,
		"ARCHIVEFLOW_TEMPORAL_NAMESPACE="+s.Config.Temporal.Namespace,
		"ARCHIVEFLOW_REDIS_URL="+s.Config.Redis.URL,
		"ARCHIVEFLOW_ARCHIVE_DIR="+s.Config.ArchiveDir,
	)
	return cmd
}
