package pools

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// A host-wide maintenance of this worker's host holds its guard (even
// with the disk minimum off), and the worker claims again by itself once
// it ends; a maintenance of another host or of one plugin does not drain
// it, but the plugin's hooks are skipped here.
func TestHostMaintenanceDrainsAndResumes(t *testing.T) {
	srv := testredis.Start(t)
	cfg := config.Default()
	cfg.Worker.MinFreeDisk = "0"
	cfg.Flapjack.MaintenancePoll = 20 * time.Millisecond
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	health, err := fleethealth.FromConfig(store, &cfg)
	require.NoError(t, err)
	d := Deps{Config: &cfg, Health: health, Nickname: "host-a"}
	guard, stop, err := startDiskGuard(d, t.TempDir(), zap.NewNop())
	require.NoError(t, err)
	defer stop()
	require.NotNil(t, guard, "fleet health needs a guard to hold")
	stopWatch := watchMaintenance(d, guard, zap.NewNop())
	defer stopWatch()
	ctx := context.Background()
	known := fleethealth.Known{Hosts: []string{"host-a", "host-b"}}

	_, err = health.Start(ctx, fleethealth.Maintenance{Host: "host-b", Check: fleethealth.HostWide, End: time.Now().Add(time.Hour), Summary: "other host"}, known)
	require.NoError(t, err)
	_, err = health.Start(ctx, fleethealth.Maintenance{Host: "host-a", Check: fleethealth.HostWide, End: time.Now().Add(3 * time.Second), Summary: "kernel upgrade"}, known)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return guard.Reason() != "" }, 10*time.Second, 10*time.Millisecond, "drained")
	assert.Contains(t, guard.Reason(), "unscheduled maintenance of host-a until ")
	assert.Contains(t, guard.Reason(), ": kernel upgrade: not claiming work")
	assert.Empty(t, pluginMaintenance(d, zap.NewNop())(ctx, "wget"), "a host-wide maintenance skips no hook: claimed work runs on")
	require.Eventually(t, func() bool { return guard.Reason() == "" }, 15*time.Second, 20*time.Millisecond, "resumed by itself when it ended")
	require.NoError(t, guard.Wait(ctx))
}

// The pipeline record says how many of its host's checks are critical.
func TestPipelineRecordCountsCriticalChecks(t *testing.T) {
	srv := testredis.Start(t)
	cfg := config.Default()
	cfg.Flapjack.CriticalAfter = 1
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	health, err := fleethealth.FromConfig(store, &cfg)
	require.NoError(t, err)
	pipe, err := NewRedisPipeline(store, "host-a", t.TempDir())
	require.NoError(t, err)
	pipe.health = health
	ctx := context.Background()
	key := "pipeline:" + pipe.ID()
	require.NoError(t, pipe.Register(ctx, []string{"default"}))
	assert.Equal(t, "0", srv.Client().HGet(ctx, key, "critical_checks").Val())

	require.NoError(t, srv.Client().HSet(ctx, "job1", "state", "active").Err())
	for i, p := range []string{"wget", "chrome", "pdf"} {
		st := model.StatusFailed
		if p == "pdf" {
			st = model.StatusSucceeded
		}
		_, err := health.Record(ctx, fleethealth.Outcome{Host: "host-a", Ident: "job1", OpID: p, Result: model.ArchiveResult{
			Plugin: p, Hook: "h" + string(rune('0'+i)), Status: st, ExitCode: 1}})
		require.NoError(t, err)
	}
	require.NoError(t, pipe.Refresh(ctx))
	assert.Equal(t, "2", srv.Client().HGet(ctx, key, "critical_checks").Val())
}

// A crawl page's hooks take the plugin's maintenance as read up to
// crawl.live_interval ago (activities.CrawlPage), not a read per hook of
// every page; any other hook reads it each time.
func TestCrawlPagesKeepThePluginMaintenanceAWhile(t *testing.T) {
	srv := testredis.Start(t)
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	health, err := fleethealth.FromConfig(store, &cfg)
	require.NoError(t, err)
	ask := pluginMaintenance(Deps{Config: &cfg, Health: health, Nickname: "host-a"}, zap.NewNop())
	ctx := context.Background()
	page := activities.CrawlPageContext(ctx, time.Hour)

	require.NoError(t, srv.Client().HSet(ctx, "job1", "state", "active").Err())
	_, err = health.Record(ctx, fleethealth.Outcome{Host: "host-a", Ident: "job1", OpID: "k", Result: model.ArchiveResult{
		Plugin: "wget", Hook: "h", Status: model.StatusSucceeded}}) // wget ran on host-a
	require.NoError(t, err)
	assert.Empty(t, ask(page, "wget"))
	_, err = health.Start(ctx, fleethealth.Maintenance{Host: "host-a", Check: "wget", End: time.Now().Add(time.Hour), Summary: "reinstalling"},
		fleethealth.Known{Hosts: []string{"host-a"}})
	require.NoError(t, err)
	assert.Empty(t, ask(page, "wget"), "a crawl page: the answer read a moment ago")
	assert.Contains(t, ask(ctx, "wget"), "reinstalling", "any other hook: read now")
	assert.Contains(t, ask(activities.CrawlPageContext(ctx, 0), "wget"), "reinstalling", "an answer older than the interval is read again")
}
