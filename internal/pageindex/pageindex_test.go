package pageindex

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/snapindex"
)

func attempt(page int64, n int, state model.JobState, title string, at time.Time) (snapindex.Snapshot, []model.ArchiveResult) {
	snap := snapindex.Snapshot{ID: "crawl1-p" + string(rune('0'+page)), URL: "https://example.com/p", Page: page, Depth: 1,
		State: state, SealedAt: at}
	results := []model.ArchiveResult{
		{Plugin: "pagefetch", Hook: "on_Snapshot__21_pagefetch.sh", Step: 2, Status: model.StatusSucceeded, Attempts: n,
			StartedAt: at.Add(-time.Second), EndedAt: at},
		{Plugin: "title", Hook: "on_Snapshot__53_title.sh", Step: 5, Status: model.StatusSucceeded, OutputStr: title, Title: title,
			Attempts: n, StartedAt: at, EndedAt: at},
	}
	return snap, results
}

func TestPageReadsEachAttemptOnceAcrossInstances(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pageindex")
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	a, b := NewWriter(dir, "host-1"), NewWriter(dir, "host-2")
	require.NoError(t, a.Append(attempt(2, 1, model.StateFailed, "", t0)))
	require.NoError(t, a.Append(attempt(3, 1, model.StateFinished, "Three", t0)))
	// Attempt 2 of page 2 ran twice (a repeated activity): the later line counts.
	require.NoError(t, b.Append(attempt(2, 2, model.StateFailed, "", t0.Add(time.Minute))))
	require.NoError(t, b.Append(attempt(2, 2, model.StateFinished, "Two", t0.Add(2*time.Minute))))
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())

	got, err := Page(dir, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, 1, got[0].Number())
	assert.Equal(t, model.StateFailed, got[0].Snapshot.State)
	assert.Equal(t, 2, got[1].Number())
	assert.Equal(t, model.StateFinished, got[1].Snapshot.State, "the attempt's later line")
	assert.Equal(t, "Two", got[1].Snapshot.Title)
	assert.Equal(t, int64(2), got[1].Snapshot.Page)
	require.Len(t, got[1].Results, 2)
	assert.Equal(t, "title", got[1].Results[1].Plugin)
	assert.Equal(t, t0.Add(2*time.Minute), got[1].Results[1].EndedAt)

	none, err := Page(dir, 20)
	require.NoError(t, err)
	assert.Empty(t, none, "page 20 is not page 2")
	none, err = Page(filepath.Join(t.TempDir(), "missing"), 2)
	require.NoError(t, err)
	assert.Empty(t, none)

	titles, err := Titles(dir)
	require.NoError(t, err)
	assert.Equal(t, map[int64]string{2: "Two", 3: "Three"}, titles)
}

// A worker killed during a write leaves a torn last line in its own file;
// a failed write in a live process is followed by a line of its own.
// Readers skip what does not parse.
func TestTornLinesAreSkipped(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	w := NewWriter(dir, "host-1")
	require.NoError(t, w.Append(attempt(2, 1, model.StateFinished, "Two", t0)))
	line, err := snapindex.Line(attempt(3, 1, model.StateFinished, "Three", t0))
	require.NoError(t, err)
	f, err := os.OpenFile(filepath.Join(dir, "host-1"+Ext), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(line[:len(line)/2])
	require.NoError(t, err)
	require.NoError(t, f.Close())
	w.torn = true // as after a write that failed part way
	require.NoError(t, w.Append(attempt(4, 1, model.StateFinished, "Four", t0)))
	require.NoError(t, w.Close())

	titles, err := Titles(dir)
	require.NoError(t, err)
	assert.Equal(t, map[int64]string{2: "Two", 4: "Four"}, titles, "page 3's torn line is skipped, page 4's is whole")

	// A dead process's torn last line (no newline) is skipped too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "host-2"+Ext), line[:len(line)-1], 0o644))
	got, err := Page(dir, 3)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestAppendNeedsAPage(t *testing.T) {
	snap, results := attempt(0, 1, model.StateFinished, "", time.Now())
	err := NewWriter(t.TempDir(), "host-1").Append(snap, results)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "page id 0")
}
