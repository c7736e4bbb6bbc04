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
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/crawltest"
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
