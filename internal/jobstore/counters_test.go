package jobstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/abbot"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// TestCrawlCountersReadByArchiveBot: a recursive crawl of a small site
// with a redirect, requisites (one shared by two pages, one missing), a
// page that answers 503 once and a page that is 404, read after every step
// the way ArchiveBot's `!status` reads the job (abbot, Job#to_status):
// queued (items_queued - items_downloaded) is the pages still waiting,
// never negative and 0 at the end; errors are the 4xx and 5xx answers;
// the bytes are the bytes fetched; every recorded page moves heartbeat and
// ts.
func TestCrawlCountersReadByArchiveBot(t *testing.T) {
	ctx := context.Background()
	s, rs, rdb := newRedisStore(t)
	f, err := frontier.New(rdb, rs.Keys(), frontier.Options{})
	require.NoError(t, err)
	cs := &CrawlStore{RedisStore: s, Frontier: f}
	bot := abbot.Bot{Redis: rdb}
	const ident = "crawl1"
	site := "http://site.example"
	require.NoError(t, rs.CreateJob(ctx, rkeys.Job{Ident: ident, URL: site + "/", FetchDepth: model.FetchInf,
		Settings: model.Settings{Concurrency: 2}, WorkflowID: ident}))
	require.NoError(t, rs.SetState(ctx, ident, model.StateActive))

	figures := func(wantQueued int64) abbot.Figures {
		t.Helper()
		fg, err := bot.JobFigures(ctx, ident)
		require.NoError(t, err)
		assert.Equal(t, wantQueued, fg.Queued, "!status: queued = the pages waiting")
		return fg
	}
	beat := func() (string, string) {
		v := rdb.HMGet(ctx, ident, "heartbeat", "ts").Val()
		hb, _ := v[0].(string)
		ts, _ := v[1].(string)
		return hb, ts
	}
	complete := func(p activities.PageSpec, status string, rs []model.Response) {
		t.Helper()
		hb, _ := beat()
		_, err := cs.Complete(ctx, ident, p.ID, p.Attempt, status, "", time.Time{}, activities.Tally(rs))
		require.NoError(t, err)
		after, ts := beat()
		assert.Greater(t, abbot.RubyToI(after), abbot.RubyToI(hb), "a recorded page is a heartbeat")
		assert.NotEmpty(t, ts)
	}

	seed, err := cs.SeedCrawl(ctx, activities.SeedCrawlInput{Ident: ident, URL: site + "/", MaxDepth: -1, PageAttempts: 2, Token: "seed"})
	require.NoError(t, err)
	require.NotNil(t, seed.Page)
	figures(1)
	_, err = cs.Discover(ctx, ident, seed.Page.ID, seed.Page.Attempt, 0, []activities.Link{{URL: site + "/a"}, {URL: site + "/b"}, {URL: site + "/missing"}})
	require.NoError(t, err)
	complete(*seed.Page, activities.PageSucceeded, []model.Response{
		{URL: site + "/", Status: 301, Bytes: 100},
		{URL: site + "/home", Status: 200, Bytes: 5000},
		{URL: site + "/site.css", Status: 200, Bytes: 1000, Requisite: true},
		{URL: site + "/logo.png", Status: 404, Bytes: 50, Requisite: true},
	})
	figures(3) // /a, /b, /missing; a redirect and requisites never wait

	pages, _, err := cs.Claim(ctx, ident, 10, "c1", 0, 0)
	require.NoError(t, err)
	require.Len(t, pages, 3)
	figures(3) // claimed pages still wait
	byURL := map[string]activities.PageSpec{}
	for _, p := range pages {
		byURL[p.URL] = p
	}
	complete(byURL[site+"/a"], activities.PageSucceeded, []model.Response{
		{URL: site + "/a", Status: 200, Bytes: 2000},
		{URL: site + "/site.css", Status: 200, Bytes: 1000, Requisite: true}, // counted once per crawl
	})
	figures(2)
	complete(byURL[site+"/b"], activities.PageTransient, []model.Response{{URL: site + "/b", Status: 503, Bytes: 10}})
	figures(2) // /b waits for its next attempt
	complete(byURL[site+"/missing"], activities.PageFailed, []model.Response{{URL: site + "/missing", Status: 404, Bytes: 30}})
	figures(1)
	pages, _, err = cs.Claim(ctx, ident, 10, "c2", 0, 0)
	require.NoError(t, err)
	require.Len(t, pages, 1)
	complete(pages[0], activities.PageSucceeded, []model.Response{{URL: site + "/b", Status: 200, Bytes: 700}})

	fg := figures(0)
	h := rdb.HGetAll(ctx, ident).Val()
	assert.Equal(t, abbot.RubyToI(h["r4xx"])+abbot.RubyToI(h["r5xx"]), fg.Errors, "errors = 4xx + 5xx")
	assert.EqualValues(t, 3, fg.Errors, "logo.png 404, /b's 503, /missing 404")
	assert.Equal(t, "5", h["items_downloaded"], "301, /home, site.css once, /a, /b")
	assert.Equal(t, "8890", h["bytes_downloaded"], "every byte fetched (site.css once)")
	assert.Equal(t, 0.01, fg.MB)
	st, err := bot.Status(ctx, ident)
	require.NoError(t, err)
	assert.Contains(t, st, "In progress. Downloaded 0.01 MB, 3 errors, 0 queued.")
}

// TestPipelineIDNamesTheProcessThatRunsTheHooks: with several worker
// processes, the job's state is written by whichever process ran the
// workflow task (a local activity), but pipeline_id names the process that
// serves the claimed host queue, where the hooks run; with no live record
// for that queue, the writing process.
func TestPipelineIDNamesTheProcessThatRunsTheHooks(t *testing.T) {
	ctx := context.Background()
	s, rs, rdb := newRedisStore(t) // this process: pipeline "abcdef"
	const ident = "job-pid"
	require.NoError(t, rs.CreateJob(ctx, rkeys.Job{Ident: ident, URL: "https://example.com/", FetchDepth: model.FetchShallow,
		Settings: model.Settings{Concurrency: 1}, WorkflowID: ident}))
	stats, err := rkeys.CollectHostStats(t.TempDir())
	require.NoError(t, err)
	other := rkeys.Pipeline{ID: rkeys.PipelineID("w2", "w2.example", 7), Hostname: "w2", FQDN: "w2.example", PID: 7,
		TaskQueues: []string{"q", "q@w2-7"}, Status: "running", StartedAt: time.Now(), Stats: stats}
	require.NoError(t, rs.RegisterPipeline(ctx, other))

	require.NoError(t, s.SetJobState(ctx, activities.JobStateInput{Ident: ident, State: model.StateActive, WorkflowID: ident, RunID: "r1", TaskQueue: "q@w2-7", Key: "k1"}))
	assert.Equal(t, rkeys.PipelineMember(other.ID), rdb.HGet(ctx, ident, "pipeline_id").Val(), "the host queue's process")
	require.NoError(t, s.SetJobState(ctx, activities.JobStateInput{Ident: ident, State: model.StateActive, WorkflowID: ident, RunID: "r1", TaskQueue: "q@gone-1", Key: "k2"}))
	assert.Equal(t, "pipeline:abcdef", rdb.HGet(ctx, ident, "pipeline_id").Val(), "no live record: the writing process")
}
