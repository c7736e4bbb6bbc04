// Package wacz owns the WACZ files archiveflow writes (Web Archive
// Collection Zipped, spec 1.1.1): one ZIP per job, every entry STORED, with
// the job's WARCs under archive/ as they are on disk (not recompressed),
// indexes/index.cdxj (one sorted CDXJ line per response, revisit and
// resource record, pointing at its gzip member), pages/pages.jsonl (the
// job's pages: url, ts, title), datapackage.json (a sha256 and size for
// every file) and datapackage-digest.json (the hash of datapackage.json).
// It also owns checking one (Validate): hashes recomputed, the index
// sorted, every index line pointing at a record of its URL at its offset.
//
// It reads WARCs through internal/warc's reader (warc.Read), one gzip
// member at a time, and never writes or changes a WARC.
package wacz

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Version is the WACZ spec version written.
const Version = "1.1.1"

// The paths inside a WACZ.
const (
	ArchiveDir = "archive/"
	IndexPath  = "indexes/index.cdxj"
	// A large index is written compressed instead (Options.CompressIndexAbove):
	// index.cdx.gz, the sorted lines in blocks, each block its own gzip
	// member, and index.idx, one line per block (its first line's key and
	// timestamp, the block's offset and length) after a !meta line.
	CompressedIndexPath = "indexes/index.cdx.gz"
	IndexIdxPath        = "indexes/index.idx"
	PagesPath           = "pages/pages.jsonl"
	DataPackage         = "datapackage.json"
	DataPackageDig      = "datapackage-digest.json"
)

// idxMeta is the first line of index.idx.
const idxMeta = `!meta 0 {"format":"cdxj-gzip-1.0","filename":"index.cdx.gz"}`

// Defaults of Options' index fields.
const (
	DefaultCompressIndexAbove = 10000
	DefaultIndexBlockLines    = 3000
)

// pagesHeader is the first line of pages.jsonl.
const pagesHeader = `{"format":"json-pages-1.0","id":"pages","title":"All Pages"}`

// Page is one page of the job for pages.jsonl.
type Page struct {
	URL   string
	TS    time.Time // zero: the date of the URL's first capture in the index
	Title string
}

// Options describe the collection.
type Options struct {
	Title    string    // the datapackage's title (e.g. the job's ident)
	Software string    // e.g. "archiveflow v1.2.3"
	Created  time.Time // zero: now
	// MainPageURL is the collection's main page (e.g. the job's start
	// URL); its date is the date of its page, else of its first capture.
	MainPageURL string
	// CompressIndexAbove: an index of more lines is written compressed
	// (index.cdx.gz and index.idx) rather than as index.cdxj, so a replay
	// reads only the blocks it needs (0: DefaultCompressIndexAbove; < 0:
	// never).
	CompressIndexAbove int
	// IndexBlockLines is the lines per block of a compressed index (0:
	// DefaultIndexBlockLines).
	IndexBlockLines int
	// DetectPages: when no page is given, every 200 text/html capture is
	// one (each URL once, in the order of its first capture), as py-wacz's
	// --detect-pages.
	DetectPages bool
}

// Result says what was written.
type Result struct {
	WARCs   int   // WARC files in archive/
	Entries int   // lines in indexes/index.cdxj
	Pages   int   // pages in pages/pages.jsonl
	Bytes   int64 // size of the WACZ (Create)
	// Partial names the WARCs whose last record was still being written:
	// only their complete records are in the WACZ.
	Partial []string
	// Uncaptured are the pages left out: given without a date, and with
	// no capture in the WARCs (a page a replay could not open).
	Uncaptured []string
}

// resource is one file of the package in datapackage.json.
type resource struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Hash  string `json:"hash"`
	Bytes int64  `json:"bytes"`
}

// dataPackage is datapackage.json.
type dataPackage struct {
	Profile      string     `json:"profile"`
	WACZVersion  string     `json:"wacz_version"`
	Title        string     `json:"title,omitempty"`
	Created      string     `json:"created"`
	Software     string     `json:"software"`
	MainPageURL  string     `json:"mainPageUrl,omitempty"`
	MainPageDate string     `json:"mainPageDate,omitempty"`
	Resources    []resource `json:"resources"`
}

// digestFile is datapackage-digest.json.
type digestFile struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
}

// pageLine is one page line of pages.jsonl.
type pageLine struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	TS    string `json:"ts"`
	Title string `json:"title,omitempty"`
}

// WARC is one WARC file of the job: gzip, one member per record.
type WARC struct {
	Path string
	Name string // its name in archive/ ("": the base name of Path)
}

