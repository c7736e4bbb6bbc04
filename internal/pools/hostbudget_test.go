package pools

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
)

// TestKeptTurnsOnlyWithPageBatches: a worker keeps and reuses its hosts'
// turns (crawl.per_host.reuse) only with page batches: the
// page-per-activity claim reads a kept turn as a fetch in flight.
func TestKeptTurnsOnlyWithPageBatches(t *testing.T) {
	cfg := config.Default()
	hc, err := hostBudgetConfig(&cfg)
	require.NoError(t, err)
	require.Equal(t, time.Second, hc.Reuse, "the default: batches, reuse 1s")
	cfg.Crawl.BatchPages = 0
	hc, err = hostBudgetConfig(&cfg)
	require.NoError(t, err)
	require.Zero(t, hc.Reuse, "a page per activity: every fetch asks Redis")
}
