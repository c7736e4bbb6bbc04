package engine

import (
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
)

// writeSeedAttempt writes what one attempt of the start page's snapshot
// leaves in snapDir: the fetch hook's stdout log (a Response, a link) by
// attempt id, and its WARC file holding body.
func writeSeedAttempt(t *testing.T, snapDir, attemptID, url, body string) {
	t.Helper()
	dir := filepath.Join(snapDir, "fetch")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	log := `{"type":"Response","url":"` + url + `","status":503,"bytes":4}` + "\n" +
		`{"type":"Snapshot","url":"http://site.test/` + body + `"}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "on_Snapshot__10_fetch."+attemptID+".stdout.log"), []byte(log), 0o644))
	f, err := os.Create(filepath.Join(dir, "page.warc.gz"))
	require.NoError(t, err)
	zw := gzip.NewWriter(f)
	_, err = zw.Write([]byte(body))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())
}

// TestSeedRecordsKeepATransientAttemptAside: the start page's attempt
// that waits for a later retry (SeedPageInput.Transient) moves to
// attempts/N before it is read (a repeat reads the same records), its
// WARC files into the job's WARC, once; the next attempt's records are
// its own: each response counted, each WARC file appended, once.
func TestSeedRecordsKeepATransientAttemptAside(t *testing.T) {
	e := pageEngine(t, t.TempDir(), nil)
	cr := testCrawl("fetch")
	snapDir, err := e.snapDir(cr.Job.SnapshotID)
	require.NoError(t, err)
	ctx := context.Background()
	writeSeedAttempt(t, snapDir, strings.Repeat("a", 32), "http://site.test/", "first")

	in := activities.SeedPageInput{Crawl: cr, Page: activities.PageSpec{ID: 1, URL: "http://site.test/", Attempt: 1}, Transient: true}
	recs, err := e.SeedRecords(ctx, in)
	require.NoError(t, err)
	require.Len(t, recs.Responses, 1)
	assert.Empty(t, recs.Links, "a transient attempt's links do not count")
	kept := filepath.Join(snapDir, AttemptsDir, "1", "fetch", "on_Snapshot__10_fetch."+strings.Repeat("a", 32)+".stdout.log")
	assert.FileExists(t, kept)
	assert.NoFileExists(t, filepath.Join(snapDir, AttemptsDir, "1", "fetch", "page.warc.gz"), "its WARC is in the job's")
	again, err := e.SeedRecords(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, recs.Responses, again.Responses, "a repeated activity reads the same attempt")

	writeSeedAttempt(t, snapDir, strings.Repeat("b", 32), "http://site.test/", "second")
	in.Page.Attempt, in.Transient, in.Succeeded, in.Hooks = 2, false, true, []string{"fetch/on_Snapshot__10_fetch.sh"}
	recs, err = e.SeedRecords(ctx, in)
	require.NoError(t, err)
	require.Len(t, recs.Responses, 1, "the earlier attempt's response is not read again")
	require.Len(t, recs.Links, 1)
	assert.Equal(t, "http://site.test/second", recs.Links[0].URL)
	assert.FileExists(t, kept, "the earlier attempt stays kept")

	e.Close(ctx)
	warcs, err := filepath.Glob(filepath.Join(e.cfg.ArchiveDir, "crawls", "crawl1", "warc", "*.warc.gz"))
	require.NoError(t, err)
	var all string
	for _, w := range warcs {
		all += readGzip(t, w)
	}
	assert.Equal(t, 1, strings.Count(all, "first"), "the kept attempt's WARC once, repeat or not")
	assert.Equal(t, 1, strings.Count(all, "second"), "the last attempt's WARC once")
}
