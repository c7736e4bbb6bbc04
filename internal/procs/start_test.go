package procs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// openHookForWriting writes an executable hook and keeps a descriptor open
// for writing, which makes exec fail with ETXTBSY until it is closed.
func openHookForWriting(t *testing.T, body string) (string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "on_Snapshot__10_busy.sh")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	_, err = f.WriteString("#!/bin/sh\n" + body + "\n")
	require.NoError(t, err)
	return path, f
}

// Not parallel: onBusy is package state.
func TestRunRetriesABusyHookFile(t *testing.T) {
	path, w := openHookForWriting(t, `echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	busy := 0
	onBusy = func() {
		busy++
		require.NoError(t, w.Close()) // the writer finishes
	}
	t.Cleanup(func() { onBusy = nil })

	res := runSpec(t, specFor(t, path))
	assert.Equal(t, 1, busy, "the first exec must have found the file busy")
	assert.Equal(t, model.StatusSucceeded, res.Status)
	assert.Equal(t, 0, res.ExitCode)
}

func TestRunGivesUpOnAFileThatStaysBusy(t *testing.T) {
	path, _ := openHookForWriting(t, "exit 0")
	busy := 0
	onBusy = func() { busy++ }
	t.Cleanup(func() { onBusy = nil })

	_, err := Run(context.Background(), specFor(t, path))
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ETXTBSY)
	assert.Contains(t, err.Error(), "on_Snapshot__10_busy")
	assert.Contains(t, err.Error(), "still open for writing after 2s")
	assert.Greater(t, busy, 3, "start must have tried again before giving up")
}

func TestRunStopsRetryingWhenCanceled(t *testing.T) {
	path, _ := openHookForWriting(t, "exit 0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onBusy = cancel
	t.Cleanup(func() { onBusy = nil })

	_, err := Run(ctx, specFor(t, path))
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ETXTBSY)
	assert.ErrorIs(t, err, context.Canceled)
}
