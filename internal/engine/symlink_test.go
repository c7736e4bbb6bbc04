package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/builtin"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/proccheck"
)

// TestMain lets the test binary act as ARCHIVEFLOW_BIN for the shipped
// plugins' wrappers (`$ARCHIVEFLOW_BIN hook NAME ...`), and fails the run
// when a hook process outlives the tests (internal/proccheck).
func TestMain(m *testing.M) {
	if code, ok := builtin.Dispatch(os.Args); ok {
		os.Exit(code)
	}
	os.Exit(proccheck.Main(m, os.Stderr))
}

// TestSymlinksOutOfTheSnapshotAreNotFollowed: a hook links /etc/passwd
// and / into its output and points title.txt at /etc/passwd. Its byte
// count, the shipped hashes and index hooks and the index page ignore the
// links and say so; nothing of /etc/passwd is read into the snapshot.
func TestSymlinksOutOfTheSnapshotAreNotFollowed(t *testing.T) {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil || len(passwd) == 0 {
		t.Skip("no /etc/passwd to link to")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	f := newFixture(t)
	for _, p := range []string{"hashes", "index"} {
		src, err := filepath.Abs(filepath.Join("..", "..", "plugins", p))
		require.NoError(t, err)
		require.NoError(t, os.Symlink(src, filepath.Join(f.plugins, p)))
	}
	e, err := New(Config{PluginDirs: []string{f.plugins}, ArchiveDir: f.archive,
		Env: []string{"PATH=" + os.Getenv("PATH"), "ARCHIVEFLOW_BIN=" + self}, Timeout: 30 * time.Second, Grace: 5 * time.Second,
		LineCap: 1 << 20, Log: zap.NewNop()})
	require.NoError(t, err)
	evil := f.hook("evil", "on_Snapshot__10_evil.sh", `
echo kept > ok.txt
ln -s /etc/passwd passwd
ln -s / rootdir
mkdir -p ../title && ln -s /etc/passwd ../title/title.txt
echo '{"type":"ArchiveResult","status":"succeeded"}'`)

	run := func(h activities.HookSpec) activities.Outcome {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := e.Run(ctx, activities.RunRequest{Job: runInput(h).Job, Hook: h, Attempt: 1}, &nopSink{})
		require.NoError(t, err)
		require.False(t, out.Transient, out.Error)
		return out
	}
	out := run(evil)
	assert.Equal(t, []model.OutputFile{{Path: "ok.txt", Size: 5}}, out.Result.Outputs, "links are no output")
	assert.EqualValues(t, 5, out.Result.OutputBytes, "links add no bytes")

	spec := func(plugin, name string) activities.HookSpec {
		return activities.HookSpec{Plugin: plugin, Name: name, Path: filepath.Join(f.plugins, plugin, name), Step: 9,
			Timeout: 30 * time.Second, Enabled: true}
	}
	hashes := run(spec("hashes", "on_Snapshot__90_hashes.sh"))
	require.Equal(t, model.StatusSucceeded, hashes.Result.Status, hashes.Result.Error)
	assert.Equal(t, "1 files, 5 bytes; 3 symlinks not followed", hashes.Result.OutputStr)
	index := run(spec("index", "on_Snapshot__95_index.sh"))
	require.Equal(t, model.StatusSucceeded, index.Result.Status, index.Result.Error)

	snap := filepath.Join(f.archive, "snapshots", "abc123")
	var hashDoc struct {
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
		TotalBytes int64    `json:"total_bytes"`
		Symlinks   []string `json:"symlinks_not_followed"`
	}
	readJSONFile(t, filepath.Join(snap, "hashes", "hashes.json"), &hashDoc)
	require.Len(t, hashDoc.Files, 1)
	assert.Equal(t, "evil/ok.txt", hashDoc.Files[0].Path)
	assert.EqualValues(t, 5, hashDoc.TotalBytes)
	assert.Equal(t, []string{"evil/passwd", "evil/rootdir", "title/title.txt"}, hashDoc.Symlinks)

	var indexDoc struct {
		Title   string `json:"title"`
		Bytes   int64  `json:"bytes"`
		Files   int    `json:"files"`
		Plugins []struct {
			Name     string   `json:"name"`
			Bytes    int64    `json:"bytes"`
			Symlinks []string `json:"symlinks_not_followed"`
		} `json:"plugins"`
	}
	readJSONFile(t, filepath.Join(snap, "index", "index.json"), &indexDoc)
	assert.Empty(t, indexDoc.Title, "title.txt links out: not read")
	byName := map[string][]string{}
	for _, p := range indexDoc.Plugins {
		byName[p.Name] = p.Symlinks
	}
	assert.Equal(t, []string{"evil/passwd", "evil/rootdir"}, byName["evil"])
	assert.Equal(t, []string{"title/title.txt"}, byName["title"])
	html, err := os.ReadFile(filepath.Join(snap, "index", "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(html), "evil/passwd (symbolic link, not followed)")
	assert.NotContains(t, string(html), `href="../evil/passwd"`, "the index page does not link a symlink")

	// Nothing of /etc/passwd was copied into what archiveflow wrote.
	firstLine, _, _ := strings.Cut(string(passwd), "\n")
	for _, p := range []string{"hashes/hashes.json", "hashes/sha256sums.txt", "index/index.json", "index/index.html"} {
		b, err := os.ReadFile(filepath.Join(snap, p))
		require.NoError(t, err)
		assert.NotContains(t, string(b), firstLine, p)
	}
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}

// TestHookDoesNotRunInADirectoryALinkLeadsTo: a hook that replaced another
// plugin's directory, or the snapshot directory, with a link cannot make
// the next hook run (and write) where the link points.
func TestHookDoesNotRunInADirectoryALinkLeadsTo(t *testing.T) {
	f := newFixture(t)
	outside := t.TempDir()
	snap := filepath.Join(f.archive, "snapshots", "abc123")
	evil := f.hook("evil", "on_Snapshot__10_evil.sh", `rm -rf ../victim && ln -s `+outside+` ../victim`)
	victim := f.hook("victim", "on_Snapshot__20_victim.sh", `echo written > out.txt`)
	_, err := f.run(f.env(), runInput(evil))
	require.NoError(t, err)

	_, err = f.run(f.env(), runInput(victim))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "snapshot directory "+filepath.Join(snap, "victim")+" is a symbolic link (to "+outside+"), left by a hook: not followed")
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.True(t, appErr.NonRetryable(), "retrying cannot help")
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing was written where the link points")

	// The snapshot directory itself.
	require.NoError(t, os.RemoveAll(snap))
	require.NoError(t, os.Symlink(outside, snap))
	_, err = f.run(f.env(), runInput(evil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "snapshot directory "+snap+" is a symbolic link")
}
