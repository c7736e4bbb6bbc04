//go:build dev

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/testsite"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestBadSettingsNeverKillAJob is issue 30's items 1 and 2, run as the
// user does (the starter binary against the stack): a concurrency out of
// range and an over-long URL are refused with exit 2 naming the rule
// before anything starts; a running crawl asked for concurrency 999999
// refuses it (exit 2), keeps its settings and finishes every page.
func TestBadSettingsNeverKillAJob(t *testing.T) {
	srv := crawlSite(t, testsite.MinPages)
	s := NewStack(t, server, builtinPlugins(t, "pagefetch", "title", "outlinks"), crawlConfig)
	s.StartPools(t, builtinEnv(t))
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	seed := srv.URL("/")

	refused := []struct {
		name string
		args []string
		want []string
	}{
		{"concurrency over the range", []string{"submit", seed, "--depth", "inf", "--concurrency", "999999"},
			[]string{"--concurrency 999999: must be 0..1000 (0 pauses the job)"}},
		{"concurrency just over", []string{"submit", seed, "--concurrency", "1001"}, []string{"--concurrency 1001: must be 0..1000"}},
		{"a 10,000-character URL", []string{"submit", seed + "?" + strings.Repeat("q", 10000)},
			[]string{"a job's URL must be at most 2048 bytes", "ArchiveflowURL"}},
	}
	for _, tc := range refused {
		res := runStarter(t, bin, s, tc.args...)
		assert.Equal(t, 2, res.code, "%s: %s %s", tc.name, res.stdout, res.stderr)
		for _, w := range tc.want {
			assert.Contains(t, res.stderr, w, tc.name)
		}
	}
	id, _, err := ident.FromURL(seed)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := s.Redis.Exists(ctx, id).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a refused submission leaves no job")

	// A crawl queued paused, asked for too much, then resumed.
	res := runStarter(t, bin, s, "submit", seed, "--depth", "1", "--concurrency", "0")
	require.Equal(t, 0, res.code, res.stderr)
	res = runStarter(t, bin, s, "set", id, "concurrency=999999")
	assert.Equal(t, 2, res.code, res.stderr)
	assert.Contains(t, res.stderr, "concurrency=999999: must be an integer 0..1000 (0 pauses the job)")
	res = runStarter(t, bin, s, "set", id, "concurrency=4")
	require.Equal(t, 0, res.code, res.stderr)
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer wcancel()
	var st workflows.CrawlStatus
	require.NoError(t, s.Client.GetWorkflow(wctx, id, "").Get(wctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Equal(t, 4, st.Settings.Concurrency)
	assert.Positive(t, st.Counts.Done)
	assert.Zero(t, st.Counts.Queued(), "every page ended")
}
