package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/jobwacz"
	"github.com/archiveflow/archiveflow/internal/snapindex"
	"github.com/archiveflow/archiveflow/internal/wacz"
)

func exportCommand() *command {
	return &command{
		name:    "export",
		args:    "IDENT",
		summary: "write a job's WACZ (its WARCs, a CDXJ index, its pages) from this host's archive dir",
		details: `
Writes one WACZ (spec 1.1.1) of the job, at any time, running or not:
archive/ holds the job's WARCs as they are on disk (a WARC still being
written up to its last complete record), indexes/index.cdxj a sorted
line per captured response, pages/pages.jsonl the job's pages (a crawl's
pages that succeeded, with the title hook's title where this host has
it), datapackage.json the sha256 and size of every file. The WACZ is then
validated (hashes recomputed, index sorted, every line read at its
record) and what was written printed.

The WARCs are the ones in this host's archive dir: a snapshot's under
ARCHIVE_DIR/snapshots/IDENT, a crawl's job WARCs under
ARCHIVE_DIR/crawls/IDENT/warc (the start page's are in them once it is
done). A crawl's pages that ran on other worker hosts left their WARCs
there: run export where the archive dirs are shared, or copy their warc/
directories here first. Needs Redis for the job (its pages).`,
		examples: []string{
			"starter export 3mlbkdu1fpo7wt4lr2qf1mpsw",
			"starter export https://example.com/ -o /srv/wacz/example.wacz",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringP("output", "o", "", "the WACZ file to write (default ./IDENT.wacz)")
		},
		run: runExport,
	}
}

// exportJSON is `export --json`.
type exportJSON struct {
	Ident   string   `json:"ident"`
	File    string   `json:"file"`
	Bytes   int64    `json:"bytes"`
	WARCs   []string `json:"warcs"`
	Entries int      `json:"index_lines"`
	Pages   int      `json:"pages"`
	// Partial are WARCs still being written: only their complete records
	// are in the WACZ.
	Partial []string `json:"partial,omitempty"`
	// From is the directory the WARCs were taken from.
	From string `json:"from"`
	// Crawl: the WARCs are this host's only.
	Crawl bool `json:"crawl"`
	// Uncaptured counts the pages left out: no capture of them in these
	// WARCs (run on another worker host, or not appended yet).
	Uncaptured int `json:"pages_uncaptured,omitempty"`
	// PagesDetected: the job is not in Redis (expired): its pages are the
	// WARCs' 200 HTML captures.
	PagesDetected bool `json:"pages_detected,omitempty"`

	uncapturedExample string
}

func runExport(ctx context.Context, a *app, inv *invocation) error {
	id, err := oneIdent(inv)
	if err != nil {
		return err
	}
	out, _ := inv.fs.GetString("output")
	if out == "" {
		out = id + ".wacz"
	}
	if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
		return usageErr("-o %s: its directory must exist", out)
	}
	o, err := a.export(ctx, inv, id, out)
	if err != nil {
		return err
	}
	if inv.json {
		return writeJSON(a.stdout, o)
	}
	fmt.Fprintf(a.stdout, "wrote %s (%d bytes): %d WARC(s) from %s, %d index line(s), %d page(s); validated\n",
		out, o.Bytes, len(o.WARCs), o.From, o.Entries, o.Pages)
	for _, p := range o.Partial {
		fmt.Fprintf(a.stdout, "  %s is still being written: its records up to the last complete one are in\n", p)
	}
	if o.Uncaptured > 0 {
		fmt.Fprintf(a.stdout, "  %d page(s) left out, e.g. %s: no capture of them in these WARCs (run on another worker host, or not appended yet)\n",
			o.Uncaptured, o.uncapturedExample)
	}
	if o.Crawl {
		fmt.Fprintf(a.stdout, "  only this host's WARCs: pages other worker hosts ran are in their own %s\n", o.From)
	}
	if o.PagesDetected {
		fmt.Fprintln(a.stdout, "  the job is not in Redis (expired after its retention?): its pages are the WARCs' 200 HTML captures, without titles")
	}
	return nil
}

// export writes job id's WACZ at out and validates it.
func (a *app) export(ctx context.Context, inv *invocation, id, out string) (exportJSON, error) {
	var o exportJSON
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return o, err
	}
	defer b.Close()
	archive := inv.cfg.ArchiveDir
	snapDir := archivedir.Snapshot(archive, id)
	crawlWARCDir := archivedir.CrawlWARCs(archive, id)
	src := jobwacz.Sources{Ident: id}
	var crawl bool
	job, err := getJob(ctx, b, id)
	switch {
	case exitCode(err) == exitNotFound:
		// Expired from Redis (or never there): what the archive dir holds.
		// Pages are then found in the WARCs; the URL in the sealed index.
		notFound := err
		if fi, err := os.Stat(crawlWARCDir); err == nil && fi.IsDir() {
			crawl = true
		} else if _, err := os.Stat(snapDir); err != nil {
			return o, notFound
		}
		if snap, _, err := snapindex.Read(snapDir); err == nil {
			src.MainPageURL = snap.URL
		}
		src.DetectPages, o.PagesDetected = true, true
	case err != nil:
		return o, err
	default:
		src.MainPageURL = job.URL
		pageDir := func(p int64) string { return archivedir.Page(archive, id, p) }
		if src.Pages, crawl, err = jobwacz.CrawlPages(ctx, newFrontier(b), id, archivedir.PageIndex(archive, id), pageDir, snapDir); err != nil {
			return o, withCode(exitUnavailable, err)
		}
		if !crawl {
			src.Pages = []wacz.Page{{URL: job.URL, Title: jobwacz.Title(snapDir)}}
		}
	}
	var warcs []wacz.WARC
	where := snapDir
	if crawl {
		// engine's job WARCs: ARCHIVE_DIR/crawls/IDENT/warc/IDENT-INSTANCE-NNNNN.warc.gz.
		where = crawlWARCDir
		if warcs, err = jobwacz.CrawlWARCs(where); err != nil {
			return o, err
		}
	}
	if len(warcs) == 0 {
		// A snapshot; or a crawl whose start page is not done yet: its
		// WARCs are still only in its snapshot.
		if warcs, err = jobwacz.SnapshotWARCs(snapDir, id); err != nil {
			return o, err
		}
		if crawl && len(warcs) > 0 {
			where = snapDir
		}
	}
	if len(warcs) == 0 {
		msg := fmt.Sprintf("job %s: no WARC in %s on this host (the job ran on another worker host, or wrote none yet)", id, where)
		if job.Archive.WACZ != "" {
			// The seal's WACZ says where the worker keeps the job.
			msg += fmt.Sprintf("; its seal wrote the job's WACZ at %s on host %s: copy that, or export there (with that host's archive_dir)",
				job.Archive.WACZ, job.Archive.Host)
		}
		return o, withCode(exitNotFound, errors.New(msg))
	}

	src.WARCs = warcs
	res, err := jobwacz.Write(out, src)
	if err != nil {
		return o, err
	}
	o = exportJSON{Ident: id, File: out, Bytes: res.Bytes, Entries: res.Entries, Pages: res.Pages, Partial: res.Partial, From: where,
		Crawl: crawl, PagesDetected: o.PagesDetected, Uncaptured: len(res.Uncaptured)}
	if len(res.Uncaptured) > 0 {
		o.uncapturedExample = res.Uncaptured[0]
	}
	for _, w := range warcs {
		o.WARCs = append(o.WARCs, w.Path)
	}
	return o, nil
}
