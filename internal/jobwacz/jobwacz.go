// Package jobwacz owns what goes into a job's WACZ and how it is written
// on a worker host: which WARC files (a snapshot's, found below its
// directory; a crawl's job WARCs), which pages (a snapshot's URL; a
// crawl's pages that succeeded, in discovery order, with their titles
// from the crawl's page index), the WACZ's name beside them (IDENT.wacz), and that a written
// WACZ validates before it is called written. The seal (internal/engine)
// and `starter export` both build a WACZ through it; internal/wacz is the
// format.
package jobwacz

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/builtin/snapfiles"
	"github.com/archiveflow/archiveflow/internal/captures"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/pageindex"
	"github.com/archiveflow/archiveflow/internal/wacz"
)

// Name is the file name of job ident's WACZ.
func Name(ident string) string { return ident + ".wacz" }

// Sources are the WARCs and pages of one job's WACZ.
type Sources struct {
	Ident       string
	MainPageURL string
	WARCs       []wacz.WARC
	Pages       []wacz.Page
	// DetectPages: the pages are not known (the job expired from Redis):
	// take the WARCs' 200 HTML captures.
	DetectPages bool
}

// Result is what Write wrote.
type Result struct {
	wacz.Result
	File string
}

// Write writes the WACZ of src at dest (a temporary file renamed into
// place) and validates it: a WACZ that does not validate is an error and
// kept for inspection.
func Write(dest string, src Sources) (Result, error) {
	if len(src.WARCs) == 0 {
		return Result{}, fmt.Errorf("WACZ of job %s: no WARC", src.Ident)
	}
	opt := wacz.Options{Title: src.Ident, Software: Software(), MainPageURL: src.MainPageURL, DetectPages: src.DetectPages}
	res, err := wacz.Create(dest, src.WARCs, src.Pages, opt)
	if err != nil {
		return Result{}, fmt.Errorf("WACZ of job %s: %w", src.Ident, err)
	}
	if _, err := wacz.Validate(dest); err != nil {
		return Result{}, fmt.Errorf("WACZ of job %s: the file written does not validate (kept for inspection): %w", src.Ident, err)
	}
	return Result{Result: res, File: dest}, nil
}

// Succeeded is the frontier's listing of the pages of a crawl that
// succeeded (a crawl's WACZ lists them).
var Succeeded = frontier.Filter{State: frontier.StateDone, Status: frontier.StatusSucceeded}

// CrawlPages reads a crawl's pages that succeeded, in discovery order,
// with their titles where this host has them (PagesOf); crawl is false
// when the job has no frontier (a snapshot).
func CrawlPages(ctx context.Context, f *frontier.Frontier, ident string, indexDir string, pageDir func(id int64) string, startDir string) (pages []wacz.Page, crawl bool, err error) {
	ps, err := f.AllPages(ctx, ident, Succeeded)
	if errors.Is(err, frontier.ErrNoFrontier) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	refs := make([]PageRef, len(ps))
	for i, p := range ps {
		refs[i] = PageRef{ID: p.ID, URL: p.URL, Parent: p.Parent}
	}
	return PagesOf(refs, indexDir, pageDir, startDir), true, nil
}

// PageRef is one page of a crawl.
type PageRef struct {
	ID, Parent int64
	URL        string
}

// PagesOf makes a crawl's pages with their titles where this host has
// them: the crawl's page index (indexDir, internal/pageindex), else the
// title hook's title.txt in the page's directory (pageDir; pages run
// before the page index), the start page's in its snapshot directory
// (startDir).
func PagesOf(refs []PageRef, indexDir string, pageDir func(id int64) string, startDir string) []wacz.Page {
	titles, _ := pageindex.Titles(indexDir) // what is unreadable has no title
	pages := make([]wacz.Page, len(refs))
	for i, p := range refs {
		title, ok := titles[p.ID]
		if !ok {
			title = Title(pageDir(p.ID))
		}
		title = strings.Join(strings.Fields(title), " ")
		if title == "" && p.ID == 1 && p.Parent == 0 {
			title = Title(startDir)
		}
		pages[i] = wacz.Page{URL: p.URL, Title: title}
	}
	return pages
}

// Title is the title hook's title.txt in a snapshot or page directory, its
// white space folded ("" when there is none).
func Title(dir string) string {
	b, err := snapfiles.ReadFile(dir, "title/title.txt", 4096)
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// CrawlWARCs lists a crawl's job WARCs in dir (regular files only),
// sorted.
func CrawlWARCs(dir string) ([]wacz.WARC, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []wacz.WARC
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".warc.gz") {
			out = append(out, wacz.WARC{Path: filepath.Join(dir, e.Name())})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// SnapshotWARCs lists a snapshot's WARCs (every *.warc.gz below it,
// symbolic links not followed), each named IDENT-PATH with / as -, e.g.
// IDENT-wget-warc-archive.warc.gz.
func SnapshotWARCs(dir, ident string) ([]wacz.WARC, error) {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	l, err := snapfiles.Walk(dir, nil)
	if err != nil {
		return nil, err
	}
	var out []wacz.WARC
	for _, f := range l.Files {
		if strings.HasSuffix(f.Path, ".warc.gz") {
			out = append(out, wacz.WARC{Path: filepath.Join(dir, filepath.FromSlash(f.Path)), Name: ident + "-" + strings.ReplaceAll(f.Path, "/", "-")})
		}
	}
	return out, nil
}

// Software names this build for the WACZ's datapackage.
func Software() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
	}
	return "archiveflow " + v
}

// WriteCaptures writes the captures among a snapshot's (or a crawl page's)
// results into dir/captures.warc.gz (internal/captures), referring to the
// earliest capture of url in the WARCs below dir, and returns the file's
// path ("" when there is no capture).
func WriteCaptures(dir, url string, results []model.ArchiveResult, plugins []string) (string, captures.Written, error) {
	caps := captures.Find(dir, url, results, plugins)
	if len(caps) == 0 {
		return "", captures.Written{}, nil
	}
	path := filepath.Join(dir, captures.File)
	w, err := captures.Write(path, url, firstCapture(dir, url), caps)
	if err != nil || w.Records == 0 {
		return "", w, err
	}
	return path, w, nil
}

// firstCapture is the date of the earliest response or revisit record of
// url (compared by SURT key) in the WARCs below dir, zero when there is
// none; a WARC that cannot be indexed is passed over.
func firstCapture(dir, url string) time.Time {
	warcs, _ := SnapshotWARCs(dir, "x")
	key := wacz.SURT(url)
	var first time.Time
	for _, w := range warcs {
		if filepath.Base(w.Path) == captures.File {
			continue
		}
		entries, _, err := wacz.IndexWARC(w.Path, filepath.Base(w.Path))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Key == key && e.Status > 0 && (first.IsZero() || e.Time.Before(first)) {
				first = e.Time
			}
		}
	}
	return first
}
