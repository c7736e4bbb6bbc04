package benchkit

import (
	"crypto/sha256"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// probeData is what Probe hashes: the same bytes every time.
var probeData = make([]byte, 16<<20)

// Probe returns the CPU time one thread spends hashing a fixed 64 MiB
// (SHA-256): the same work every call, so on a machine whose CPU speed
// does not change it costs the same. A shared virtual machine's does
// change (its neighbours, its host's frequency): a bench prints Probe
// beside the crawls it measures, so a round whose processes all spent
// more CPU on the same work can be told from one whose code did more.
func Probe() time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r0, r1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &r0)
	h := sha256.New()
	for range 4 {
		h.Write(probeData)
	}
	_ = h.Sum(nil)
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &r1)
	cpu := func(r unix.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return cpu(r1) - cpu(r0)
}
