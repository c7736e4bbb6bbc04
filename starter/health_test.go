package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// starter health shows the host × plugin matrix failing first and one
// check's changes; starter maintenance refuses bad input with the rule
// named and acknowledges a failing check.
func TestHealthAndMaintenanceCommands(t *testing.T) {
	srv := testredis.Start(t)
	ctx := context.Background()
	cfg := config.Default()
	cfg.Flapjack.CriticalAfter = 1
	cfg.Flapjack.OKAfter = 2
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	h, err := fleethealth.FromConfig(store, &cfg)
	require.NoError(t, err)
	require.NoError(t, srv.Client().HSet(ctx, "job1", "state", "active").Err())
	at := time.Now().Add(-time.Minute)
	rec := func(host, plugin string, st model.Status, exit int, op string) {
		at = at.Add(time.Second) // Flapjack's history is by the second
		_, err := h.Record(ctx, fleethealth.Outcome{Host: host, Ident: "job1", OpID: op, Result: model.ArchiveResult{
			Plugin: plugin, Hook: "on_Snapshot__50_" + plugin + ".sh", Status: st, ExitCode: exit, Error: "boom", EndedAt: at}})
		require.NoError(t, err)
	}
	rec("host-a", "wget", model.StatusSucceeded, 0, "1")
	rec("host-a", "wget", model.StatusSucceeded, 0, "1b")
	rec("host-b", "wget", model.StatusSucceeded, 0, "2")
	rec("host-b", "wget", model.StatusFailed, 1, "3")
	rec("host-c", "title", model.StatusFailed, 0, "4") // reported by the hook: soft
	rec("host-c", "title", model.StatusSucceeded, 0, "5")

	res := runCLI(t, "", "health", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 4, res.stdout)
	assert.Regexp(t, `^host-b\s+wget\s+critical\s+\S+\s+failing for \S+: failed: boom$`, lines[1], "failing first, with why")
	assert.Regexp(t, `^host-c\s+title\s+warning\s+\S+\s+failed: boom$`, lines[2], "why it left ok: one ok outcome of flapjack.ok_after's 2 does not clear it")
	assert.Regexp(t, `^host-a\s+wget\s+ok\s+\S+\s*$`, lines[3], "an ok check has no note")

	res = runCLI(t, "", "health", "--json", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	var matrix struct {
		Checks []fleethealth.Check `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &matrix))
	require.Len(t, matrix.Checks, 3)
	assert.Equal(t, "failed: boom", matrix.Checks[0].Summary)
	assert.Empty(t, matrix.Checks[2].Summary, "an ok check has no summary")

	res = runCLI(t, "", "health", "host-b", "wget", "--json", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	var hist struct {
		Check   fleethealth.Check    `json:"check"`
		Changes []fleethealth.Change `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &hist))
	assert.Equal(t, "critical", hist.Check.State)
	require.Len(t, hist.Changes, 2)
	assert.Equal(t, "critical", hist.Changes[0].State, "newest first")
	assert.Equal(t, "failed: boom", hist.Changes[0].Summary)

	res = runCLI(t, "", "health", "host-b", "pdf", "--redis-url", srv.URL)
	assert.Equal(t, exitNotFound, res.code)
	assert.Contains(t, res.stderr, "fleet health of host-b pdf: invalid: no such check")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"host-a", "--summary", "x"}, "--for 0s: the duration must be > 0"},
		{[]string{"host-a", "--for", "-1h", "--summary", "x"}, "--for -1h0m0s: the duration must be > 0"},
		{[]string{"host-z", "--for", "1h", "--summary", "x"}, `unknown host "host-z"`},
		{[]string{"host-a", "pdf", "--for", "1h", "--summary", "x"}, `unknown plugin "pdf" on host host-a: it never ran there (known: wget)`},
		{[]string{"host-a", "--for", "1h"}, "summary must not be empty"},
		{[]string{"host-a", "--for", "1h", "--summary", "x", "--at", "tomorrow"}, `--at "tomorrow": must be an RFC 3339 time`},
	} {
		res := runCLI(t, "", append([]string{"maintenance", "--redis-url", srv.URL}, c.args...)...)
		assert.Equal(t, exitUsage, res.code, c.args)
		assert.Contains(t, res.stderr, c.want, c.args)
	}
	assert.Zero(t, srv.Client().Exists(ctx, "host-a:*:unscheduled_maintenance", "host-a:pdf:unscheduled_maintenance").Val())

	res = runCLI(t, "", "maintenance", "host-b", "wget", "--for", "2h", "--summary", "reinstalling wget", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "unscheduled maintenance of host-b:wget until ")
	assert.Contains(t, res.stdout, ": reinstalling wget (1 failing check(s) acknowledged)")
	res = runCLI(t, "", "health", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "unscheduled maintenance of host-b:wget until ")
}

// starter list --failed lists the jobs with a failed hook in failed_checks,
// naming the hooks.
func TestListFailedReadsFailedChecks(t *testing.T) {
	srv := testredis.Start(t)
	ctx := context.Background()
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	h, err := fleethealth.FromConfig(store, &cfg)
	require.NoError(t, err)
	for i, raw := range []string{"https://ok.example/", "https://bad.example/"} {
		id := fmt.Sprintf("job%d", i)
		require.NoError(t, store.CreateJob(ctx, rkeys.Job{Ident: id, URL: raw, FetchDepth: "shallow", WorkflowID: id}))
		st := model.StatusSucceeded
		if i == 1 {
			st = model.StatusFailed
		}
		_, err := h.Record(ctx, fleethealth.Outcome{Host: "host-a", Ident: id, OpID: "op", Result: model.ArchiveResult{
			Plugin: "wget", Hook: "on_Snapshot__50_wget.sh", Status: st, ExitCode: 1}})
		require.NoError(t, err)
	}
	res := runCLI(t, "", "list", "--failed", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "job1 ")
	assert.NotContains(t, res.stdout, "job0 ")
	assert.Contains(t, res.stdout, "  failed: on_Snapshot__50_wget.sh\n")
	res = runCLI(t, "", "list", "--failed", "--json", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	var out struct {
		Jobs []struct {
			Ident       string   `json:"ident"`
			FailedHooks []string `json:"failed_hooks"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	require.Len(t, out.Jobs, 1)
	assert.Equal(t, "job1", out.Jobs[0].Ident)
	assert.Equal(t, []string{"on_Snapshot__50_wget.sh"}, out.Jobs[0].FailedHooks)
}
