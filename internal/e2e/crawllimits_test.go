//go:build dev

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/internal/testsite"
	"github.com/archiveflow/archiveflow/workflows"
)

// countedCrawlRules writes a --rules file for a crawl whose page requests
// a test counts — the site's endless calendar and its redirects are
// skipped (a redirecting page's fetch requests its target too) — and
// returns it with the pages such a crawl to depth fetches.
func countedCrawlRules(t *testing.T, srv *testsite.Server, depth int) (string, *testsite.Expectation) {
	t.Helper()
	calendar, err := srv.CalendarSkipPattern(6)
	require.NoError(t, err)
	skips := []string{calendar, "/moved/"}
	rules := scope.Rules{}
	for _, p := range skips {
		rules = append(rules, scope.Rule{Pattern: p, Skip: scope.Bool(true)})
	}
	rulesJSON, err := json.Marshal(rules)
	require.NoError(t, err)
	rulesFile := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, os.WriteFile(rulesFile, rulesJSON, 0o600))
	want, err := srv.Expected(testsite.Scope{MaxDepth: depth, OffsiteOnce: true, Skip: skips})
	require.NoError(t, err)
	return rulesFile, want
}

// assertFetchedAll checks that the runs together fetched every expected
// page and none out of scope.
func assertFetchedAll(t *testing.T, want *testsite.Expectation, runs ...*testsite.Fetched) {
	t.Helper()
	all := map[string]int{}
	for _, f := range runs {
		for u, status := range f.Pages {
			all[u] = status
		}
	}
	diff := testsite.Compare(want.Pages, all)
	assert.Empty(t, diff.Missing, "pages never fetched")
	assert.Empty(t, diff.Extra, "pages fetched out of scope")
}

// TestCrawlPageLimitStopsExactlyAndContinues is issue 28's acceptance for
// crawl limits, through the starter binary: `submit --max-pages 100` on
// the 400-page site (depth 3: ~220 pages) fetches exactly 100 pages (the
// site's own request log: distinct page URLs; the frontier's charge and
// its DONE pages), the crawl is finished with the limit named (status,
// job hash, finish notification, jobs_completed, retention: the keys of a
// normal finish), its other pages READY; `retry --continue --wait` then
// fetches the rest: every expected page once in all, none in both runs.
func TestCrawlPageLimitStopsExactlyAndContinues(t *testing.T) {
	const depth, limit = 3, 100
	srv := crawlSite(t, 400)
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, crawlConfig)
	s.StartPools(t, env)
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")

	rulesFile, want := countedCrawlRules(t, srv, depth)
	require.Greater(t, len(want.Pages), 2*limit, "the site is bigger than the limit")

	srv.Reset()
	mark := srv.RequestCount()
	res := runStarter(t, bin, s, "submit", srv.StartURL(), "--depth", strconv.Itoa(depth), "--max-pages", strconv.Itoa(limit),
		"--concurrency", "8", "--user-agent", crawlUA, "--rules", rulesFile, "--wait")
	require.Equal(t, 0, res.code, "starter submit --wait: %s%s", res.stdout, res.stderr)
	assert.Regexp(t, regexp.MustCompile(fmt.Sprintf(`FINISHED .* — pages: %d done \(\d+ succeeded, \d+ failed\), \d+ skipped; \d+ items`, limit)), res.stdout,
		"the --wait outcome of a crawl counts its pages")
	id, _, err := ident.FromURL(srv.StartURL())
	require.NoError(t, err)
	firstLog := srv.RequestsSince(mark)
	first := testsite.Requested(firstLog, func(r testsite.Request) bool { return r.UserAgent == crawlUA })
	assert.Len(t, first.Pages, limit, "the site saw exactly %d pages requested", limit)
	for u := range first.Pages {
		assert.Contains(t, want.Pages, u, "a page of the crawl")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var st workflows.CrawlStatus
	require.NoError(t, s.Client.GetWorkflow(ctx, id, "").Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Equal(t, "page limit 100 reached", st.Limit)
	assert.EqualValues(t, limit, st.Counts.Charged)
	assert.Positive(t, st.Counts.Ready, "the rest stays READY")
	assert.Zero(t, st.Counts.Claimed)
	pages := crawlPages(t, s, id)
	done := 0
	for _, p := range pages {
		if p.State == frontier.StateDone {
			done++
			assert.Contains(t, first.Pages, p.URL, "a DONE page was requested")
		}
		if p.State == frontier.StateReady {
			assert.NotContains(t, first.Pages, p.URL, "a READY page was never requested")
		}
	}
	assert.Equal(t, limit, done, "exactly %d pages DONE", limit)

	// The keys of a normal finish, and the limit.
	v, err := s.Store.GetJob(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, model.StateFinished, v.State)
	assert.Equal(t, "page limit 100 reached", v.Limit)
	assert.EqualValues(t, limit, v.Settings.MaxPages)
	assert.False(t, v.FinishedAt.IsZero())
	assert.Positive(t, v.TTL, "the job has its retention")
	assert.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val())
	assert.True(t, s.Redis.SIsMember(ctx, "state:finished", id).Val())
	notes := s.Redis.LRange(ctx, "finish_notifications", 0, -1).Val()
	require.Len(t, notes, 1)
	var note map[string]any
	require.NoError(t, json.Unmarshal([]byte(notes[0]), &note))
	assert.Equal(t, "finished", note["state"])
	assert.Equal(t, "page limit 100 reached", note["limit"])

	res = runStarter(t, bin, s, "status", id)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Regexp(t, regexp.MustCompile(`state: +finished \(crawl\): page limit 100 reached`), res.stdout)
	assert.Contains(t, res.stdout, "limits:   100 pages")
	assert.Regexp(t, regexp.MustCompile(`hooks: +\d+ of the start page done`), res.stdout, "a crawl's hook counters are its start page's")

	// Continue: the rest, nothing twice.
	mark = srv.RequestCount()
	res = runStarter(t, bin, s, "retry", id, "--continue", "--wait")
	require.Equal(t, 0, res.code, "starter retry --continue --wait: %s%s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "continuing crawl "+id)
	assert.Contains(t, res.stdout, id+"  FINISHED ")
	second := testsite.Requested(srv.RequestsSince(mark), func(r testsite.Request) bool { return r.UserAgent == crawlUA })
	for u := range second.Pages {
		assert.NotContains(t, first.Pages, u, "fetched by the first run: the continue must not fetch it again")
	}
	assertFetchedAll(t, want, first, second)

	st = workflows.CrawlStatus{}
	require.NoError(t, s.Client.GetWorkflow(ctx, id, "").Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Empty(t, st.Limit)
	assert.Zero(t, st.Settings.MaxPages, "the continue lifted the limit")
	assert.True(t, st.Counts.Finished())
	v, err = s.Store.GetJob(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, v.Limit)
	assert.Zero(t, v.Settings.MaxPages)
	assert.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val(), "the job is counted once")
	t.Logf("first run: %d pages; continue: %d pages; expected in all: %d", len(first.Pages), len(second.Pages), len(want.Pages))

	// Once the hash has expired (redis.retain_completed), status is
	// Temporal's record: the crawl's state and page counts, the start
	// page's hooks.
	require.NoError(t, s.Redis.Del(ctx, id).Err())
	res = runStarter(t, bin, s, "status", id)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "this is Temporal's record of its workflow (completed)")
	assert.Contains(t, res.stdout, "state:    finished (crawl)")
	assert.Contains(t, res.stdout, fmt.Sprintf("pages:    %d: 0 ready, 0 claimed, %d done (%d succeeded, %d failed)",
		st.Counts.Total, st.Counts.Done, st.Counts.Succeeded, st.Counts.Failed))
	assert.Regexp(t, regexp.MustCompile(`(?m)^  STEP  HOOK\s+STATUS`), res.stdout, "the start page's hooks")
}

