package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

func TestPipelinesShowsTheLogBacklog(t *testing.T) {
	srv := testredis.Start(t)
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	ctx := context.Background()
	base := rkeys.Pipeline{Hostname: "w1", FQDN: "w1", Status: "running", StartedAt: time.Now(), TaskQueues: []string{"archiveflow"}}
	spooling, plain := base, base
	spooling.ID, spooling.PID, spooling.Nickname = rkeys.PipelineID("w1", "w1", 1), 1, "spooling"
	spooling.LogOutbox = &rkeys.OutboxBacklog{Pending: 3, Rejected: 1}
	plain.ID, plain.PID, plain.Nickname = rkeys.PipelineID("w1", "w1", 2), 2, "older-worker"
	require.NoError(t, store.RegisterPipeline(ctx, spooling))
	require.NoError(t, store.RegisterPipeline(ctx, plain))

	res := runCLI(t, "", "pipelines", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "LOG BACKLOG")
	assert.Regexp(t, `spooling .* 3 waiting, 1 rejected`, res.stdout)
	assert.Regexp(t, `older-worker .* - +archiveflow`, res.stdout, "a worker that does not report it shows -")

	res = runCLI(t, "", "pipelines", "--json", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	var out struct{ Pipelines []pipelineJSON }
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	byNick := map[string]pipelineJSON{}
	for _, p := range out.Pipelines {
		byNick[p.Nickname] = p
	}
	assert.Equal(t, &logBacklogJSON{Pending: 3, Rejected: 1}, byNick["spooling"].LogOutbox)
	assert.Nil(t, byNick["older-worker"].LogOutbox)
}

func TestParseLogBacklogNamesABadField(t *testing.T) {
	var warned []string
	b := parseLogBacklog("abc", map[string]string{"log_outbox_pending": "lots", "log_outbox_rejected": "0"},
		func(m string) { warned = append(warned, m) })
	assert.Nil(t, b)
	assert.Equal(t, []string{`pipeline abc: log_outbox_pending "lots": must be a count (non-negative integer)`}, warned)
}

func TestPipelinesSayWhyAWorkerClaimsNoWork(t *testing.T) {
	srv := testredis.Start(t)
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	ctx := context.Background()
	p := rkeys.Pipeline{ID: rkeys.PipelineID("w1", "w1", 7), PID: 7, Hostname: "w1", FQDN: "w1", Status: "running",
		StartedAt: time.Now(), TaskQueues: []string{"archiveflow"},
		NotClaiming: "archive disk low: 512 MiB free, under worker.min_free_disk 1 GiB: not claiming work"}
	require.NoError(t, store.RegisterPipeline(ctx, p))

	res := runCLI(t, "", "pipelines", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, p.ID+": "+p.NotClaiming)
	res = runCLI(t, "", "pipelines", "--json", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	var out struct{ Pipelines []pipelineJSON }
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	require.Len(t, out.Pipelines, 1)
	assert.Equal(t, p.NotClaiming, out.Pipelines[0].NotClaiming)
}