// Files names each path by its base name.
func Files(paths ...string) []WARC {
	out := make([]WARC, len(paths))
	for i, p := range paths {
		out[i] = WARC{Path: p}
	}
	return out
}

func (w WARC) name() string {
	if w.Name != "" {
		return w.Name
	}
	return filepath.Base(w.Path)
}

// Create writes the WACZ of warcs (their names must differ) and pages at
// dest: into a temporary file beside it first, renamed into place when
// complete.
func Create(dest string, warcs []WARC, pages []Page, opt Options) (Result, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return Result{}, err
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	res, err := Write(tmp, warcs, pages, opt)
	if err != nil {
		return res, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return res, err
	}
	if err := tmp.Sync(); err != nil {
		return res, err
	}
	if fi, err := tmp.Stat(); err == nil {
		res.Bytes = fi.Size()
	}
	if err := tmp.Close(); err != nil {
		return res, err
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return res, err
	}
	done = true
	return res, nil
}

// Write writes the WACZ of warcs and pages to w (see Create).
func Write(w io.Writer, warcs []WARC, pages []Page, opt Options) (Result, error) {
	var res Result
	names := map[string]string{}
	var entries []Entry
	sizes := make([]int64, len(warcs))
	for i, wf := range warcs {
		p, name := wf.Path, wf.name()
		if name == "" || strings.ContainsAny(name, "/\\") || !isWARCName(name) {
			return res, fmt.Errorf("wacz: WARC name %q (%s): want a file name ending .warc.gz", name, p)
		}
		if other, ok := names[name]; ok {
			return res, fmt.Errorf("wacz: two WARCs named %s: %s and %s", name, other, p)
		}
		names[name] = p
		es, complete, err := UpdateIndex(p, name)
		if err != nil {
			return res, fmt.Errorf("wacz: index %w", err)
		}
		if fi, err := os.Stat(p); err == nil && fi.Size() > complete {
			res.Partial = append(res.Partial, p)
		}
		entries = append(entries, es...)
		sizes[i] = complete
	}
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = e.Line()
	}
	sort.Strings(lines)

	zw := zip.NewWriter(w)
	var resources []resource
	// add stores one entry, its bytes copied from r, hashed on the way.
	add := func(name string, r io.Reader) error {
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store, Modified: time.Now().UTC()})
		if err != nil {
			return err
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(fw, h), r)
		if err != nil {
			return fmt.Errorf("wacz: write %s: %w", name, err)
		}
		resources = append(resources, resource{Name: path.Base(name), Path: name, Hash: sumString(h), Bytes: n})
		return nil
	}
	for i, wf := range warcs {
		p := wf.Path
		f, err := os.Open(p)
		if err != nil {
			return res, fmt.Errorf("wacz: %w", err)
		}
		err = add(ArchiveDir+wf.name(), io.LimitReader(f, sizes[i]))
		f.Close()
		if err != nil {
			return res, err
		}
		if got := resources[len(resources)-1].Bytes; got != sizes[i] {
			return res, fmt.Errorf("wacz: %s shrank while being written (%d of %d bytes)", p, got, sizes[i])
		}
	}
	if err := writeIndex(lines, opt, add); err != nil {
		return res, err
	}

	if len(pages) == 0 && opt.DetectPages {
		pages = detectPages(entries)
	}
	first := firstCaptures(entries)
	var pj bytes.Buffer
	pj.WriteString(pagesHeader + "\n")
	mainDate := time.Time{}
	for _, pg := range pages {
		ts := pg.TS
		if ts.IsZero() {
			ts = first[pg.URL]
		}
		if ts.IsZero() {
			res.Uncaptured = append(res.Uncaptured, pg.URL)
			continue
		}
		if pg.URL == opt.MainPageURL && mainDate.IsZero() {
			mainDate = ts
		}
		res.Pages++
		pl := pageLine{ID: fmt.Sprintf("p%d", res.Pages), URL: pg.URL, TS: ts.UTC().Format(time.RFC3339Nano), Title: pg.Title}
		b, err := marshal(pl)
		if err != nil {
			return res, err
		}
		pj.Write(b)
		pj.WriteByte('\n')
	}
	if err := add(PagesPath, &pj); err != nil {
		return res, err
	}

	created := opt.Created
	if created.IsZero() {
		created = time.Now()
	}
	if mainDate.IsZero() && opt.MainPageURL != "" {
		mainDate = first[opt.MainPageURL]
	}
	dp := dataPackage{Profile: "data-package", WACZVersion: Version, Title: opt.Title,
		Created: created.UTC().Format(time.RFC3339), Software: opt.Software, MainPageURL: opt.MainPageURL, Resources: resources}
	if !mainDate.IsZero() {
		dp.MainPageDate = mainDate.UTC().Format(time.RFC3339Nano)
	}
	dpb, err := json.MarshalIndent(dp, "", "  ")
	if err != nil {
		return res, err
	}
	if err := add(DataPackage, bytes.NewReader(dpb)); err != nil {
		return res, err
	}
	sum := sha256.Sum256(dpb)
	db, err := json.MarshalIndent(digestFile{Path: DataPackage, Hash: "sha256:" + hex.EncodeToString(sum[:])}, "", "  ")
	if err != nil {
		return res, err
	}
	if err := add(DataPackageDig, bytes.NewReader(db)); err != nil {
		return res, err
	}
	if err := zw.Close(); err != nil {
		return res, fmt.Errorf("wacz: %w", err)
	}
	res.WARCs, res.Entries = len(warcs), len(lines)
	return res, nil
}

