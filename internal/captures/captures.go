// Package captures owns which of a snapshot's hook outputs are captures of
// the page (a screenshot, a PDF, the rendered DOM, a single-file page: the
// plugins config names, warc.captures) and how they enter the job's WARCs:
// one WARC `resource` record per file, its WARC-Target-URI
// `urn:PLUGIN:URL` (browsertrix-crawler's `urn:view:URL` screenshots are
// the same idea), `WARC-Refers-To-Target-URI` the page's URL and
// `WARC-Refers-To-Date` the date of the page's capture when it is known,
// the file's bytes as the hook wrote them. A capture is archiveflow's own
// work, never a response: replay looks pages up by URL and never finds
// one of these in a page's place.
package captures

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/builtin/snapfiles"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// File is the WARC file a snapshot's captures are written to, in its
// directory.
const File = "captures.warc.gz"

// MaxBytes is the largest capture file recorded; a larger one is left out
// and reported (Skipped).
const MaxBytes = 256 << 20

// mediaTypes are the file kinds a capture can be, by extension; a
// plugin's other outputs (logs, JSON, text) are not captures.
var mediaTypes = map[string]string{
	".png":   "image/png",
	".jpg":   "image/jpeg",
	".jpeg":  "image/jpeg",
	".webp":  "image/webp",
	".pdf":   "application/pdf",
	".html":  "text/html",
	".htm":   "text/html",
	".mhtml": "multipart/related",
}

// Capture is one output file recorded as a resource record.
type Capture struct {
	Plugin string
	Rel    string // its path below the plugin's directory
	// Dir is the snapshot directory and Path the file's path in it
	// (PLUGIN/REL, slash-separated).
	Dir, Path string
	Type      string // media type
	Date      time.Time
	URI       string // WARC-Target-URI
}

// Find lists the captures among results' outputs: the succeeded results
// of the plugins named in plugins, their files of a capture's kind, below
// snapDir/PLUGIN. url is the page's URL.
func Find(snapDir, url string, results []model.ArchiveResult, plugins []string) []Capture {
	want := map[string]bool{}
	for _, p := range plugins {
		want[p] = true
	}
	var out []Capture
	used := map[string]bool{}
	for _, r := range results {
		if !want[r.Plugin] || r.Status != model.StatusSucceeded {
			continue
		}
		for _, o := range r.Outputs {
			mt, ok := mediaTypes[strings.ToLower(filepath.Ext(o.Path))]
			if !ok {
				continue
			}
			uri := "urn:" + r.Plugin + ":" + url
			if used[uri] {
				// A plugin's second capture file names itself.
				uri = "urn:" + r.Plugin + "/" + filepath.ToSlash(o.Path) + ":" + url
			}
			used[uri] = true
			out = append(out, Capture{Plugin: r.Plugin, Rel: o.Path, Dir: snapDir, Path: r.Plugin + "/" + filepath.ToSlash(o.Path),
				Type: mt, Date: r.EndedAt, URI: uri})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].URI < out[j].URI })
	return out
}

// Written says what Write recorded.
type Written struct {
	Records int
	// Skipped are captures left out, each with why (too large, unreadable).
	Skipped []string
}

// Write writes caps as resource records to a new WARC at path (replacing
// one a retried seal left), refersTo being the date of the page's capture
// the records refer to (zero: unknown, no WARC-Refers-To-Date). No
// capture: no file.
func Write(path, url string, refersTo time.Time, caps []Capture) (Written, error) {
	var w Written
	var tmp *os.File
	var ww *warc.Writer
	defer func() {
		if tmp != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	for _, c := range caps {
		block, err := readCapped(c.Dir, c.Path)
		if err != nil {
			w.Skipped = append(w.Skipped, fmt.Sprintf("%s: %v", c.Path, err))
			continue
		}
		if tmp == nil {
			// The file begins with the first capture read.
			if tmp, ww, err = begin(path, url); err != nil {
				return w, err
			}
		}
		h := map[string]string{
			"WARC-Refers-To-Target-URI": url,
			"WARC-Payload-Digest":       warc.Digest(block),
		}
		if !refersTo.IsZero() {
			h["WARC-Refers-To-Date"] = refersTo.UTC().Format("2006-01-02T15:04:05.000000Z")
		}
		if _, err := ww.Write(warc.Record{Type: "resource", Date: c.Date, TargetURI: c.URI, ContentType: c.Type, Headers: h, Block: block}); err != nil {
			return w, fmt.Errorf("captures: %w", err)
		}
		w.Records++
	}
	if tmp == nil {
		return w, nil
	}
	err := errors.Join(tmp.Chmod(0o644), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return w, fmt.Errorf("captures: %w", err)
	}
	tmp = nil
	return w, nil
}

// begin creates the temporary file beside path that becomes the captures
// WARC, and writes its warcinfo record.
func begin(path, url string) (*os.File, *warc.Writer, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, nil, fmt.Errorf("captures: %w", err)
	}
	ww := warc.NewWriter(tmp)
	if _, err := ww.Info(filepath.Base(path), map[string]string{
		"software":    warc.Software(),
		"format":      "WARC File Format 1.1",
		"description": "archiveflow: the page's captures by its hooks (screenshot, PDF, DOM...) as resource records of " + url,
	}); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return nil, nil, fmt.Errorf("captures: %w", err)
	}
	return tmp, ww, nil
}

// readCapped reads a capture file of at most MaxBytes inside dir, never
// following a symbolic link out of it (snapfiles).
func readCapped(dir, rel string) ([]byte, error) {
	b, err := snapfiles.ReadFile(dir, rel, MaxBytes+1)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("more than the %d bytes a capture record holds", MaxBytes)
	}
	return b, nil
}
