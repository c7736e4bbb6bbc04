package pools

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
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
