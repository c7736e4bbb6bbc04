package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

func TestSealWritesTheIndexIntoTheSnapshotDirectory(t *testing.T) {
	f := newFixture(t)
	in := activities.SealInput{
		Job:   activities.Job{Ident: "abc123", URL: "https://example.com/", SnapshotID: "abc123"},
		State: model.StateFinished,
		Results: []model.ArchiveResult{
			{Plugin: "wget", Hook: "on_Snapshot__06_wget.bg.sh", Background: true, Status: model.StatusSucceeded, OutputStr: "1 file", Attempts: 1},
		},
	}

	rep, err := f.engine.Seal(context.Background(), in)
	require.NoError(t, err)
	dir := filepath.Join(f.archive, "snapshots", "abc123")
	assert.Equal(t, []string{filepath.Join(dir, "index.json"), filepath.Join(dir, "index.jsonl")}, rep.Files)
	b, err := os.ReadFile(filepath.Join(dir, "index.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2)
	var ar map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &ar))
	assert.Equal(t, "ArchiveResult", ar["type"])
	assert.Equal(t, "succeeded", ar["status"])

	in.Job.SnapshotID = "../escape"
	_, err = f.engine.Seal(context.Background(), in)
	assert.ErrorContains(t, err, "must be a single path element")
}

// TestSealEndsASingleURLJobsCrawlSetup: a single-URL job is a crawl of one
// page, so its background crawl setup hook (started at discovery) gets
// SIGTERM at its seal; a crawl's start page leaves it to the crawl.
func TestSealEndsASingleURLJobsCrawlSetup(t *testing.T) {
	plugins := t.TempDir()
	writeHook(t, filepath.Join(plugins, "daemon", "on_CrawlSetup__90_daemon.bg.sh"), `
trap 'echo stopped > stopped; exit 0' TERM
echo started > started
echo "daemon up" # ready: the next hooks start
while :; do sleep 0.05; done
`)
	writeHook(t, filepath.Join(plugins, "page", "on_Snapshot__10_page.sh"), "exit 0\n")
	e := pageEngine(t, plugins, nil)
	ctx := context.Background()
	daemonDir := func(ident string) string { return filepath.Join(e.crawlDir(ident), "daemon") }
	waitFile := func(path string) {
		t.Helper()
		require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, 10*time.Second, 10*time.Millisecond, path)
	}

	for _, crawlPage := range []bool{false, true} {
		ident := "single"
		if crawlPage {
			ident = "crawlseed"
		}
		job := activities.Job{Ident: ident, URL: "http://site.test/", SnapshotID: ident, CrawlPage: crawlPage}
		_, err := e.Discover(ctx, activities.DiscoverInput{Ident: ident, SnapshotID: ident, URL: job.URL})
		require.NoError(t, err)
		waitFile(filepath.Join(daemonDir(ident), "started"))

		_, err = e.Seal(ctx, activities.SealInput{Job: job, State: model.StateFinished})
		require.NoError(t, err)
		_, err = os.Stat(filepath.Join(daemonDir(ident), "stopped"))
		if crawlPage {
			assert.True(t, os.IsNotExist(err), "a crawl's start page does not end the crawl's setup hooks")
		} else {
			assert.NoError(t, err, "the seal waited for the setup hook's SIGTERM exit")
		}
	}
	require.NoError(t, e.TeardownCrawl(ctx, "crawlseed"))
	waitFile(filepath.Join(daemonDir("crawlseed"), "stopped"))
}
