// Package purge owns removing finished jobs from Redis once their retention
// has passed (DESIGN.md §9): which jobs are due (rkeys' scheduled-purge),
// removing each with every key it left behind (rkeys' job keys and index
// entries, and a crawl's frontier through internal/frontier, its owner), in
// bounded batches, and the Temporal Schedule that runs the purge workflow
// (workflows.PurgeWorkflow) every purge.interval. The workers create the
// Schedule at start (EnsureSchedule); `starter purge` runs a purge at once.
package purge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Purger removes due jobs. It is the production activities.Purger.
type Purger struct {
	store    *rkeys.Store
	front    *frontier.Frontier
	keyBatch int
	health   *fleethealth.Health
	now      func() time.Time
	log      *zap.Logger
}

var _ activities.Purger = (*Purger)(nil)

// Options configure a Purger.
type Options struct {
	// KeyBatch is the most keys deleted per round trip (config purge.key_batch).
	KeyBatch int
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *zap.Logger
	// Health, when set, loses a purged job's checks with it (its job ×
	// hook checks and failed_checks members).
	Health *fleethealth.Health
}

// New returns a Purger over the job layout store and the crawl frontier.
func New(store *rkeys.Store, front *frontier.Frontier, o Options) (*Purger, error) {
	switch {
	case store == nil || front == nil:
		return nil, errors.New("purge: store and frontier are required")
	case o.KeyBatch < 1:
		return nil, fmt.Errorf("purge key batch %d: must be >= 1", o.KeyBatch)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return &Purger{store: store, front: front, keyBatch: o.KeyBatch, health: o.Health, now: o.Now, log: o.Log.Named("purge")}, nil
}

// Job is one job due for purge and what is left of it.
type Job struct {
	rkeys.DueJob
	// FrontierKeys are the crawl frontier's keys that may exist.
	FrontierKeys []string
}

// Due lists up to limit jobs due now, the earliest first, and whether more
// are due. It changes nothing.
func (p *Purger) Due(ctx context.Context, limit int) ([]Job, bool, error) {
	due, err := p.store.PurgeDue(ctx, p.now(), limit+1)
	if err != nil {
		return nil, false, err
	}
	more := len(due) > limit
	if more {
		due = due[:limit]
	}
	out := make([]Job, len(due))
	for i, d := range due {
		fk, err := p.front.JobKeys(ctx, d.Ident)
		if err != nil {
			return nil, false, fmt.Errorf("list frontier keys of job %s: %w", d.Ident, err)
		}
		out[i] = Job{DueJob: d, FrontierKeys: fk}
	}
	return out, more, nil
}

// PurgeBatch removes up to limit due jobs: for each, first its crawl
// frontier (if any), then its own keys and index entries, its
// scheduled-purge entry last, so an interrupted purge is finished by the
// next one. A job submitted again or retried meanwhile is left alone.
func (p *Purger) PurgeBatch(ctx context.Context, limit int) (activities.PurgeReport, error) {
	var rep activities.PurgeReport
	due, more, err := p.Due(ctx, limit)
	if err != nil {
		return rep, err
	}
	rep.More = more
	for _, j := range due {
		if j.State != "" && !j.State.Final() {
			// Submitted again or retried since it was listed: its keys
			// are the new run's; PurgeJob drops the stale entry only.
			j.FrontierKeys = nil
		}
		if len(j.FrontierKeys) > 0 {
			if err := p.front.Delete(ctx, j.Ident, p.keyBatch); err != nil {
				return rep, fmt.Errorf("purge job %s: %w", j.Ident, err)
			}
		}
		if p.health != nil && (j.State == "" || j.State.Final()) {
			if _, err := p.health.PurgeJob(ctx, j.Ident); err != nil {
				return rep, fmt.Errorf("purge job %s: %w", j.Ident, err)
			}
		}
		purged, n, err := p.store.PurgeJob(ctx, j.Ident, p.now())
		if err != nil {
			return rep, err
		}
		if purged {
			rep.Jobs++
			rep.Keys += n + len(j.FrontierKeys)
			p.log.Debug("purged job", logging.Ident(j.Ident), zap.Int("keys", n), zap.Int("frontier_keys", len(j.FrontierKeys)))
		}
	}
	return rep, nil
}

// FromConfig returns the Purger of a process's Redis connection and layout
// store, with config purge.key_batch.
func FromConfig(rdb redis.UniversalClient, store *rkeys.Store, cfg *config.Config, log *zap.Logger) (*Purger, error) {
	front, err := frontier.New(rdb, store.Keys(), frontier.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("purge: %w", err)
	}
	health, err := fleethealth.FromConfig(store, cfg)
	if err != nil {
		return nil, fmt.Errorf("purge: %w", err)
	}
	return New(store, front, Options{KeyBatch: cfg.Purge.KeyBatch, Log: log, Health: health})
}
