// Package archivedir owns the layout of a worker host's archive directory
// (config archive_dir): where a snapshot's files, a crawl's job WARCs, its
// page directories, its page index and its setup directory go. The hook
// engine writes there, the worker pools create and sweep its top folders,
// and the starter's commands read there; all of them ask this package, so
// a path the CLI prints is the path a worker wrote.
//
//	ARCHIVE_DIR/snapshots/SNAPSHOT_ID            a snapshot (a crawl's start page too)
//	ARCHIVE_DIR/crawls/IDENT/warc                a crawl's job WARCs (and its WACZ beside them, in crawls/IDENT)
//	ARCHIVE_DIR/crawls/IDENT/pages/ID            a crawl page's directory (its SNAP_DIR)
//	ARCHIVE_DIR/crawls/IDENT/pageindex           a crawl's page index, one file per worker instance
//	ARCHIVE_DIR/crawls/IDENT/INSTANCE            a crawl's setup directory on one worker (CRAWL_DIR)
package archivedir

import (
	"path/filepath"
	"strconv"
	"strings"
)

const (
	snapshots = "snapshots"
	crawls    = "crawls"
)

// Tops are the archive dir's top folders: a worker creates them at start
// and sweeps the hook processes a crashed worker left under them.
func Tops(root string) []string {
	return []string{filepath.Join(root, snapshots), filepath.Join(root, crawls)}
}

// Snapshot is a snapshot's directory. id must be one path element (the
// engine checks a workflow's id before it runs a hook there).
func Snapshot(root, id string) string { return filepath.Join(root, snapshots, id) }

// Crawl is a crawl's directory: its WACZ, WARCs, pages and page index.
func Crawl(root, ident string) string { return filepath.Join(root, crawls, Name(ident)) }

// CrawlWARCs is where a crawl's job WARCs are.
func CrawlWARCs(root, ident string) string { return filepath.Join(Crawl(root, ident), "warc") }

// Page is a crawl page's directory (its SNAP_DIR).
func Page(root, ident string, id int64) string {
	return filepath.Join(Crawl(root, ident), "pages", strconv.FormatInt(id, 10))
}

// PageIndex is a crawl's page index directory (internal/pageindex).
func PageIndex(root, ident string) string { return filepath.Join(Crawl(root, ident), "pageindex") }

// Setup is a crawl's directory on one worker instance (CRAWL_DIR), where
// its setup hooks work.
func Setup(root, ident, instance string) string {
	return filepath.Join(Crawl(root, ident), Name(instance))
}

// Name keeps a path element to [A-Za-z0-9._-] (anything else becomes _),
// without leading dots; never empty.
func Name(s string) string {
	out := strings.TrimLeft(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s), ".")
	if out == "" {
		return "_"
	}
	return out
}
