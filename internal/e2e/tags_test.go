//go:build dev

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// submitJSON runs `starter submit ARGS --json` and returns the job's
// ident.
func submitJSON(t *testing.T, bin string, s *Stack, args ...string) string {
	t.Helper()
	res := runStarter(t, bin, s, append([]string{"submit", "--json"}, args...)...)
	require.Equal(t, 0, res.code, "starter submit %v: %s%s", args, res.stdout, res.stderr)
	var out struct {
		Jobs []struct {
			Ident     string `json:"ident"`
			TaskQueue string `json:"task_queue"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out), res.stdout)
	require.Len(t, out.Jobs, 1, res.stdout)
	return out.Jobs[0].Ident
}

// hostPID is the PID of the worker process whose host queue ran the
// snapshot (its host queue is QUEUE@HOST-PID), once the job has ended.
func hostPID(t *testing.T, s *Stack, ident string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var st workflows.Status
	require.NoError(t, s.Client.GetWorkflow(ctx, ident, "").Get(ctx, &st), "job %s", ident)
	require.Equal(t, model.StateFinished, st.State, "job %s: %s", ident, st.Error)
	i := strings.LastIndex(st.HostQueue, "-")
	require.Positive(t, i, "host queue %q", st.HostQueue)
	pid, err := strconv.Atoi(st.HostQueue[i+1:])
	require.NoError(t, err, "host queue %q", st.HostQueue)
	return pid
}

// TestTagsAndMatchOnlyRouteJobs is issue 25.7: two worker processes, one
// match_only with the tag "big" (pools[].tags, match_only), one general
// with the tag "small" (workers --tag small). Jobs submitted by the
// starter binary with --tag big run only on the first, untagged jobs and
// --tag small jobs only on the second (a tagged pipeline without
// match_only also takes untagged jobs), and a job with a tag no worker has
// is taken by none.
func TestTagsAndMatchOnlyRouteJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workers and starter binaries")
	}
	workersBin := BuildWorkers(t)
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	root := t.TempDir()
	writeHook(t, root, "one", "on_Snapshot__00_one.sh", `echo '{"type":"ArchiveResult","status":"succeeded"}'`+"\n")
	s := NewStack(t, server, root, nil)

	moCfg := *s.Config
	mo := moCfg.Pools[0]
	mo.Tags, mo.MatchOnly = []string{"big"}, true
	moCfg.Pools = []config.Pool{mo}
	matchOnly := StartWorker(t, workersBin, &moCfg, "matchonly")
	general := StartWorkerArgs(t, workersBin, s.Config, "general", []string{"--tag", "small"})

	jobs := map[string]string{} // ident → what
	for i, tag := range []string{"", "big", "small", "", "big", "small"} {
		args := []string{fmt.Sprintf("http://127.0.0.1:1/tags-%d", i)}
		if tag != "" {
			args = append(args, "--tag", tag)
		}
		jobs[submitJSON(t, bin, s, args...)] = tag
	}
	nobody := submitJSON(t, bin, s, "http://127.0.0.1:1/tags-nobody", "--tag", "gpu")

	ran := map[string]int{}
	for ident, tag := range jobs {
		pid := hostPID(t, s, ident)
		want, where := general.Process.Pid, "the general worker"
		if tag == "big" {
			want, where = matchOnly.Process.Pid, "the match_only worker"
		}
		assert.Equal(t, want, pid, "job %s (tag %q) must run on %s", ident, tag, where)
		ran[where]++
	}
	assert.Equal(t, map[string]int{"the general worker": 4, "the match_only worker": 2}, ran)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := s.Store.GetJob(ctx, nobody)
	require.NoError(t, err)
	assert.Equal(t, model.StatePending, v.State, "no worker has the tag gpu: the job waits")
	assert.Equal(t, s.Config.Pools[0].QueueFor("gpu"), v.TaskQueue)
	res := runStarter(t, bin, s, "status", nobody)
	assert.Contains(t, res.stdout, s.Config.Pools[0].QueueFor("gpu"), "status names the job's queue")
	require.NoError(t, s.Client.TerminateWorkflow(ctx, nobody, "", "test over"))
}