// TestDiskGuardStopsClaimingUntilSpaceIsBack: a worker whose archive disk
// is under worker.min_free_disk (an injected reading) claims no work — a
// submitted crawl's start page is not fetched — and says so in its
// pipeline:ID record; once space is back it claims, and the crawl runs.
func TestDiskGuardStopsClaimingUntilSpaceIsBack(t *testing.T) {
	srv := crawlSite(t, testsite.MinPages)
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, func(c *config.Config) {
		crawlConfig(c)
		c.Worker.MinFreeDisk = "1GiB"
	})
	var free atomic.Int64
	free.Store(100 << 20)
	s.DiskFree = func(string) (int64, error) { return free.Load(), nil }
	s.StartPools(t, env)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reason := func() string {
		ps, err := s.Store.ListPipelines(ctx)
		require.NoError(t, err)
		for _, p := range ps {
			if r := p.Fields[rkeys.FieldNotClaiming]; r != "" {
				return r
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return reason() != "" }, time.Minute, 100*time.Millisecond, "the pipeline record says why")
	assert.Equal(t, "archive disk low: 100 MiB free, under worker.min_free_disk 1 GiB: not claiming work", reason())

	srv.Reset()
	mark := srv.RequestCount()
	job := s.SubmitCrawl(t, srv.StartURL(), 1, func(r *submit.Request) { r.Settings.UserAgent = crawlUA })
	// The start page's host claim is scheduled on the shared queue ...
	claimState := func() enumspb.PendingActivityState {
		desc, err := s.Client.DescribeWorkflowExecution(ctx, workflows.CrawlSeedID(job.Ident), "")
		if err != nil {
			return enumspb.PENDING_ACTIVITY_STATE_UNSPECIFIED
		}
		for _, a := range desc.GetPendingActivities() {
			if strings.HasPrefix(a.GetActivityType().GetName(), "Claim") { // ClaimHost, ClaimAndDiscover
				return a.GetState()
			}
		}
		return enumspb.PENDING_ACTIVITY_STATE_UNSPECIFIED
	}
	require.Eventually(t, func() bool { return claimState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED }, time.Minute, 100*time.Millisecond)
	// ... and no worker takes it: only time can show that something does
	// not happen.
	time.Sleep(2 * time.Second)
	assert.Equal(t, enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, claimState(), "no worker claimed the host while the disk is low")
	assert.Zero(t, srv.RequestCount()-mark, "no page fetched while the disk is low")
	v, err := s.Store.GetJob(ctx, job.Ident)
	require.NoError(t, err)
	assert.False(t, v.Final())

	free.Store(5 << 30)
	require.Eventually(t, func() bool { return reason() == "" }, time.Minute, 100*time.Millisecond, "the record clears once space is back")
	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	fetched := testsite.Requested(srv.RequestsSince(mark), func(r testsite.Request) bool { return r.UserAgent == crawlUA })
	assert.Contains(t, fetched.Pages, srv.StartURL())
	assert.Greater(t, len(fetched.Pages), 1, "the crawl ran")
}
