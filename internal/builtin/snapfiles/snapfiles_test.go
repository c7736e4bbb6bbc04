package snapfiles

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/model"
)

const id1 = "0123456789abcdef0123456789abcdef"
const id2 = "fedcba9876543210fedcba9876543210"

func write(t *testing.T, path, data string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
}

func TestWalk(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "wget", "warc", "a.warc.gz"), "12345")
	write(t, filepath.Join(root, "wget", "hook."+id1+".stdout.log"), "x")
	// No hook stem: not a runner file (procs.ParseRunnerFile), so output.
	write(t, filepath.Join(root, "wget", "."+id1+".pid"), "12")
	write(t, filepath.Join(root, "title", "title.txt"), "t")
	write(t, filepath.Join(root, "index", "index.json"), "{}")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(root, "title", "link")))
	files, err := Walk(root, func(rel string, isDir bool) bool { return isDir && rel == "index" })
	require.NoError(t, err)
	assert.Equal(t, []File{{Path: "title/title.txt", Size: 1}, {Path: "wget/." + id1 + ".pid", Size: 2}, {Path: "wget/warc/a.warc.gz", Size: 5}}, files)
}

func TestLastResults(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "on_Snapshot__20_headers."+id1+".stdout.log")
	cur := filepath.Join(dir, "on_Snapshot__20_headers."+id2+".stdout.log")
	write(t, old, `{"type":"ArchiveResult","status":"failed"}`+"\n")
	write(t, cur, "noise\n"+`{"type":"Response","url":"u","status":200}`+"\n"+
		`{"type":"ArchiveResult","status":"noresults"}`+"\n"+
		`{"type":"ArchiveResult","status":"succeeded","output_str":"HTTP 200"}`+"\n")
	write(t, filepath.Join(dir, "on_Snapshot__21_other."+id1+".stdout.log"), "no record\n")
	past := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(old, past, past))

	got, err := LastResults(dir)
	require.NoError(t, err)
	assert.Equal(t, []HookResult{
		{Hook: "on_Snapshot__20_headers", ArchiveResult: jsonl.ArchiveResult{Status: model.StatusSucceeded, OutputStr: "HTTP 200"}},
		{Hook: "on_Snapshot__21_other"},
	}, got, "the newest attempt's last record per hook")
}
