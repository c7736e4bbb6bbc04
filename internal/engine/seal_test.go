package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
