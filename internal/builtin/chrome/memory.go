package chrome

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/archiveflow/archiveflow/internal/bytesize"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// Memory is the memory limit Chromium runs under: the browser hook's own
// (procs.OwnMemoryLimit), which every Chromium process inherits.
//
// Headless Chromium does not end when one of its processes dies: a
// renderer ended by the limit (the OOM killer in a cgroup; a refused
// allocation under RLIMIT_DATA, which Chromium turns into a crash) leaves
// the browser waiting for a page that never loads, until the hook's
// timeout. Run watches for that and stops Chromium at once with a
// *MemoryError.
type Memory struct {
	Limit int64 // bytes; 0: no limit, nothing is watched
	// PerProcess: the limit is RLIMIT_DATA, each process's data segment.
	// Otherwise it is a cgroup's, Chromium's processes together, and
	// OOMKills counts the cgroup's OOM kills.
	PerProcess bool
	OOMKills   func() int64
	Peak       func() int64 // the cgroup's peak use; may be nil
}

// memoryPoll is how often Run looks at Chromium's processes.
const memoryPoll = 200 * time.Millisecond

// MemoryError is a capture stopped because a Chromium process ran into
// the memory limit.
type MemoryError struct {
	Limit      int64
	PerProcess bool
	Process    string        // the kind of process that ended ("renderer", "browser", ...), "" if unknown
	Data       int64         // RLIMIT_DATA: its data segment at the last look
	PeakRSS    int64         // the largest RSS seen of one Chromium process
	PeakTotal  int64         // the largest RSS seen of Chromium's processes together
	CgroupPeak int64         // cgroup: its peak use (0: unknown)
	After      time.Duration // from Chromium's start to the stop
}

func (e *MemoryError) Error() string {
	var b strings.Builder
	proc := "a Chromium process"
	if e.Process != "" {
		proc = "the Chromium " + e.Process + " process"
	}
	if e.PerProcess {
		fmt.Fprintf(&b, "memory limit %s reached (RLIMIT_DATA): %s died at %s of data", bytesize.Format(e.Limit), proc, bytesize.Format(e.Data))
	} else {
		fmt.Fprintf(&b, "memory limit %s exceeded: the OOM killer ended %s", bytesize.Format(e.Limit), proc)
		if e.CgroupPeak > 0 {
			fmt.Fprintf(&b, " (cgroup peak %s)", bytesize.Format(e.CgroupPeak))
		}
	}
	fmt.Fprintf(&b, "; peak RSS %s (summed over its processes %s); Chromium stopped after %s, not retried",
		bytesize.Format(e.PeakRSS), bytesize.Format(e.PeakTotal), e.After.Round(100*time.Millisecond))
	return b.String()
}

// memoryWatch follows the processes of one Chromium run.
type memoryWatch struct {
	m     Memory
	root  int // the pid Run started
	start time.Time
	kills int64 // the cgroup's OOM kills before the start

	mu        sync.Mutex
	procs     map[procKey]watched // seen at the last look
	peakRSS   int64
	peakTotal int64
	tripped   *MemoryError
}

// procKey is one process instance: a reused pid is another process.
type procKey struct {
	pid   int
	start uint64
}

type watched struct {
	procs.Proc
	kind string // --type= of its command line, "browser" without one
}

func newMemoryWatch(m Memory, root int) *memoryWatch {
	w := &memoryWatch{m: m, root: root, start: time.Now(), procs: map[procKey]watched{}}
	if m.OOMKills != nil {
		w.kills = m.OOMKills()
	}
	return w
}

// run looks every memoryPoll until done is closed or the limit is hit;
// then it calls stop once.
func (w *memoryWatch) run(done <-chan struct{}, stop func()) {
	t := time.NewTicker(memoryPoll)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if w.look() != nil {
			stop()
			return
		}
	}
}

