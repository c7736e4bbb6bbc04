package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/engine"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/pageindex"
	"github.com/archiveflow/archiveflow/internal/snapindex"
)

// `starter pages --url` reads a page's attempts from the crawl's page
// index, and where its hooks wrote files, from its directory: an attempt
// in both is shown once, with the directory its files are in; a page run
// before the page index has only its directory's.
func TestPageAttemptsReadThePageIndexAndThePageDirectory(t *testing.T) {
	archive, id := t.TempDir(), "3mlbkdu1fpo7wt4lr2qf1mpsw"
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	index := archivedir.PageIndex(archive, id)
	w := pageindex.NewWriter(index, "w1-7")
	rec := func(page int64, n int, state model.JobState) (snapindex.Snapshot, []model.ArchiveResult) {
		return snapindex.Snapshot{ID: id + "-p", URL: "https://example.com/p", Page: page, State: state, SealedAt: at},
			[]model.ArchiveResult{{Plugin: "pagefetch", Hook: "on_Snapshot__21_pagefetch.sh", Status: model.StatusSucceeded, Attempts: n}}
	}
	// Page 5: attempt 1 wrote files (kept under attempts/1), attempt 2 none.
	require.NoError(t, w.Append(rec(5, 1, model.StateFailed)))
	require.NoError(t, w.Append(rec(5, 2, model.StateFinished)))
	dir5 := archivedir.Page(archive, id, 5)
	kept := filepath.Join(dir5, engine.AttemptsDir, "1")
	snap, results := rec(5, 1, model.StateFailed)
	_, err := snapindex.Write(kept, snap, results)
	require.NoError(t, err)
	// Page 6 ran before the page index: its directory's index only.
	dir6 := archivedir.Page(archive, id, 6)
	snap, results = rec(6, 3, model.StateFinished)
	_, err = snapindex.Write(dir6, snap, results)
	require.NoError(t, err)

	got := pageAttempts(index, 5, dir5)
	require.Len(t, got, 2)
	assert.Equal(t, []int{1, 2}, []int{got[0].Attempt, got[1].Attempt})
	assert.Equal(t, kept, got[0].Dir, "attempt 1's files")
	assert.Empty(t, got[1].Dir, "attempt 2 wrote no files")
	assert.Equal(t, model.StateFinished, got[1].State)
	require.Len(t, got[1].Hooks, 1)
	assert.Equal(t, "pagefetch", got[1].Hooks[0].Plugin)

	got = pageAttempts(index, 6, dir6)
	require.Len(t, got, 1)
	assert.Equal(t, 3, got[0].Attempt)
	assert.Equal(t, dir6, got[0].Dir)
	assert.Empty(t, pageAttempts(index, 7, archivedir.Page(archive, id, 7)))
}
