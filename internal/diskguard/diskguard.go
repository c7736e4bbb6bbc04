// Package diskguard keeps a worker process from claiming work while the
// filesystem of its archive dir is low on space (config
// worker.min_free_disk): a Guard measures the free space (an injectable
// function, so tests never fill a disk), says when it falls under the
// minimum and when it is back, in the log and to whoever watches it (the
// pipeline:ID record), and a worker's activity slots wait on it
// (SlotSupplier), so the worker polls no new task — no crawl page, no
// snapshot host — until space is back. Work it already holds runs on.
//
// Other reasons to stop claiming work hold the same guard (Hold, Release):
// a host-wide maintenance (internal/fleethealth) drains the worker through
// the same slots until it ends. With no minimum (0) the guard reads no
// disk and only holds.
package diskguard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/bytesize"
	"github.com/archiveflow/archiveflow/internal/slotgate"
)

// FreeFunc returns the bytes available to the worker on the filesystem
// of dir.
type FreeFunc func(dir string) (int64, error)

// Guard watches one directory's free space against a minimum.
type Guard struct {
	dir  string
	min  int64
	free FreeFunc
	log  *zap.Logger

	mu       sync.Mutex
	low      bool
	avail    int64
	holds    map[string]string // name → reason (Hold)
	changed  chan struct{}     // closed and replaced on every change of held
	onChange []func()
}

// New returns a guard of dir's filesystem: low when free(dir) is under
// minFree bytes. It starts not low; Check measures. minFree 0 reads no
// disk: the guard only holds (Hold).
func New(dir string, minFree int64, free FreeFunc, log *zap.Logger) (*Guard, error) {
	switch {
	case minFree < 0:
		return nil, fmt.Errorf("disk guard of %s: min free %d: must be >= 0 (0: no disk minimum, holds only)", dir, minFree)
	case free == nil && minFree > 0:
		return nil, fmt.Errorf("disk guard of %s: free space function must not be nil", dir)
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Guard{dir: dir, min: minFree, free: free, log: log.Named("diskguard"), holds: map[string]string{}, changed: make(chan struct{})}, nil
}

// held reports whether the worker claims no work; g.mu is held.
func (g *Guard) held() bool { return g.low || len(g.holds) > 0 }

// changedLocked wakes the waiters and returns the OnChange calls to make
// (outside the lock) after held changed; g.mu is held.
func (g *Guard) changedLocked() []func() {
	close(g.changed)
	g.changed = make(chan struct{})
	return append([]func(){}, g.onChange...)
}

// Hold keeps the worker from claiming work for reason (say what and until
// when) until Release(name); a second Hold of name replaces its reason.
func (g *Guard) Hold(name, reason string) {
	g.mu.Lock()
	was, old := g.held(), g.holds[name]
	g.holds[name] = reason
	var calls []func()
	if !was || old != reason {
		calls = g.changedLocked()
	}
	g.mu.Unlock()
	if old != reason {
		g.log.Warn("not claiming work", zap.String("hold", name), zap.String("reason", reason))
	}
	for _, f := range calls {
		f()
	}
}

// Release ends the hold name; the worker claims work again unless
// something else holds it.
func (g *Guard) Release(name string) {
	g.mu.Lock()
	if _, ok := g.holds[name]; !ok {
		g.mu.Unlock()
		return
	}
	delete(g.holds, name)
	calls := g.changedLocked()
	g.mu.Unlock()
	g.log.Info("hold released", zap.String("hold", name))
	for _, f := range calls {
		f()
	}
}

// OnChange adds f, called (outside the guard's lock) after every change
// of whether or why the worker claims no work (the disk, a hold).
func (g *Guard) OnChange(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onChange = append(g.onChange, f)
}

// Check measures the free space once and updates the guard; it returns
// whether the disk is low. A failed measurement is logged and changes
// nothing (the guard never stops a worker on a reading it could not make).
func (g *Guard) Check() bool {
	if g.min == 0 {
		return false
	}
	avail, err := g.free(g.dir)
	g.mu.Lock()
	if err != nil {
		low := g.low
		g.mu.Unlock()
		g.log.Warn("cannot read the archive disk's free space; the disk guard keeps its state", zap.String("dir", g.dir), zap.Bool("low", low), zap.Error(err))
		return low
	}
	g.avail = avail
	low := avail < g.min
	if low == g.low {
		g.mu.Unlock()
		return low
	}
	g.low = low
	calls := g.changedLocked()
	g.mu.Unlock()
	if low {
		g.log.Warn("archive disk low: not claiming work until space is back", zap.String("dir", g.dir),
			zap.Int64("free_bytes", avail), zap.Int64("min_free_bytes", g.min))
	} else {
		g.log.Info("archive disk has space again: claiming work", zap.String("dir", g.dir),
			zap.Int64("free_bytes", avail), zap.Int64("min_free_bytes", g.min))
	}
	for _, f := range calls {
		f()
	}
	return low
}

// Run checks every interval until ctx ends (the first check at once).
func (g *Guard) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		g.Check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reason says why the worker claims no work ("" while it does): the free
// space and the minimum, and every hold's reason, for the pipeline record
// and operators.
func (g *Guard) Reason() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var why []string
	if g.low {
		why = append(why, fmt.Sprintf("archive disk low: %s free, under worker.min_free_disk %s: not claiming work",
			bytesize.Format(g.avail), bytesize.Format(g.min)))
	}
	for _, name := range slices.Sorted(maps.Keys(g.holds)) {
		why = append(why, g.holds[name]+": not claiming work")
	}
	return strings.Join(why, "; ")
}

// Wait returns once the disk is not low and nothing holds the worker (at
// once when so), or with ctx's error.
func (g *Guard) Wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		held, changed := g.held(), g.changed
		g.mu.Unlock()
		if !held {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// SlotSupplier wraps a worker's activity slot supplier: a slot is
// reserved (and so a task polled) only while the disk is not low
// (slotgate.Supplier with the guard as its gate).
func (g *Guard) SlotSupplier(inner worker.SlotSupplier) worker.SlotSupplier {
	return slotgate.Supplier(inner, g)
}