// writeIndex adds the sorted index lines as index.cdxj, or compressed
// (index.cdx.gz and index.idx) when there are more than
// opt.CompressIndexAbove.
func writeIndex(lines []string, opt Options, add func(string, io.Reader) error) error {
	above, block := opt.CompressIndexAbove, opt.IndexBlockLines
	if above == 0 {
		above = DefaultCompressIndexAbove
	}
	if block <= 0 {
		block = DefaultIndexBlockLines
	}
	if above < 0 || len(lines) <= above {
		var b bytes.Buffer
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
		return add(IndexPath, &b)
	}
	var gz, idx bytes.Buffer
	idx.WriteString(idxMeta + "\n")
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestCompression)
	for i := 0; i < len(lines); i += block {
		part := lines[i:min(i+block, len(lines))]
		off := gz.Len()
		zw.Reset(&gz)
		for _, l := range part {
			if _, err := zw.Write([]byte(l + "\n")); err != nil {
				return err
			}
		}
		if err := zw.Close(); err != nil {
			return err
		}
		key, rest, _ := strings.Cut(part[0], " ")
		ts, _, _ := strings.Cut(rest, " ")
		fmt.Fprintf(&idx, "%s %s {\"offset\":%d,\"length\":%d}\n", key, ts, off, gz.Len()-off)
	}
	if err := add(CompressedIndexPath, &gz); err != nil {
		return err
	}
	return add(IndexIdxPath, &idx)
}

// detectPages makes a page of every 200 HTML capture's URL, each once, in
// the order of their first capture.
func detectPages(entries []Entry) []Page {
	byTime := append([]Entry(nil), entries...)
	sort.SliceStable(byTime, func(i, j int) bool { return byTime[i].Time.Before(byTime[j].Time) })
	seen := map[string]bool{}
	var pages []Page
	for _, e := range byTime {
		if e.Status == 200 && (e.Mime == "text/html" || e.Mime == "application/xhtml+xml") && !seen[e.URL] {
			seen[e.URL] = true
			pages = append(pages, Page{URL: e.URL, TS: e.Time})
		}
	}
	return pages
}

// firstCaptures maps each URL to the date of its earliest 2xx/3xx (else
// any) capture.
func firstCaptures(entries []Entry) map[string]time.Time {
	type best struct {
		t  time.Time
		ok bool // a 2xx/3xx
	}
	m := map[string]best{}
	for _, e := range entries {
		good := e.Status >= 200 && e.Status < 400 || e.Status == 0
		b, seen := m[e.URL]
		if !seen || (good && !b.ok) || (good == b.ok && e.Time.Before(b.t)) {
			m[e.URL] = best{e.Time, good}
		}
	}
	out := make(map[string]time.Time, len(m))
	for u, b := range m {
		out[u] = b.t
	}
	return out
}

func sumString(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// marshal is json.Marshal without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// errInvalid marks a WACZ that does not validate.
var errInvalid = errors.New("invalid WACZ")

// invalid is an error naming the WACZ's file it is about.
func invalid(file, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", errInvalid, file, fmt.Sprintf(format, args...))
}

// IsInvalid reports that err says a WACZ does not validate (rather than
// that it could not be read).
func IsInvalid(err error) bool { return errors.Is(err, errInvalid) }

// isWARCName reports a name of archive/ a WACZ may hold.
func isWARCName(name string) bool {
	return strings.HasSuffix(name, ".warc.gz") || strings.HasSuffix(name, ".warc")
}
