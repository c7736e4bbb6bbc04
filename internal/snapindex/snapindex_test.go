package snapindex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

func TestWriteListsEveryHookWithItsFinalResult(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snapshots", "abc")
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	results := []model.ArchiveResult{
		{Plugin: "title", Hook: "on_Snapshot__10_title.sh", Step: 1, Status: model.StatusSucceeded, OutputStr: "Example <Domain>",
			Attempts: 1, StartedAt: t0, EndedAt: t0.Add(1500 * time.Millisecond),
			Outputs: []model.OutputFile{{Path: "title.txt", Size: 14}}, OutputBytes: 14},
		{Plugin: "wget", Hook: "on_Snapshot__06_wget.bg.sh", Step: 0, Background: true, Status: model.StatusSucceeded,
			OutputStr: "3 files", OutputJSON: json.RawMessage(`{"files":3}`), Attempts: 2, ExitCode: 0,
			StartedAt: t0, EndedAt: t0.Add(9 * time.Second)},
		{Plugin: "pdf", Hook: "on_Snapshot__52_pdf.sh", Step: 5, Status: model.StatusFailed, Error: "chrome crashed", Attempts: 3, ExitCode: 1,
			StartedAt: t0, EndedAt: t0.Add(time.Second)},
		{Plugin: "favicon", Hook: "on_Snapshot__11_favicon.sh", Step: 1, Status: model.StatusSkipped, OutputStr: "disabled by configuration"},
	}
	snap := Snapshot{ID: "abc", URL: "https://example.com/?a=1&b=2", State: model.StateFinished, SealedAt: t0.Add(10 * time.Second)}

	paths, err := Write(dir, snap, results)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, JSONFile), filepath.Join(dir, JSONLFile)}, paths)

	f, err := os.Open(filepath.Join(dir, JSONLFile))
	require.NoError(t, err)
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		lines = append(lines, m)
	}
	require.NoError(t, sc.Err())
	require.Len(t, lines, 1+len(results), "the Snapshot, then one ArchiveResult per hook")
	assert.Equal(t, "Snapshot", lines[0]["type"])
	assert.Equal(t, "abc", lines[0]["id"])
	assert.Equal(t, "https://example.com/?a=1&b=2", lines[0]["url"], "no HTML escaping of the URL")
	assert.Equal(t, "sealed", lines[0]["status"])
	assert.Equal(t, "finished", lines[0]["archiveflow_state"])

	wget := lines[2]
	assert.Equal(t, "ArchiveResult", wget["type"])
	assert.Equal(t, "abc", wget["snapshot_id"])
	assert.Equal(t, "wget", wget["plugin"])
	assert.Equal(t, "on_Snapshot__06_wget.bg.sh", wget["hook_name"])
	assert.Equal(t, "succeeded", wget["status"])
	assert.Equal(t, "3 files", wget["output_str"])
	assert.Equal(t, map[string]any{"files": 3.0}, wget["output_json"])
	assert.Equal(t, true, wget["background"])
	assert.Equal(t, 2.0, wget["attempts"])
	assert.Equal(t, 9000.0, wget["duration_ms"])
	assert.Equal(t, "2026-11-22T10:00:00Z", wget["start_ts"])
	assert.Equal(t, "2026-11-22T10:00:09Z", wget["end_ts"])

	title := lines[1]
	assert.Equal(t, []any{map[string]any{"path": "title.txt", "size": 14.0}}, title["output_files"])
	assert.Equal(t, 14.0, title["output_size"])
	assert.Equal(t, "chrome crashed", lines[3]["error"])
	assert.Nil(t, lines[4]["start_ts"], "a hook that never ran has no start time")
	assert.Equal(t, 0.0, lines[4]["duration_ms"])

	var doc struct {
		ID             string           `json:"snapshot_id"`
		State          string           `json:"archiveflow_state"`
		ArchiveResults []map[string]any `json:"archive_results"`
	}
	b, err := os.ReadFile(filepath.Join(dir, JSONFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "abc", doc.ID)
	assert.Equal(t, "finished", doc.State)
	require.Len(t, doc.ArchiveResults, len(results))
	assert.Equal(t, lines[2], doc.ArchiveResults[1], "index.json holds the same records")
}

// TestWriteHasTheHooksTitleAndTags: the Snapshot line and index.json carry
// the title the hooks set (the one that ended last) and every Tag name;
// each ArchiveResult its count of unknown records.
func TestWriteHasTheHooksTitleAndTags(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	results := []model.ArchiveResult{
		{Plugin: "custom", Hook: "on_Snapshot__70_custom.sh", Step: 7, Status: model.StatusSucceeded,
			Title: "Set Later", Tags: []string{"sci-fi"}, Unknown: 2, EndedAt: t0.Add(2 * time.Second)},
		{Plugin: "title", Hook: "on_Snapshot__50_title.sh", Step: 5, Status: model.StatusSucceeded,
			Title: "From The Page", Tags: []string{"news", "sci-fi"}, EndedAt: t0.Add(time.Second)},
		{Plugin: "wget", Hook: "on_Snapshot__06_wget.bg.sh", Step: 0, Status: model.StatusSucceeded, EndedAt: t0.Add(9 * time.Second)},
	}
	_, err := Write(dir, Snapshot{ID: "abc", URL: "https://example.com/", State: model.StateFinished, SealedAt: t0}, results)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, JSONLFile))
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	var snap, custom, wget map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &snap))
	require.NoError(t, json.Unmarshal(lines[1], &custom))
	require.NoError(t, json.Unmarshal(lines[3], &wget))
	assert.Equal(t, "Set Later", snap["title"], "the title of the result that ended last")
	assert.Equal(t, []any{"news", "sci-fi"}, snap["tags"])
	assert.Equal(t, 2.0, custom["unknown_records"])
	assert.NotContains(t, wget, "unknown_records")
	var doc map[string]any
	b, err = os.ReadFile(filepath.Join(dir, JSONFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "Set Later", doc["title"])
	assert.Equal(t, []any{"news", "sci-fi"}, doc["tags"])
}

