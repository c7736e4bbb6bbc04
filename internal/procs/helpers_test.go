package procs

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// testDeadline bounds every hook run in tests; generous for a loaded machine.
const testDeadline = 2 * time.Minute

// writeHook writes an executable /bin/sh script into a fresh temp dir and
// returns its path.
func writeHook(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

// specFor returns a Spec running hook in a fresh SNAP_DIR/plugin directory.
func specFor(t *testing.T, hook string) Spec {
	t.Helper()
	name := filepath.Base(hook)
	return Spec{
		Path:  hook,
		Args:  []string{"--url=https://example.com/", "--snapshot-id=snap1"},
		Env:   []string{"PATH=" + os.Getenv("PATH")},
		Dir:   filepath.Join(t.TempDir(), "plugin"),
		Stem:  strings.TrimSuffix(name, filepath.Ext(name)),
		Grace: 10 * time.Second,
		Log:   zaptest.NewLogger(t),
	}
}

func runSpec(t *testing.T, s Spec) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	res, err := Run(ctx, s)
	require.NoError(t, err)
	return res
}

// gone reports whether pid no longer names a live process (a zombie left
// for a non-reaping init counts as gone: it runs nothing).
func gone(pid int) bool {
	st, err := readStat(pid)
	return err != nil || st.State == 'Z' || st.State == 'X'
}

// readPID waits for a file holding a pid (written by a fixture) and parses it.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, testDeadline, 5*time.Millisecond, "fixture never wrote %s", path)
	return pid
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := os.Stat(path)
		return err == nil
	}, testDeadline, 5*time.Millisecond, "fixture never created %s", path)
}
