//go:build dev

package e2e

import (
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
	sdkpb "go.temporal.io/api/sdk/v1"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestHookRecordsSetTitleAndTags is issue 25 item 3 as a user sees it (the
// starter binary against the stack): the title hook's Snapshot record sets
// the job's title, another hook's Tag records its tags, and a record of an
// unknown type is counted and kept in that hook's stdout log. The title
// and tags are in `starter status`, the sealed index (index.json) and the
// workflow's current details, which the Web UI shows on the job's page;
// `starter list --tag` finds the job by one of its tags.
func TestHookRecordsSetTitleAndTags(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!DOCTYPE html><html><head><title>Records Page</title></head><body>hi</body></html>`)
	}))
	defer site.Close()
	root := builtinPlugins(t, "title")
	writeHook(t, root, "tagger", "on_Snapshot__60_tagger.sh", `echo '{"type":"Tag","name":"sci-fi"}'
echo '{"type":"Tag","name":"news"}'
echo '{"type":"Persona","name":"a record archiveflow does not know"}'
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"tagged"}'
`)
	s := NewStack(t, server, root, func(c *config.Config) {
		c.Worker.MinFreeDisk = "0" // not about the disk guard (a shared machine's disk may run low)
	})
	s.StartPools(t, builtinEnv(t))
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")

	job := s.Submit(t, site.URL+"/", nil)
	require.NoError(t, s.Wait(t, job, 2*time.Minute))
	var st workflows.Status
	require.NoError(t, job.Run.Get(t.Context(), &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)

	res := runStarter(t, bin, s, "status", job.Ident)
	require.Zero(t, res.code, res.stderr)
	assert.Contains(t, res.stdout, "title:    Records Page\n")
	assert.Contains(t, res.stdout, "tags:     news, sci-fi ")
	assert.Contains(t, res.stdout, "records:  1 of an unknown type")
	res = runStarter(t, bin, s, "status", job.Ident, "--json")
	require.Zero(t, res.code, res.stderr)
	var sj struct {
		Title   string   `json:"title"`
		Tags    []string `json:"tags"`
		Unknown int64    `json:"unknown_records"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &sj), res.stdout)
	assert.Equal(t, "Records Page", sj.Title)
	assert.Equal(t, []string{"news", "sci-fi"}, sj.Tags)
	assert.Equal(t, int64(1), sj.Unknown)

	res = runStarter(t, bin, s, "list", "--tag", "sci-fi")
	require.Zero(t, res.code, res.stderr)
	assert.Contains(t, res.stdout, job.Ident)
	res = runStarter(t, bin, s, "list", "--tag", "other")
	require.Zero(t, res.code, res.stderr)
	assert.Equal(t, "no jobs\n", res.stdout)

	var doc struct {
		Title          string           `json:"title"`
		Tags           []string         `json:"tags"`
		ArchiveResults []map[string]any `json:"archive_results"`
	}
	b, err := os.ReadFile(filepath.Join(s.SnapDir(job), "index.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "Records Page", doc.Title)
	assert.Equal(t, []string{"news", "sci-fi"}, doc.Tags)
	for _, r := range doc.ArchiveResults {
		if r["plugin"] == "tagger" {
			assert.Equal(t, 1.0, r["unknown_records"])
		}
	}
	stdout, err := filepath.Glob(filepath.Join(s.SnapDir(job), "tagger", "*.stdout.log"))
	require.NoError(t, err)
	require.Len(t, stdout, 1)
	b, err = os.ReadFile(stdout[0])
	require.NoError(t, err)
	assert.Contains(t, string(b), `"type":"Persona"`, "the unknown record is kept as printed")

	// The Web UI's job page shows the workflow's current details.
	val, err := s.Client.QueryWorkflow(t.Context(), job.Ident, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, val.Get(&md))
	assert.Contains(t, md.GetCurrentDetails(), `title "Records Page"`)
}