func TestWriteReplacesAnEarlierIndex(t *testing.T) {
	dir := t.TempDir()
	snap := Snapshot{ID: "abc", URL: "https://example.com/", State: model.StateFailed, Error: "every hook failed"}
	_, err := Write(dir, snap, []model.ArchiveResult{{Plugin: "a", Hook: "on_Snapshot__10_a.sh", Status: model.StatusFailed}})
	require.NoError(t, err)
	snap.State, snap.Error = model.StateFinished, ""
	_, err = Write(dir, snap, nil)
	require.NoError(t, err)

	b, err := os.ReadFile(filepath.Join(dir, JSONLFile))
	require.NoError(t, err)
	assert.Equal(t, 1, len(splitLines(b)), "only the Snapshot line: the earlier results are gone")
	assert.Contains(t, string(b), `"archiveflow_state":"finished"`)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary files left")
}

// TestWriteNeverFollowsALinkOutOfTheSnapshot: a hook that linked the
// index files out of SNAP_DIR, or replaced SNAP_DIR with a link, cannot
// make the seal write (or read) outside the snapshot.
func TestWriteNeverFollowsALinkOutOfTheSnapshot(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o644))
	snap := Snapshot{ID: "abc", URL: "https://example.com/", State: model.StateFinished}

	dir := t.TempDir()
	require.NoError(t, os.Symlink(victim, filepath.Join(dir, JSONFile)))
	require.NoError(t, os.Symlink(filepath.Join(outside, "new.jsonl"), filepath.Join(dir, JSONLFile)))
	_, err := Write(dir, snap, nil)
	require.NoError(t, err)
	for _, name := range []string{JSONFile, JSONLFile} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "%s: the link is replaced by the index", name)
	}
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b), "the link's target is untouched")

	linked := filepath.Join(t.TempDir(), "abc")
	require.NoError(t, os.Symlink(outside, linked))
	_, err = Write(linked, snap, nil)
	assert.ErrorContains(t, err, linked+" is a symbolic link, not followed")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing written where SNAP_DIR's link points")
	assert.Equal(t, "victim.txt", entries[0].Name())
}

func TestWriteRefusesASnapshotWithoutIdentity(t *testing.T) {
	_, err := Write(t.TempDir(), Snapshot{URL: "https://example.com/"}, nil)
	assert.ErrorContains(t, err, "snapshot id and url must not be empty")
}

func splitLines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// A crawl page attempt's Line is index.json's document on one line, the
// page's id first, and ParseLine reads back what Read reads from a
// written index.
func TestLineIsTheDocumentOnOneLine(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	results := []model.ArchiveResult{
		{Plugin: "pagefetch", Hook: "on_Snapshot__21_pagefetch.sh", Step: 2, Status: model.StatusFailed, Error: "HTTP 404 <gone>",
			Attempts: 2, ExitCode: 1, StartedAt: t0, EndedAt: t0.Add(time.Second), OutputJSON: json.RawMessage(`{"status":404}`)},
		{Plugin: "title", Hook: "on_Snapshot__53_title.sh", Step: 5, Status: model.StatusSucceeded, OutputStr: "A & B", Title: "A & B",
			Attempts: 2, Unknown: 1, StartedAt: t0, EndedAt: t0},
	}
	snap := Snapshot{ID: "crawl1-p12", URL: "https://example.com/?a=1&b=2", Page: 12, Depth: 3, State: model.StateFailed,
		Error: "pagefetch: HTTP 404", SealedAt: t0}
	line, err := Line(snap, results)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(line, []byte(`{"page":12,"snapshot_id":"crawl1-p12",`)), "%s", line)
	assert.Equal(t, 1, bytes.Count(line, []byte("\n")))
	assert.True(t, bytes.HasSuffix(line, []byte("\n")))
	assert.Contains(t, string(line), `"url":"https://example.com/?a=1&b=2"`, "no HTML escaping")

	gotSnap, got, err := ParseLine(line)
	require.NoError(t, err)
	dir := t.TempDir()
	_, err = Write(dir, snap, results)
	require.NoError(t, err)
	readSnap, read, err := Read(dir)
	require.NoError(t, err)
	assert.Equal(t, read, got, "the same results as the written index")
	assert.Equal(t, "A & B", gotSnap.Title)
	assert.Equal(t, "A & B", readSnap.Title)
	assert.Equal(t, int64(12), gotSnap.Page)
	readSnap.Page = 12
	assert.Equal(t, readSnap, gotSnap)
	doc, err := os.ReadFile(filepath.Join(dir, JSONFile))
	require.NoError(t, err)
	assert.NotContains(t, string(doc), `"page"`, "index.json keeps ArchiveBox's shape")

	_, _, err = ParseLine([]byte(`{"page":12,"snapshot_id":"crawl1-p12","url":"x"`))
	assert.Error(t, err, "a torn line")
}
