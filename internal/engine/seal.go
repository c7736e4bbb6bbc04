package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/jobwacz"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/snapindex"
	"github.com/archiveflow/archiveflow/internal/wacz"
)

var _ activities.Sealer = (*Engine)(nil)

// Seal writes the snapshot's index (internal/snapindex) into its directory
// on this host, once every hook of the snapshot is final, and ends a
// single-URL job's crawl setup hooks there (TeardownCrawl). Before the
// index it writes the hooks' captures of the page (captures.warc.gz) and,
// for a single-URL job with Config.SealWACZ, the job's WACZ
// (IDENT.wacz); the index names both. A crawl's start page leaves the
// WACZ to the crawl's seal. A WACZ that cannot be written is logged and
// named in the index and the report, never a failed seal: the snapshot's
// files are all there.
func (e *Engine) Seal(ctx context.Context, in activities.SealInput) (activities.SealReport, error) {
	dir, err := e.snapDir(in.Job.SnapshotID)
	if err != nil {
		return activities.SealReport{}, err
	}
	log := e.log.With(logging.Ident(in.Job.Ident))
	snap := snapindex.Snapshot{ID: in.Job.SnapshotID, URL: in.Job.URL, State: in.State, Error: in.Error}
	var rep activities.SealReport
	capFile, w, err := jobwacz.WriteCaptures(dir, in.Job.URL, in.Results, e.cfg.Captures)
	for _, s := range w.Skipped {
		log.Warn("a capture left out of the captures WARC", zap.String("capture", s))
	}
	if err != nil {
		return rep, fmt.Errorf("seal %s: %w", in.Job.Ident, err)
	}
	if capFile != "" {
		snap.Captures = filepath.Base(capFile)
	}
	if !in.Job.CrawlPage && e.cfg.SealWACZ {
		res, err := e.snapshotWACZ(in, dir)
		if err != nil {
			log.Warn("the job's WACZ was not written at the seal", zap.Error(err))
			snap.WACZError, rep.WACZError = err.Error(), err.Error()
		} else {
			snap.WACZ, rep.WACZ, rep.WACZBytes = filepath.Base(res.File), res.File, res.Bytes
		}
	}
	snap.SealedAt = time.Now()
	files, err := snapindex.Write(dir, snap, in.Results)
	if err != nil {
		return activities.SealReport{}, fmt.Errorf("seal %s: %w", in.Job.Ident, err)
	}
	rep.Files = files
	if !in.Job.CrawlPage {
		// A single-URL job is a crawl of one page: its crawl setup hooks
		// (Discover) end with it. A crawl's start page leaves them to the
		// crawl.
		if err := e.TeardownCrawl(ctx, in.Job.Ident); err != nil {
			return activities.SealReport{}, fmt.Errorf("seal %s: %w", in.Job.Ident, err)
		}
	}
	return rep, nil
}

// snapshotWACZ writes a single-URL job's WACZ into its snapshot directory:
// the WARCs below it, the job's URL its one page.
func (e *Engine) snapshotWACZ(in activities.SealInput, dir string) (jobwacz.Result, error) {
	warcs, err := jobwacz.SnapshotWARCs(dir, in.Job.Ident)
	if err != nil {
		return jobwacz.Result{}, err
	}
	if len(warcs) == 0 {
		return jobwacz.Result{}, fmt.Errorf("no WARC in %s: no hook recorded the page's fetches", dir)
	}
	src := jobwacz.Sources{Ident: in.Job.Ident, MainPageURL: in.Job.URL, WARCs: warcs,
		Pages: []wacz.Page{{URL: in.Job.URL, Title: jobwacz.Title(dir)}}}
	return jobwacz.Write(filepath.Join(dir, jobwacz.Name(in.Job.Ident)), src)
}

// JobWARCs lists the crawl's job WARC files in this host's archive dir
// (ARCHIVE_DIR/crawls/IDENT/warc: this host's, and with a shared archive
// dir every host's).
func (e *Engine) JobWARCs(ident string) ([]activities.WARCFile, error) {
	warcs, err := jobwacz.CrawlWARCs(e.jobWARCDir(ident))
	if err != nil {
		return nil, fmt.Errorf("job WARCs of %s: %w", ident, err)
	}
	out := make([]activities.WARCFile, 0, len(warcs))
	for _, w := range warcs {
		fi, err := os.Stat(w.Path)
		if err != nil {
			return nil, fmt.Errorf("job WARCs of %s: %w", ident, err)
		}
		out = append(out, activities.WARCFile{Name: filepath.Base(w.Path), Bytes: fi.Size()})
	}
	return out, nil
}

// SealCrawl writes a crawl's WACZ, ARCHIVE_DIR/crawls/IDENT/IDENT.wacz,
// from the job WARCs this host sees and the crawl's pages that succeeded.
// A WARC another host reported that this one cannot see (the archive dirs
// are not shared) is named in the report's Missing, not fatal: the WACZ
// holds what is here.
func (e *Engine) SealCrawl(ctx context.Context, in activities.SealCrawlInput, pages []activities.PageRef) (activities.SealCrawlReport, error) {
	var rep activities.SealCrawlReport
	if !e.cfg.SealWACZ {
		return rep, fmt.Errorf("wacz.seal is false on this host: no WACZ at the seal")
	}
	dir := e.jobWARCDir(in.Ident)
	warcs, err := jobwacz.CrawlWARCs(dir)
	if err != nil {
		return rep, err
	}
	have := map[string]bool{}
	for _, w := range warcs {
		have[filepath.Base(w.Path)] = true
	}
	for _, r := range in.Reported {
		if !have[r.Name] {
			have[r.Name] = true // reported by several hosts: named once
			rep.Missing = append(rep.Missing, r.Name)
		}
	}
	if len(warcs) == 0 {
		return rep, fmt.Errorf("no job WARC in %s on this host", dir)
	}
	refs := make([]jobwacz.PageRef, len(pages))
	for i, p := range pages {
		refs[i] = jobwacz.PageRef{ID: p.ID, URL: p.URL, Parent: p.Parent}
	}
	startDir, _ := e.snapDir(in.Ident)
	src := jobwacz.Sources{Ident: in.Ident, MainPageURL: in.URL, WARCs: warcs,
		Pages: jobwacz.PagesOf(refs, archivedir.PageIndex(e.cfg.ArchiveDir, in.Ident), func(id int64) string { return e.pageDir(in.Ident, id) }, startDir)}
	res, err := jobwacz.Write(filepath.Join(archivedir.Crawl(e.cfg.ArchiveDir, in.Ident), jobwacz.Name(archivedir.Name(in.Ident))), src)
	if err != nil {
		return rep, err
	}
	rep.WACZ, rep.Bytes = res.File, res.Bytes
	return rep, ctx.Err()
}
