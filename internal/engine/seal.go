package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/snapindex"
)

var _ activities.Sealer = (*Engine)(nil)

// Seal writes the snapshot's index (internal/snapindex) into its directory
// on this host, once every hook of the snapshot is final.
func (e *Engine) Seal(_ context.Context, in activities.SealInput) (activities.SealReport, error) {
	dir, err := e.snapDir(in.Job.SnapshotID)
	if err != nil {
		return activities.SealReport{}, err
	}
	snap := snapindex.Snapshot{ID: in.Job.SnapshotID, URL: in.Job.URL, State: in.State, Error: in.Error, SealedAt: time.Now()}
	files, err := snapindex.Write(dir, snap, in.Results)
	if err != nil {
		return activities.SealReport{}, fmt.Errorf("seal %s: %w", in.Job.Ident, err)
	}
	return activities.SealReport{Files: files}, nil
}
