//go:build dev

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestSealIndexListsTheBackgroundWget archives a local page with the real
// wget plugin (a background hook) and the index plugin: after the seal,
// SNAP_DIR/index.jsonl and index.json list every hook with its final
// result, the background wget's included, which the index hook of step 9
// could not know.
func TestSealIndexListsTheBackgroundWget(t *testing.T) {
	if _, err := os.Stat("/usr/bin/wget"); err != nil {
		t.Skip("no wget")
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!DOCTYPE html><html><head><title>Sealed</title><link rel="stylesheet" href="/s.css"></head><body><p>hello</p></body></html>`)
		case "/s.css":
			w.Header().Set("Content-Type", "text/css")
			fmt.Fprint(w, "p{color:red}")
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()
	root := builtinPlugins(t, "wget", "index")
	// A foreground hook of step 9 lets the step end only once wget printed
	// its result, so the seal finds it final rather than stopping it.
	writeHook(t, root, "await", "on_Snapshot__90_await.sh", `i=0
while ! grep -qs '"ArchiveResult"' ../wget/*.stdout.log && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"wget is done"}'
`)
	s := NewStack(t, server, root, nil)
	s.StartPools(t, builtinEnv(t))

	job := s.Submit(t, site.URL+"/", nil)
	require.NoError(t, s.Wait(t, job, 2*time.Minute))
	var st workflows.Status
	require.NoError(t, job.Run.Get(t.Context(), &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	wget := resultsByHook(st)["wget"]
	require.Equal(t, model.StatusSucceeded, wget.Status, wget.Error)

	dir := s.SnapDir(job)
	f, err := os.Open(filepath.Join(dir, "index.jsonl"))
	require.NoError(t, err, "the seal wrote the index")
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), sc.Text())
		lines = append(lines, rec)
	}
	require.NoError(t, sc.Err())
	require.Len(t, lines, 1+len(st.Hooks), "the Snapshot, then one ArchiveResult per hook")
	assert.Equal(t, "Snapshot", lines[0]["type"])
	assert.Equal(t, job.URL, lines[0]["url"])
	assert.Equal(t, "finished", lines[0]["archiveflow_state"])
	byPlugin := map[string]map[string]any{}
	for _, l := range lines[1:] {
		assert.Equal(t, "ArchiveResult", l["type"])
		byPlugin[l["plugin"].(string)] = l
	}
	w := byPlugin["wget"]
	require.NotNil(t, w, "wget is in the index")
	assert.Equal(t, "succeeded", w["status"], "the background wget's final status")
	assert.Equal(t, wget.OutputStr, w["output_str"], "its final output")
	assert.NotEmpty(t, w["output_str"])
	assert.Equal(t, true, w["background"])
	assert.Equal(t, 1.0, w["attempts"])
	assert.Positive(t, w["duration_ms"])
	assert.NotEmpty(t, w["output_files"], "its files")
	assert.Equal(t, "succeeded", byPlugin["index"]["status"])

	var doc struct {
		ArchiveResults []map[string]any `json:"archive_results"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.ArchiveResults, len(st.Hooks))
	page, err := os.ReadFile(filepath.Join(dir, "index", "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), `href="../index.jsonl"`, "the index plugin's page links to the final index")
}
