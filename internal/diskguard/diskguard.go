// Package diskguard keeps a worker process from claiming work while the
// filesystem of its archive dir is low on space (config
// worker.min_free_disk): a Guard measures the free space (an injectable
// function, so tests never fill a disk), says when it falls under the
// minimum and when it is back, in the log and to whoever watches it (the
// pipeline:ID record), and a worker's activity slots wait on it
// (SlotSupplier), so the worker polls no new task — no crawl page, no
// snapshot host — until space is back. Work it already holds runs on.
package diskguard

import (
	"context"
	"fmt"
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
	changed  chan struct{} // closed and replaced on every change of low
	onChange []func()
}

// New returns a guard of dir's filesystem: low when free(dir) is under
// minFree bytes (minFree > 0). It starts not low; Check measures.
func New(dir string, minFree int64, free FreeFunc, log *zap.Logger) (*Guard, error) {
	switch {
	case minFree <= 0:
		return nil, fmt.Errorf("disk guard of %s: min free %d: must be > 0 (0 turns the guard off: make none)", dir, minFree)
	case free == nil:
		return nil, fmt.Errorf("disk guard of %s: free space function must not be nil", dir)
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Guard{dir: dir, min: minFree, free: free, log: log.Named("diskguard"), changed: make(chan struct{})}, nil
}

// OnChange adds f, called (outside the guard's lock) after every change
// between low and not low.
func (g *Guard) OnChange(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onChange = append(g.onChange, f)
}

// Check measures the free space once and updates the guard; it returns
// whether the disk is low. A failed measurement is logged and changes
// nothing (the guard never stops a worker on a reading it could not make).
func (g *Guard) Check() bool {
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
	close(g.changed)
	g.changed = make(chan struct{})
	calls := append([]func(){}, g.onChange...)
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
// space and the minimum, for the pipeline record and operators.
func (g *Guard) Reason() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.low {
		return ""
	}
	return fmt.Sprintf("archive disk low: %s free, under worker.min_free_disk %s: not claiming work",
		bytesize.Format(g.avail), bytesize.Format(g.min))
}

// Wait returns once the disk is not low (at once when it is not), or
// with ctx's error.
func (g *Guard) Wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		low, changed := g.low, g.changed
		g.mu.Unlock()
		if !low {
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
