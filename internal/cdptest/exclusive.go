package cdptest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ExclusiveLock is the file whose lock Exclusive holds. It is one path
// for every test binary of the module on the machine (the packages of
// `go test ./...` run side by side), independent of TMPDIR, which some
// packages set for their own processes.
var ExclusiveLock = filepath.Join(lockDir(), "archiveflow-test-browsers.lock")

func lockDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return d
	}
	return "/tmp"
}

// Exclusive makes the calling test the only browser-heavy test on the
// machine until it ends: it waits for any other test holding the lock
// (in this or another test binary) and releases it at the test's
// cleanup. Tests that drive several Chromium renderers at once, or whose
// assertions depend on a browser answering within a hook's timeout, take
// it: two of them on two cores made a PDF hook's Chromium hang to its
// timeout in CI.
func Exclusive(t testing.TB) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(ExclusiveLock), 0o755))
	f, err := os.OpenFile(ExclusiveLock, os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() }) // closing the file releases its lock
	start := time.Now()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		t.Logf("waiting for %s: another browser-heavy test runs", ExclusiveLock)
		require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX), "lock %s", ExclusiveLock)
		t.Logf("waited %s for %s", time.Since(start).Round(time.Millisecond), ExclusiveLock)
	}
}
