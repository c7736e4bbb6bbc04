package procs

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

func TestStatusMapping(t *testing.T) {
	rec := func(st string) string {
		return `echo '{"type":"ArchiveResult","status":"` + st + `","output_str":"out-` + st + `"}'`
	}
	tests := []struct {
		name      string
		body      string
		status    model.Status // "" = transient
		soft      bool
		exit      int
		signal    syscall.Signal
		outputStr string
	}{
		{"record succeeded", rec("succeeded"), model.StatusSucceeded, false, 0, 0, "out-succeeded"},
		{"record noresults", rec("noresults"), model.StatusNoResults, false, 0, 0, "out-noresults"},
		{"record skipped", rec("skipped"), model.StatusSkipped, false, 0, 0, "out-skipped"},
		{"record failed exit 0 is a soft failure", rec("failed"), model.StatusFailed, true, 0, 0, "out-failed"},
		{"last record wins (failed)", rec("succeeded") + "\n" + rec("failed"), model.StatusFailed, true, 0, 0, "out-failed"},
		{"last record wins (succeeded)", rec("failed") + "\n" + rec("succeeded"), model.StatusSucceeded, false, 0, 0, "out-succeeded"},
		{"invalid last record ignored", rec("succeeded") + "\n" + rec("done"), model.StatusSucceeded, false, 0, 0, "out-succeeded"},
		{"record then non-zero exit is a partial success", rec("succeeded") + "\nexit 3", "", false, 3, 0, "out-succeeded"},
		{"skipped record with exit 10 is final", rec("skipped") + "\nexit 10", model.StatusSkipped, false, 10, 0, "out-skipped"},
		{"failed record with non-zero exit is retried", rec("failed") + "\nexit 1", "", false, 1, 0, "out-failed"},
		{"exit 0 without record", "echo hello", model.StatusNoResults, false, 0, 0, ""},
		{"exit 10 without record", "exit 10", model.StatusSkipped, false, 10, 0, ""},
		{"exit 1 without record", "echo oops >&2; exit 1", "", false, 1, 0, ""},
		{"exit 2 without record", "exit 2", "", false, 2, 0, ""},
		{"crash by signal", "kill -KILL $$", "", false, 137, syscall.SIGKILL, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := runSpec(t, specFor(t, writeHook(t, "on_Snapshot__10_map.sh", tc.body)))
			assert.Equal(t, tc.exit, res.ExitCode)
			assert.Equal(t, tc.signal, res.Signal)
			assert.False(t, res.TimedOut)
			assert.False(t, res.Canceled)
			if tc.status == "" {
				require.True(t, res.Transient, "want transient, got %s (%s)", res.Status, res.Reason)
				assert.Empty(t, res.Status)
				require.ErrorIs(t, res.Err(), ErrTransient)
				var te *TransientError
				require.True(t, errors.As(res.Err(), &te))
				assert.Equal(t, "on_Snapshot__10_map", te.Hook)
				assert.Equal(t, res.AttemptID, te.AttemptID)
				assert.NotEmpty(t, res.ArchiveResult().Error)
				// A partial success keeps what the hook reported.
				assert.Equal(t, tc.outputStr, res.ArchiveResult().OutputStr)
				return
			}
			require.False(t, res.Transient, "unexpected transient: %s", res.Reason)
			require.NoError(t, res.Err())
			assert.Equal(t, tc.status, res.Status)
			assert.Equal(t, tc.soft, res.SoftFailed)
			ar := res.ArchiveResult()
			assert.Equal(t, tc.status, ar.Status)
			assert.Equal(t, tc.outputStr, ar.OutputStr)
			assert.Equal(t, tc.exit, ar.ExitCode)
		})
	}
}

func TestTransientErrorCarriesStderr(t *testing.T) {
	res := runSpec(t, specFor(t, writeHook(t, "h.sh", "echo first >&2\necho 'wget: connection refused' >&2\nexit 4")))
	require.True(t, res.Transient)
	assert.Equal(t, []string{"first", "wget: connection refused"}, res.StderrTail)
	assert.Contains(t, res.Err().Error(), "exit 4 without ArchiveResult record")
	assert.Contains(t, res.Err().Error(), "wget: connection refused")
	// The result records the cause first; its hook and attempt are the
	// record's own fields, so they do not open its error.
	assert.Equal(t, "wget: connection refused (exit 4 without ArchiveResult record)", res.ArchiveResult().Error)
}
