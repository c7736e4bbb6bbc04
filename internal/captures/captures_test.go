package captures

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// TestACaptureNeverLeavesTheSnapshot: a hook that left a link to a file
// outside its snapshot (the worker's config, another job) gets no record
// of it; the other captures are written, and a plugin's second capture
// file names itself.
func TestACaptureNeverLeavesTheSnapshot(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "snap")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dom"), 0o755))
	secret := filepath.Join(root, "secret.html")
	require.NoError(t, os.WriteFile(secret, []byte("<p>secret</p>"), 0o600))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "dom", "link.html")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dom", "output.html"), []byte("<p>dom</p>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dom", "extra.html"), []byte("<p>2</p>"), 0o644))
	res := []model.ArchiveResult{{Plugin: "dom", Status: model.StatusSucceeded, EndedAt: time.Now(),
		Outputs: []model.OutputFile{{Path: "output.html"}, {Path: "link.html"}, {Path: "extra.html"}}}}

	caps := Find(dir, "https://example.com/", res, []string{"dom"})
	require.Len(t, caps, 3)
	uris := []string{caps[0].URI, caps[1].URI, caps[2].URI}
	assert.Contains(t, uris, "urn:dom:https://example.com/")
	assert.Contains(t, uris, "urn:dom/extra.html:https://example.com/")

	w, err := Write(filepath.Join(dir, File), "https://example.com/", time.Time{}, caps)
	require.NoError(t, err)
	assert.Equal(t, 2, w.Records)
	require.Len(t, w.Skipped, 1)
	assert.Contains(t, w.Skipped[0], "dom/link.html")

	assert.Empty(t, Find(dir, "https://example.com/", res, []string{"screenshot"}), "not a capture plugin")
}
