//go:build dev

package devtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/crawltest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestURLListCrawlOnDevServer runs a URL-list crawl (CrawlInput.URLList)
// on a real server: the list's pages are the start pages, no start-page
// snapshot runs, every page ends once, and the history replays (with
// ARCHIVEFLOW_RECORD_HISTORIES=1 it is kept for TestReplayRecordedHistories).
func TestURLListCrawlOnDevServer(t *testing.T) {
	e := start(t)
	q := e.queue + "-urllist"
	const pages = 40
	fake := crawltest.New(pages, 3)
	fakeCrawlWorker(t, e.c, q, fake)
	in := crawlInput("devtesturllist", q, 4, 8000)
	in.URLList = &activities.URLList{URL: "http://lists.test/urls.txt", MaxBytes: 1 << 20, MaxURLs: 100, FetchTimeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	run, _ := finishedCrawl(ctx, t, e.c, q, in, fake, pages)

	h := history(ctx, t, e.c, in.Crawl.Job.Ident, run.GetRunID())
	var types []string
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types = append(types, a.ActivityType.GetName())
		}
		assert.Nil(t, ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(), "a URL-list crawl runs no start-page snapshot")
	}
	require.NotEmpty(t, types)
	assert.Equal(t, "SeedURLList", types[0])
	replayCrawl(t, h)
	if os.Getenv("ARCHIVEFLOW_RECORD_HISTORIES") == "1" {
		data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
		require.NoError(t, err)
		name := fmt.Sprintf("%s.v%d.json", t.Name(), workflows.InputComplete)
		require.NoError(t, os.WriteFile(filepath.Join("..", "testdata", name), data, 0o644))
	}
}

// TestURLListCrawlRetryOnDevServer retries a URL-list crawl whose page 1
// (the list's first URL) failed: the retry runs page 1 again as an
// ordinary page and schedules no SeedURLList (the list is not downloaded
// or seeded again); its history replays and is recorded for the replay
// test (with the recording of a retry from before the change, which
// seeded the list again: both replay).
func TestURLListCrawlRetryOnDevServer(t *testing.T) {
	e := start(t)
	q := e.queue + "-urllistretry"
	const pages = 20
	fake := crawltest.New(pages, 3)
	fake.Failing = map[int64]bool{1: true}
	fakeCrawlWorker(t, e.c, q, fake)
	in := crawlInput("devtesturllistretry", q, 4, 8000)
	in.URLList = &activities.URLList{URL: "http://lists.test/urls.txt", MaxBytes: 1 << 20, MaxURLs: 100, FetchTimeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	retry, st := retriedCrawl(ctx, t, e.c, in, fake, 1, nil)
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Zero(t, st.Counts.Failed)
	r := fake.Report()
	assert.Equal(t, int64(pages), r.Done)
	assert.Equal(t, 2, r.PageRuns[1], "page 1 ran again as an ordinary page")
	h := history(ctx, t, e.c, in.Crawl.Job.Ident, retry.GetRunID())
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			assert.NotEqual(t, "SeedURLList", a.ActivityType.GetName(), "the retry seeds the list again")
		}
	}
	replayCrawl(t, h)
	recordCrawlAs(t, h, "retry", "urllistseeded")
}

// TestURLListCutShortOnDevServer: a URL-list crawl whose SeedURLList
// failed for good after seeding page 1 of 3 (the list cut short: its
// frontier marks it partial) fails; its retry, with no failed page, and
// its continue each seed the rest of the list (a second SeedURLList) and
// crawl every page once. Both histories replay and are recorded for the
// replay test.
func TestURLListCutShortOnDevServer(t *testing.T) {
	e := start(t)
	for _, cont := range []bool{false, true} {
		which := map[bool]string{false: "retry", true: "continue"}[cont]
		t.Run(which, func(t *testing.T) {
			q := e.queue + "-urllistcut" + which
			const pages = 20
			fake := crawltest.New(pages, 3)
			fake.CutList = 1
			fakeCrawlWorker(t, e.c, q, fake)
			in := crawlInput("devtesturllistcut"+which, q, 4, 8000)
			in.URLList = &activities.URLList{URL: "http://lists.test/urls.txt", MaxBytes: 1 << 20, MaxURLs: 100, FetchTimeout: 10 * time.Second}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			opts := client.StartWorkflowOptions{ID: in.Crawl.Job.Ident, TaskQueue: in.TaskQueue}
			run, err := e.c.ExecuteWorkflow(ctx, opts, workflows.CrawlWorkflow, in)
			require.NoError(t, err)
			var st workflows.CrawlStatus
			require.NoError(t, run.Get(ctx, &st))
			require.Equal(t, model.StateFailed, st.State)
			assert.Contains(t, st.Error, "url list")
			require.True(t, st.Counts.ListPartial, "the frontier marks the list cut short")
			require.Equal(t, int64(1), fake.Report().Known)

			in.Settings = st.Settings
			in.Rerun = &workflows.CrawlRerun{PreviousRunID: run.GetRunID(), SettingsVersion: st.SettingsVersion, Rules: st.Rules,
				Continue: cont, ListPartial: true}
			if cont {
				in.Rerun.Pages = st.Counts.Ready
			}
			rerun, err := e.c.ExecuteWorkflow(ctx, opts, workflows.CrawlWorkflow, in)
			require.NoError(t, err)
			st = workflows.CrawlStatus{}
			require.NoError(t, rerun.Get(ctx, &st))
			assert.Equal(t, model.StateFinished, st.State, st.Error)
			assert.False(t, st.Counts.ListPartial)
			r := fake.Report()
			assert.Equal(t, 2, r.ListCalls, "the rerun seeds the rest of the list")
			assert.Equal(t, int64(pages), r.Done, "every page is crawled")
			assert.Empty(t, r.Twice)
			for id, n := range r.PageRuns {
				assert.Equal(t, 1, n, "page %d runs once", id)
			}
			h := history(ctx, t, e.c, in.Crawl.Job.Ident, rerun.GetRunID())
			replayCrawl(t, h)
			recordCrawlAs(t, h, which, "urllistresume")
		})
	}
}
