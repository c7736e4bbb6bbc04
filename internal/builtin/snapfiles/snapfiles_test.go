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
	require.NoError(t, os.Symlink("/etc", filepath.Join(root, "title", "etc")))
	require.NoError(t, os.Symlink("title.txt", filepath.Join(root, "title", "inside")))
	l, err := Walk(root, func(rel string, isDir bool) bool { return isDir && rel == "index" })
	require.NoError(t, err)
	assert.Equal(t, []File{{Path: "title/title.txt", Size: 1}, {Path: "wget/." + id1 + ".pid", Size: 2}, {Path: "wget/warc/a.warc.gz", Size: 5}}, l.Files)
	assert.Equal(t, []string{"title/etc", "title/inside", "title/link"}, l.Symlinks, "links are listed apart, never followed")
}

// TestOpenStaysInside: reads through a link or a path out of the
// directory are refused; a link that stays inside is followed.
func TestOpenStaysInside(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "dom", "output.html"), "<title>x</title>")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(root, "dom", "passwd")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(root, "etc")))
	require.NoError(t, os.Symlink("../dom/output.html", filepath.Join(root, "dom", "copy.html")))
	for _, rel := range []string{"dom/passwd", "etc/passwd", "../" + filepath.Base(root) + "/dom/output.html", "/etc/passwd"} {
		_, err := ReadFile(root, rel, 1<<20)
		assert.Error(t, err, rel)
	}
	b, err := ReadFile(root, "dom/copy.html", 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "<title>x</title>", string(b))
	b, err = ReadFile(root, "dom/output.html", 7)
	require.NoError(t, err)
	assert.Equal(t, "<title>", string(b), "the limit holds")

	// A snapshot (or plugin) directory replaced by a link is not entered.
	link := filepath.Join(t.TempDir(), "snap")
	require.NoError(t, os.Symlink("/etc", link))
	_, err = ReadFile(link, "passwd", 1<<20)
	assert.ErrorContains(t, err, "is a symbolic link, not followed")
	_, err = Walk(link, nil)
	assert.ErrorContains(t, err, "is a symbolic link, not followed")
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
	// A link named like a runner log is not one, even to a file with a record.
	outside := filepath.Join(t.TempDir(), "elsewhere.log")
	write(t, outside, `{"type":"ArchiveResult","status":"succeeded","output_str":"from outside"}`+"\n")
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "on_Snapshot__22_evil."+id1+".stdout.log")))
	past := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(old, past, past))

	got, err := LastResults(dir)
	require.NoError(t, err)
	assert.Equal(t, []HookResult{
		{Hook: "on_Snapshot__20_headers", ArchiveResult: jsonl.ArchiveResult{Status: model.StatusSucceeded, OutputStr: "HTTP 200"}},
		{Hook: "on_Snapshot__21_other"},
	}, got, "the newest attempt's last record per hook")
}
