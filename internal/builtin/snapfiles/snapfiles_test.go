package snapfiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

const id1 = "0123456789abcdef0123456789abcdef"
const id2 = "fedcba9876543210fedcba9876543210"

func write(t *testing.T, path, data string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
}

func TestIsRunnerFile(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"on_Snapshot__60_wget.bg." + id1 + ".stdout.log", true},
		{"on_Snapshot__60_wget.bg." + id1 + ".stderr.log", true},
		{"on_Snapshot__60_wget.bg." + id1 + ".pid", true},
		{"dir/hook." + id1 + ".sh", true},
		{"hook." + strings.ToUpper(id1) + ".pid", false},
		{"hook.0123.pid", false},
		{"wget.log", false},
		{"hook." + id1 + ".stdout.log.gz", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsRunnerFile(tt.name), tt.name)
	}
}

func TestWalk(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "wget", "warc", "a.warc.gz"), "12345")
	write(t, filepath.Join(root, "wget", "hook."+id1+".stdout.log"), "x")
	write(t, filepath.Join(root, "title", "title.txt"), "t")
	write(t, filepath.Join(root, "index", "index.json"), "{}")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(root, "title", "link")))
	files, err := Walk(root, func(rel string, isDir bool) bool { return isDir && rel == "index" })
	require.NoError(t, err)
	assert.Equal(t, []File{{Path: "title/title.txt", Size: 1}, {Path: "wget/warc/a.warc.gz", Size: 5}}, files)
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
		{Hook: "on_Snapshot__20_headers", Status: model.StatusSucceeded, OutputStr: "HTTP 200"},
		{Hook: "on_Snapshot__21_other"},
	}, got, "the newest attempt's last record per hook")
}
