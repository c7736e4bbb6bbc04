// Package warc owns writing WARC 1.1 files (ISO 28500): warcinfo, request
// and response records, each its own gzip member, so WARC files (and the
// per-page files of a crawl) concatenate into a valid .warc.gz by plain
// appending. It writes what a fetcher hands it; it does no HTTP itself.
//
// Append copies a WARC file's records onto another (a crawl's job WARC)
// while writing a response whose payload an earlier record already holds
// as a revisit record (identical-payload-digest profile), so a crawl
// stores each payload once (revisit.go).
//
// It also reads WARC files, its own or other tools' (GNU wget's
// --warc-file output, gzip per record or uncompressed): Read walks the
// records, and Filter removes records from a file in place while keeping
// every other record byte-identical (e.g. request records for requests the
// fetch policy refused, which never reached the origin).
package warc

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Version is the WARC version written.
const Version = "WARC/1.1"

// Record is one WARC record.
type Record struct {
	Type      string // warcinfo, request, response, ...
	ID        string // <urn:uuid:...>; generated when empty
	Date      time.Time
	TargetURI string
	// ContentType of the block, e.g. application/http;msgtype=response.
	ContentType string
	// Headers are further WARC headers (WARC-Concurrent-To, WARC-IP-Address,
	// WARC-Payload-Digest, WARC-Truncated, ...), written sorted by name.
	Headers map[string]string
	Block   []byte
}

// NewID returns a fresh record id, <urn:uuid:...>.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("<urn:uuid:%x-%x-%x-%x-%x>", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Digest is the WARC digest of data: sha1 in base32.
func Digest(data []byte) string {
	sum := sha1.Sum(data)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

// Writer writes records to w, one gzip member each.
type Writer struct {
	w   io.Writer
	buf bytes.Buffer
	n   int64
}

// NewWriter returns a Writer appending to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// compressors keep gzip writers between members: a compressor's state is
// ~1 MB to allocate, and a crawl page makes a Writer or two (its fetches',
// the job WARC's revisits), so one per Writer was most of a page's
// allocations (docs/benchmarks.md §29).
var compressors = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return gz
}}

// compressor is a pooled gzip writer writing to dst; release returns it.
func compressor(dst io.Writer) *gzip.Writer {
	gz := compressors.Get().(*gzip.Writer)
	gz.Reset(dst)
	return gz
}

func release(gz *gzip.Writer) {
	gz.Reset(io.Discard) // holds no reference to its last destination
	compressors.Put(gz)
}

// Written is the number of compressed bytes written.
func (w *Writer) Written() int64 { return w.n }

// Write writes one record and returns its id.
func (w *Writer) Write(r Record) (string, error) {
	if r.Type == "" {
		return "", fmt.Errorf("warc record: type must not be empty")
	}
	if r.ID == "" {
		r.ID = NewID()
	}
	if r.Date.IsZero() {
		r.Date = time.Now()
	}
	var h strings.Builder
	h.WriteString(Version + "\r\n")
	fmt.Fprintf(&h, "WARC-Type: %s\r\n", r.Type)
	fmt.Fprintf(&h, "WARC-Record-ID: %s\r\n", r.ID)
	fmt.Fprintf(&h, "WARC-Date: %s\r\n", r.Date.UTC().Format("2006-01-02T15:04:05.000000Z"))
	if r.TargetURI != "" {
		fmt.Fprintf(&h, "WARC-Target-URI: %s\r\n", r.TargetURI)
	}
	if r.ContentType != "" {
		fmt.Fprintf(&h, "Content-Type: %s\r\n", r.ContentType)
	}
	names := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if strings.ContainsAny(k+r.Headers[k], "\r\n") {
			return "", fmt.Errorf("warc record header %q: must not contain line breaks", k)
		}
		fmt.Fprintf(&h, "%s: %s\r\n", k, r.Headers[k])
	}
	if _, ok := r.Headers["WARC-Block-Digest"]; !ok && r.Type != "warcinfo" {
		fmt.Fprintf(&h, "WARC-Block-Digest: %s\r\n", Digest(r.Block))
	}
	fmt.Fprintf(&h, "Content-Length: %s\r\n\r\n", strconv.Itoa(len(r.Block)))
	if err := w.member(h.String(), r.Block); err != nil {
		return "", err
	}
	return r.ID, nil
}

// member writes one record (its header block, ending with the blank line,
// and its block) as one gzip member.
func (w *Writer) member(head string, block []byte) error {
	w.buf.Reset()
	gz := compressor(&w.buf)
	defer release(gz)
	for _, part := range [][]byte{[]byte(head), block, []byte("\r\n\r\n")} {
		if _, err := gz.Write(part); err != nil {
			return fmt.Errorf("compress warc record: %w", err)
		}
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("compress warc record: %w", err)
	}
	n, err := w.w.Write(w.buf.Bytes())
	w.n += int64(n)
	if err != nil {
		return fmt.Errorf("write warc record: %w", err)
	}
	return nil
}

// Software names archiveflow and its version for a warcinfo record's
// software field: "archiveflow/VERSION", the version being the module's
// (a tagged build), else the VCS revision the binary was built from
// (with "+dirty" for a modified tree), else "devel".
func Software() string {
	return "archiveflow/" + softwareVersion()
}

var softwareVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
})

// Info writes a warcinfo record with the given fields (software, format,
// ...), as "name: value" lines.
func (w *Writer) Info(filename string, fields map[string]string) (string, error) {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\r\n", k, fields[k])
	}
	return w.Write(Record{Type: "warcinfo", ContentType: "application/warc-fields",
		Headers: map[string]string{"WARC-Filename": filename}, Block: []byte(b.String())})
}
