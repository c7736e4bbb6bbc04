//go:build dev

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestSymlinkToEtcPasswdIsIgnoredByTheJob: a hook links /etc/passwd and /
// into its output and links the seal's index files out of the snapshot.
// Over the whole job (workflow, Redis counters, the shipped hashes and
// index hooks, the sealed index) the links are neither followed, counted
// nor written through.
func TestSymlinkToEtcPasswdIsIgnoredByTheJob(t *testing.T) {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil || len(passwd) == 0 {
		t.Skip("no /etc/passwd to link to")
	}
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o644))
	root := builtinPlugins(t, "hashes", "index")
	writeHook(t, root, "evil", "on_Snapshot__10_evil.sh", `echo kept > ok.txt
ln -s /etc/passwd passwd
ln -s / rootdir
ln -s `+victim+` ../index.jsonl
ln -s `+filepath.Join(outside, "made.json")+` ../index.json
echo '{"type":"ArchiveResult","status":"succeeded"}'
`)
	s := NewStack(t, server, root, nil)
	s.StartPools(t, builtinEnv(t))

	job := s.Submit(t, "http://127.0.0.1:9/", nil)
	require.NoError(t, s.Wait(t, job, 2*time.Minute))
	var st workflows.Status
	require.NoError(t, job.Run.Get(t.Context(), &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	res := resultsByHook(st)
	for _, p := range []string{"evil", "hashes", "index"} {
		require.Equal(t, model.StatusSucceeded, res[p].Status, "%s: %s", p, res[p].Error)
	}

	// Byte counts: the hook's result and the job's bytes_downloaded.
	evil := res["evil"]
	assert.Equal(t, []model.OutputFile{{Path: "ok.txt", Size: 5}}, evil.Outputs, "links are no output")
	assert.EqualValues(t, 5, evil.OutputBytes)
	var total int64
	for _, r := range res {
		total += r.OutputBytes
	}
	assert.Positive(t, total)
	h, err := s.Redis.HGetAll(t.Context(), job.Ident).Result()
	require.NoError(t, err)
	assert.Equal(t, "0", h["bytes_downloaded"], "bytes_downloaded counts bytes fetched (none here), never output files or links")

	// Hashes and the index hook's page list the links, never follow them.
	dir := s.SnapDir(job)
	var hashDoc struct {
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
		Symlinks []string `json:"symlinks_not_followed"`
	}
	readJSON(t, filepath.Join(dir, "hashes", "hashes.json"), &hashDoc)
	var hashed []string
	for _, f := range hashDoc.Files {
		hashed = append(hashed, f.Path)
	}
	assert.Contains(t, hashed, "evil/ok.txt")
	assert.NotContains(t, hashed, "evil/passwd")
	assert.Subset(t, hashDoc.Symlinks, []string{"evil/passwd", "evil/rootdir"})
	var indexDoc struct {
		Plugins []struct {
			Name     string   `json:"name"`
			Bytes    int64    `json:"bytes"`
			Symlinks []string `json:"symlinks_not_followed"`
		} `json:"plugins"`
	}
	readJSON(t, filepath.Join(dir, "index", "index.json"), &indexDoc)
	found := false
	for _, p := range indexDoc.Plugins {
		if p.Name == "evil" {
			found = true
			assert.EqualValues(t, 5, p.Bytes)
			assert.Equal(t, []string{"evil/passwd", "evil/rootdir"}, p.Symlinks)
		}
	}
	assert.True(t, found, "the index hook lists the evil plugin")

	// The sealed index replaced the links with itself and lists no link.
	for _, name := range []string{"index.json", "index.jsonl"} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "%s is the seal's own file, not a link", name)
	}
	f, err := os.Open(filepath.Join(dir, "index.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sealed := false
	for sc.Scan() {
		var rec struct {
			Plugin      string             `json:"plugin"`
			OutputFiles []model.OutputFile `json:"output_files"`
			OutputSize  int64              `json:"output_size"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
		if rec.Plugin == "evil" {
			sealed = true
			assert.Equal(t, []model.OutputFile{{Path: "ok.txt", Size: 5}}, rec.OutputFiles)
			assert.EqualValues(t, 5, rec.OutputSize)
		}
	}
	require.NoError(t, sc.Err())
	assert.True(t, sealed, "the sealed index lists the evil hook")
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b), "the seal did not write through a link")
	assert.NoFileExists(t, filepath.Join(outside, "made.json"), "the seal did not create a file where a link points")

	// Nothing of /etc/passwd was copied into what archiveflow wrote.
	firstLine, _, _ := strings.Cut(string(passwd), "\n")
	for _, p := range []string{"hashes/hashes.json", "hashes/sha256sums.txt", "index/index.json", "index/index.html", "index.json", "index.jsonl"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err)
		assert.NotContains(t, string(b), firstLine, p)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v), path)
}
