//go:build dev

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/workflows"
)

// A retried job runs only its failed hook (a real shell script that fails
// until a marker file exists) as a new run of the same workflow, and the
// Redis counters move that hook from failed to succeeded once.
func TestRerunRunsOnlyTheFailedHookOnRealRedis(t *testing.T) {
	srv := SharedServer(t)
	plugins := t.TempDir()
	marker := filepath.Join(t.TempDir(), "marker")
	runs := filepath.Join(t.TempDir(), "runs")
	writeHook(t, plugins, "ok", "on_Snapshot__10_ok.sh", `echo ok >> "`+runs+`"
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"fine"}'
`)
	writeHook(t, plugins, "flaky", "on_Snapshot__20_flaky.sh", `echo flaky >> "`+runs+`"
if [ -e "`+marker+`" ]; then echo '{"type":"ArchiveResult","status":"succeeded","output_str":"now"}'; exit 0; fi
echo '{"type":"ArchiveResult","status":"failed","error":"no marker"}'
`)
	s := NewStack(t, srv, plugins, nil)
	s.StartPools(t, nil)
	j := s.Submit(t, "http://example.invalid/rerun", nil)
	require.NoError(t, s.Wait(t, j, 2*time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v, err := s.Store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	require.Equal(t, model.StateFinished, v.State)
	require.EqualValues(t, 1, v.HooksFailed)

	require.NoError(t, os.WriteFile(marker, nil, 0o644))
	run, rerun, err := submit.Rerun(ctx, s.Client, nil, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, []string{"flaky/on_Snapshot__20_flaky.sh"}, rerun.Hooks)
	var st workflows.Status
	require.NoError(t, run.Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State)

	data, err := os.ReadFile(runs)
	require.NoError(t, err)
	assert.Equal(t, "ok\nflaky\nflaky\n", string(data), "only the failed hook ran again")
	v, err = s.Store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateFinished, v.State)
	assert.EqualValues(t, 2, v.HooksSucceeded)
	assert.Zero(t, v.HooksFailed)
	assert.Equal(t, "1", s.Redis.Get(ctx, "jobs_completed").Val(), "the job is counted once")
}
