package workflows

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// TestReplayRecordedHistories replays every history recorded on a real dev
// server (workflows/devtest and internal/purge's schedule test,
// ARCHIVEFLOW_RECORD_HISTORIES=1) against the
// current workflow code: a change that breaks determinism fails here and
// must be guarded with workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in testdata")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			Register(r)
			logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(logger, file))
		})
	}
}