// look takes one look at Chromium's processes and returns the error once
// the limit is hit.
func (w *memoryWatch) look() *MemoryError {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tripped != nil {
		return w.tripped
	}
	seen := map[procKey]watched{}
	var total int64
	for _, p := range procs.Tree(w.root) {
		if p.Zombie {
			continue // ended: judged below with what it had at the last look
		}
		k := procKey{p.PID, p.StartTime}
		// Read each time: a process the zygote forked carries the zygote's
		// command line until it takes its own.
		pw := watched{Proc: p, kind: processKind(p.PID)}
		if prev, ok := w.procs[k]; ok && pw.kind == "" {
			pw.kind = prev.kind
		}
		seen[k] = pw
		total += p.RSS
		w.peakRSS = max(w.peakRSS, p.RSS)
	}
	w.peakTotal = max(w.peakTotal, total)
	switch {
	case !w.m.PerProcess && w.m.OOMKills != nil:
		if w.m.OOMKills() > w.kills {
			w.trip(w.killed(seen))
		}
	case w.m.PerProcess:
		// A process that ended with half the limit or more in its data
		// segment ran into RLIMIT_DATA: Chromium ends a process whose
		// allocation is refused, and the refused one is often a buffer
		// doubling, so the last look may be well below the limit.
		for k, pw := range w.procs {
			if _, ok := seen[k]; !ok && pw.Data >= w.m.Limit/2 {
				w.trip(pw)
				break
			}
		}
	}
	w.procs = seen
	return w.tripped
}

// killed guesses which process the OOM killer ended: the largest one seen
// at the last look that is gone now.
func (w *memoryWatch) killed(seen map[procKey]watched) watched {
	var gone watched
	for k, pw := range w.procs {
		if _, ok := seen[k]; !ok && pw.RSS >= gone.RSS {
			gone = pw
		}
	}
	return gone
}

func (w *memoryWatch) trip(pw watched) {
	e := &MemoryError{Limit: w.m.Limit, PerProcess: w.m.PerProcess, Process: pw.kind, Data: pw.Data,
		PeakRSS: w.peakRSS, PeakTotal: w.peakTotal, After: time.Since(w.start)}
	if w.m.Peak != nil {
		e.CgroupPeak = w.m.Peak()
	}
	w.tripped = e
}

// known lists the processes of the last look.
func (w *memoryWatch) known() []procs.Proc {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]procs.Proc, 0, len(w.procs))
	for _, pw := range w.procs {
		out = append(out, pw.Proc)
	}
	return out
}

// killAll kills every Chromium process of the last look at once: after a
// process died of the limit there is nothing left to save, and a renderer
// busy inflating would take its time over a SIGTERM.
func (w *memoryWatch) killAll() {
	for _, p := range w.known() {
		_ = p.Kill()
	}
}

// endRest waits, once the browser process has exited, for the other
// Chromium processes of the last look to follow it (they do within
// milliseconds when their browser goes), and kills those still running
// after restGrace, so that none outlives the capture.
func (w *memoryWatch) endRest() {
	left := w.known()
	deadline := time.Now().Add(restGrace)
	killed := false
	for {
		alive := left[:0]
		for _, p := range left {
			if p.Running() {
				alive = append(alive, p)
			}
		}
		left = alive
		if len(left) == 0 || (killed && time.Now().After(deadline.Add(restGrace))) {
			return
		}
		if !killed && time.Now().After(deadline) {
			for _, p := range left {
				_ = p.Kill()
			}
			killed = true
		}
		time.Sleep(restPoll)
	}
}

// How long endRest waits for Chromium's processes, and how often it looks.
const (
	restGrace = time.Second
	restPoll  = 10 * time.Millisecond
)

// stopped is the error the watch stopped Chromium with, nil if it did not.
func (w *memoryWatch) stopped() *MemoryError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tripped
}

// verdict is the limit Chromium ran into, if any, once it has ended: the
// last look decides for a browser that ended without being stopped (its
// own process counts as ended).
func (w *memoryWatch) verdict() *MemoryError {
	return w.look()
}

// processKind is the --type= of a Chromium process ("renderer", "zygote",
// "utility", ...), "browser" for the one without it, "" when unreadable.
func processKind(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	// Child processes rewrite their command line (setproctitle), which
	// may join the arguments with spaces.
	_, t, ok := bytes.Cut(b, []byte("--type="))
	if !ok {
		return "browser"
	}
	if i := bytes.IndexAny(t, " \x00"); i >= 0 {
		t = t[:i]
	}
	return string(t)
}
