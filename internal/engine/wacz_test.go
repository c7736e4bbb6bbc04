package engine

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/captures"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/snapindex"
	"github.com/archiveflow/archiveflow/internal/wacz"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// writeOriginWARC writes a WARC holding one 200 response for u, dated at.
func writeOriginWARC(t *testing.T, path, u string, at time.Time) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.Create(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	body := "<html><title>Origin</title>hello</html>"
	_, err = warc.NewWriter(f).Write(warc.Record{Type: "response", Date: at, TargetURI: u, ContentType: "application/http;msgtype=response",
		Block: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body)})
	require.NoError(t, err)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// TestTheSealWritesTheCapturesAndTheJobsWACZ: a single-URL job's seal adds
// the capture plugins' files of a capture's kind, from hooks that
// succeeded, as resource records referring to the page's capture; writes
// the job's WACZ (which validates and indexes them) and names both in the
// snapshot's index; the report says where, for the workflow to record.
func TestTheSealWritesTheCapturesAndTheJobsWACZ(t *testing.T) {
	f := newFixture(t)
	f.engine.cfg.SealWACZ = true
	f.engine.cfg.Captures = []string{"screenshot", "pdf", "dom"}
	const u = "https://example.com/"
	dir := filepath.Join(f.archive, "snapshots", "abc123")
	fetched := time.Date(2026, 11, 26, 10, 0, 0, 250000000, time.UTC)
	writeOriginWARC(t, filepath.Join(dir, "wget", "warc", "archive.warc.gz"), u, fetched)
	png := []byte("\x89PNG\r\n\x1a\nnot really a png")
	writeFile(t, filepath.Join(dir, "screenshot", "screenshot.png"), png)
	writeFile(t, filepath.Join(dir, "screenshot", "chrome.log"), []byte("log"))
	writeFile(t, filepath.Join(dir, "pdf", "output.pdf"), []byte("%PDF-1.4 failed half"))
	writeFile(t, filepath.Join(dir, "title", "title.txt"), []byte("Origin\n"))
	shot := time.Date(2026, 11, 26, 10, 0, 5, 0, time.UTC)
	in := activities.SealInput{
		Job:   activities.Job{Ident: "abc123", URL: u, SnapshotID: "abc123"},
		State: model.StateFinished,
		Results: []model.ArchiveResult{
			{Plugin: "screenshot", Hook: "on_Snapshot__51_screenshot.js", Status: model.StatusSucceeded, EndedAt: shot,
				Outputs: []model.OutputFile{{Path: "chrome.log", Size: 3}, {Path: "screenshot.png", Size: int64(len(png))}}},
			{Plugin: "pdf", Hook: "on_Snapshot__52_pdf.js", Status: model.StatusFailed,
				Outputs: []model.OutputFile{{Path: "output.pdf", Size: 20}}},
			{Plugin: "wget", Hook: "on_Snapshot__61_wget.sh", Status: model.StatusSucceeded,
				Outputs: []model.OutputFile{{Path: "warc/archive.warc.gz", Size: 1}}},
		},
	}
	rep, err := f.acts.SealSnapshot(context.Background(), in)
	require.NoError(t, err)
	require.Empty(t, rep.WACZError)
	assert.Equal(t, filepath.Join(dir, "abc123.wacz"), rep.WACZ)

	// The captures WARC: the screenshot only (a log is no capture, a
	// failed hook's file is not kept as one).
	var recs []warc.Header
	var block []byte
	require.NoError(t, warc.Read(strings.NewReader(readGzip(t, filepath.Join(dir, captures.File))), func(h warc.Header, b io.Reader) error {
		recs = append(recs, h)
		if h.Type == "resource" {
			block, _ = io.ReadAll(b)
		}
		return nil
	}))
	require.Len(t, recs, 2, "warcinfo, then one resource record")
	r := recs[1]
	assert.Equal(t, "resource", r.Type)
	assert.Equal(t, "urn:screenshot:"+u, r.TargetURI)
	assert.Equal(t, u, r.Get("WARC-Refers-To-Target-URI"))
	assert.Equal(t, "2026-11-26T10:00:00.250000Z", r.Get("WARC-Refers-To-Date"), "the date of the page's own capture")
	assert.Equal(t, "image/png", r.Get("Content-Type"))
	assert.Equal(t, png, block, "the hook's bytes as written")

	// The WACZ validates and indexes the page and the capture.
	got, err := wacz.Validate(rep.WACZ)
	require.NoError(t, err)
	assert.Equal(t, 2, got.Entries)
	assert.Equal(t, 1, got.Pages)

	snap, _, err := snapindex.Read(dir)
	require.NoError(t, err)
	assert.Equal(t, "abc123.wacz", snap.WACZ)
	assert.Equal(t, captures.File, snap.Captures)

	ar := rep.Archive("abc123")
	assert.Equal(t, rep.WACZ, ar.WACZ)
	assert.Positive(t, ar.Bytes)
	assert.NotEmpty(t, ar.Host, "the host that has it")

	// A seal that finds no WARC says so in the index and the job's hash,
	// and still seals.
	in.Job.Ident, in.Job.SnapshotID = "nowarc1", "nowarc1"
	rep, err = f.acts.SealSnapshot(context.Background(), in)
	require.NoError(t, err)
	assert.Empty(t, rep.WACZ)
	assert.Contains(t, rep.WACZError, "no WARC in")
	snap, _, err = snapindex.Read(filepath.Join(f.archive, "snapshots", "nowarc1"))
	require.NoError(t, err)
	assert.Contains(t, snap.WACZError, "no WARC in")
	assert.Equal(t, rep.WACZError, rep.Archive("nowarc1").Error)
}
