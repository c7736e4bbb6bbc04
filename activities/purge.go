package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// Purger removes finished jobs whose retention has passed from Redis
// (internal/purge adapts internal/rkeys and internal/frontier to it).
type Purger interface {
	// PurgeBatch removes at most limit due jobs and reports what it did
	// and whether more are due.
	PurgeBatch(ctx context.Context, limit int) (PurgeReport, error)
}

// PurgeBatchInput is one PurgeBatch call.
type PurgeBatchInput struct {
	// Limit is the most jobs this call removes (config purge.batch).
	Limit int `json:"limit"`
}

// PurgeReport is what one PurgeBatch call removed.
type PurgeReport struct {
	Jobs int `json:"jobs"` // jobs removed
	Keys int `json:"keys"` // keys of them that were still there (crawl keys included)
	// More reports jobs still due after this call.
	More bool `json:"more"`
}

// PurgeActivities run the purge Schedule's workflow (workflows.PurgeWorkflow).
type PurgeActivities struct {
	purger Purger
	log    *zap.Logger
}

// NewPurge builds the purge activities.
func NewPurge(p Purger, log *zap.Logger) (*PurgeActivities, error) {
	if p == nil {
		return nil, errors.New("purge activities: purger must not be nil")
	}
	log = cmp.Or(log, zap.NewNop())
	return &PurgeActivities{purger: p, log: log}, nil
}

// PurgeBatch removes one bounded batch of finished jobs whose retention
// has passed. A repeat is safe: a job already removed is no longer due.
func (a *PurgeActivities) PurgeBatch(ctx context.Context, in PurgeBatchInput) (PurgeReport, error) {
	if in.Limit < 1 {
		return PurgeReport{}, invalidInput("purge batch: limit %d: must be >= 1", in.Limit)
	}
	rep, err := a.purger.PurgeBatch(ctx, in.Limit)
	if err != nil {
		return rep, fmt.Errorf("purge batch of %d: %w", in.Limit, err)
	}
	if rep.Jobs > 0 {
		a.log.Info("purged finished jobs", zap.Int("jobs", rep.Jobs), zap.Int("keys", rep.Keys), zap.Bool("more", rep.More))
	}
	return rep, nil
}
