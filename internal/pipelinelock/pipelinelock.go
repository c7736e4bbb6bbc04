// Package pipelinelock owns a worker process's claim lock (mnbot's claim
// locks, `starter lock PIPELINE IDENT`): while its pipeline is locked to a
// job the process takes no other work — its shared queues' activity slots
// wait on the lock (a slotgate.Gate) — and work it already holds (the
// locked job's hooks on its host queue) runs on. A lock set
// --until-finished is cleared once the job has ended (or its record
// expired); an indefinite one stays until `starter unlock`. The lock
// lives in Redis (rkeys.PipelineLock), so any starter sets it and the
// pipeline's record says why it claims nothing.
package pipelinelock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/slotgate"
)

// Watcher follows one pipeline's lock; it is a slotgate.Gate, closed while
// the lock holds.
type Watcher struct {
	slotgate.Switch
	store *rkeys.Store
	id    string
	log   *zap.Logger
}

// New watches the lock of pipeline id (open until the first Check).
func New(store *rkeys.Store, id string, log *zap.Logger) *Watcher {
	if log == nil {
		log = zap.NewNop()
	}
	return &Watcher{store: store, id: id, log: log.Named("pipelinelock")}
}

// Reason says why a locked pipeline takes no other work.
func Reason(l rkeys.PipelineLock) string {
	until := "until starter unlock"
	if l.UntilFinished {
		until = "until the job ends or starter unlock"
	}
	return fmt.Sprintf("locked to job %s (%s): taking no other work", l.Ident, until)
}

// Check reads the lock once, clears a lock --until-finished whose job has
// ended, and opens or closes the gate. A failed read changes nothing.
func (w *Watcher) Check(ctx context.Context) {
	l, ok, err := w.store.PipelineLockOf(ctx, w.id)
	if err != nil {
		w.log.Warn("cannot read the pipeline's lock; keeping its state", zap.Error(err))
		return
	}
	if ok && l.UntilFinished {
		ended, err := w.ended(ctx, l.Ident)
		if err != nil {
			w.log.Warn("cannot read the locked job's state; keeping the lock", logging.Ident(l.Ident), zap.Error(err))
		} else if ended {
			if _, err := w.store.UnlockPipeline(ctx, w.id, l.Ident); err != nil {
				w.log.Warn("clear the lock of an ended job", logging.Ident(l.Ident), zap.Error(err))
				return
			}
			ok = false
		}
	}
	reason := ""
	if ok {
		reason = Reason(l)
	}
	if !w.Set(reason) {
		return
	}
	if ok {
		w.log.Info("pipeline locked: taking no other work", logging.Ident(l.Ident), zap.Bool("until_finished", l.UntilFinished))
	} else {
		w.log.Info("pipeline unlocked: taking work")
	}
}

// ended reports whether the job has ended (or its record is gone).
func (w *Watcher) ended(ctx context.Context, ident string) (bool, error) {
	v, err := w.store.GetJob(ctx, ident)
	if errors.Is(err, rkeys.ErrJobNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return v.State.Final(), nil
}

// Run checks every interval until ctx ends (the first check at once).
func (w *Watcher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		w.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
