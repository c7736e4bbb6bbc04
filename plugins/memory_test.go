package plugins_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/cdptest"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/hostile"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// TestBrowserHooksStopAtTheMemoryLimit runs the browser hooks on a gzip
// bomb (10 MB on the wire, 10 GiB of zeros inflated) under a memory limit,
// once with the cgroup a worker finds (where the host has one) and once
// with rlimits only (RLIMIT_DATA, as on a host without a writable
// cgroup): each ends failed at once, naming the limit, with nothing left
// running; without the watch Chromium would wait for the dead renderer
// until the hook's timeout, and the runner would retry it.
func TestBrowserHooksStopAtTheMemoryLimit(t *testing.T) {
	if !haveChromium() {
		t.Skip("no Chromium")
	}
	cdptest.Exclusive(t) // its hooks' timeouts are part of what it checks
	bomb := hostile.NewGzipBomb(10 << 30)
	srv := httptest.NewServer(bomb)
	t.Cleanup(srv.Close)
	for _, mech := range []struct{ name, cgroup string }{{"cgroup or rlimit", ""}, {"rlimit", procs.CgroupNone}} {
		t.Run(mech.name, func(t *testing.T) {
			snap := newSnapshot(t, srv.URL+"/")
			snap.cgroup = mech.cgroup
			for _, plugin := range []string{"screenshot", "pdf", "dom"} {
				// A quarter of the default keeps the test short: the bomb's
				// renderer reaches 512 MiB in about 5 s (1 GiB: 13-15 s),
				// and Chromium's other processes start well below it.
				snap.env[hooks.MaxMemoryKey(plugin)] = "512MiB"
				start := time.Now()
				r := snap.run(context.Background(), hookOf(t, plugin), userAgent(t, plugin))
				took := time.Since(start)
				requireFinal(t, r, model.StatusFailed)
				require.NotNil(t, r.last())
				assert.Contains(t, r.last().Error, "memory limit 512 MiB", plugin)
				assert.Equal(t, "stopped at the memory limit", r.last().OutputStr)
				out := r.outputJSON(t)
				assert.Equal(t, "memory", out["limit"])
				t.Logf("%s (%s): %s after %s; runner limit %q %s", plugin, mech.name, r.last().Error, took.Round(100*time.Millisecond), r.res.Limit, r.res.LimitError)
				assert.Less(t, took, 50*time.Second, "%s gave up before its 60 s timeout", plugin)
				if mech.cgroup == procs.CgroupNone {
					assert.Equal(t, true, out["rlimit_data"])
				}
			}
		})
	}
}
