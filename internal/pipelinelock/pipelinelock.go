// Package pipelinelock owns a worker process's claim lock (mnbot's claim
// locks, `starter lock PIPELINE IDENT`): while its pipeline is locked to a
// job the process takes no other work — its shared queues' activity slots
// wait on the lock (a slotgate.Gate), and a claim of another job that a
// poller had already taken is refused (Interceptor) — while work it
// already holds (the locked job's hooks on its host queue) runs on. A lock set
// --until-finished is cleared once the job has ended (or its record
// expired); an indefinite one stays until `starter unlock`. The lock
// lives in Redis (rkeys.PipelineLock), so any starter sets it and the
// pipeline's record says why it claims nothing.
package pipelinelock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
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

	mu    sync.Mutex
	ident string // the job locked to ("" = unlocked)
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
	reason, ident := "", ""
	if ok {
		reason, ident = Reason(l), l.Ident
	}
	w.mu.Lock()
	w.ident = ident
	w.mu.Unlock()
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

// Locked is the job the pipeline is locked to ("" when it is not).
func (w *Watcher) Locked() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ident
}

// Interceptor refuses, on a locked pipeline, the claims of other jobs a
// poller had already taken when the lock closed the gate (a poller holds
// its slot while it polls): the claim fails retryable at once and goes
// back to the queue for another pipeline (it costs the claim one attempt;
// at most one per poller of the pipeline and lock). A job is its
// workflow's ID up to the first "/" (a crawl's start page is IDENT/seed).
func (w *Watcher) Interceptor() interceptor.WorkerInterceptor {
	return slotgate.RefuseClaims(func(info activity.Info) error {
		locked := w.Locked()
		job, _, _ := strings.Cut(info.WorkflowExecution.ID, "/")
		if locked == "" || job == locked {
			return nil
		}
		w.log.Info("claim refused: the pipeline is locked to another job", logging.Ident(job),
			zap.String("locked_to", locked), zap.String("activity", info.ActivityType.Name))
		return temporal.NewApplicationError(fmt.Sprintf("pipeline locked to job %s: claim of job %s left to another pipeline", locked, job), slotgate.ErrTypeLocked)
	})
}
