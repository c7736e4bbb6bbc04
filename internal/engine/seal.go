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
// on this host, once every hook of the snapshot is final, and ends a
// single-URL job's crawl setup hooks there (TeardownCrawl).
func (e *Engine) Seal(ctx context.Context, in activities.SealInput) (activities.SealReport, error) {
	dir, err := e.snapDir(in.Job.SnapshotID)
	if err != nil {
		return activities.SealReport{}, err
	}
	snap := snapindex.Snapshot{ID: in.Job.SnapshotID, URL: in.Job.URL, State: in.State, Error: in.Error, SealedAt: time.Now()}
	files, err := snapindex.Write(dir, snap, in.Results)
	if err != nil {
		return activities.SealReport{}, fmt.Errorf("seal %s: %w", in.Job.Ident, err)
	}
	if !in.Job.CrawlPage {
		// A single-URL job is a crawl of one page: its crawl setup hooks
		// (Discover) end with it. A crawl's start page leaves them to the
		// crawl.
		if err := e.TeardownCrawl(ctx, in.Job.Ident); err != nil {
			return activities.SealReport{}, fmt.Errorf("seal %s: %w", in.Job.Ident, err)
		}
	}
	return activities.SealReport{Files: files}, nil
}
