package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// RevisitProfile is the WARC-Profile of a revisit record written because
// its payload is identical to an earlier response's (WARC 1.1 §6.7.2).
const RevisitProfile = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"

// maxHTTPHead bounds the HTTP header block of a response that may become
// a revisit record; a response with a longer one is copied as it is.
const maxHTTPHead = 64 << 10

// Original is the stored response record a revisit record refers to.
type Original struct {
	TargetURI string // its WARC-Target-URI
	Date      string // its WARC-Date, as written
	ID        string // its WARC-Record-ID, as written
}

// Digests maps payload digests to the first response record stored with
// that payload. Its entries may be kept in a file (OpenDigests): one line
// per entry, "DIGEST\tRECORD-ID\tDATE\tURI\n", appended as records are
// stored. A Digests is not safe for concurrent use.
type Digests struct {
	m   map[string]Original
	f   *os.File // the file entries are appended to, or nil
	err error    // the first error appending to f
}

// NewDigests returns an empty index kept in memory only.
func NewDigests() *Digests { return &Digests{m: map[string]Original{}} }

// OpenDigests opens (creating it) the index kept in the file at path: its
// entries are read, and Add appends to it. A last line cut short (the
// writer died mid-line) is ignored and ended, so it never joins the next
// entry. Several processes may append to one file; each sees the entries
// written before it opened the file and its own.
func OpenDigests(path string) (*Digests, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open payload digests: %w", err)
	}
	d := NewDigests()
	br := bufio.NewReaderSize(f, 64<<10)
	var last string
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			last = line
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read payload digests %s: %w", path, err)
		}
		fields := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(fields) != 4 || fields[0] == "" {
			continue
		}
		if _, ok := d.m[fields[0]]; !ok {
			d.m[fields[0]] = Original{ID: fields[1], Date: fields[2], TargetURI: fields[3]}
		}
	}
	if last != "" {
		if _, err := f.WriteString("\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("end the cut last line of %s: %w", path, err)
		}
	}
	d.f = f
	return d, nil
}

// Len is the number of payloads indexed.
func (d *Digests) Len() int { return len(d.m) }

// Lookup returns the record stored first with the payload digest.
func (d *Digests) Lookup(digest string) (Original, bool) {
	o, ok := d.m[normDigest(digest)]
	return o, ok
}

// Add indexes a stored response record under its payload digest (an
// already indexed digest keeps its first record) and appends it to the
// index's file. An error writing the file is kept (Err); the entry is
// indexed in memory anyway.
func (d *Digests) Add(digest string, o Original) {
	digest = normDigest(digest)
	if _, ok := d.m[digest]; ok || digest == "" {
		return
	}
	d.m[digest] = o
	if d.f == nil || d.err != nil {
		return
	}
	line := digest + "\t" + o.ID + "\t" + o.Date + "\t" + o.TargetURI + "\n"
	if strings.Count(line, "\t") != 3 || strings.Count(line, "\n") != 1 {
		return // a value with a tab or line break: kept in memory only
	}
	if _, err := d.f.WriteString(line); err != nil {
		d.err = fmt.Errorf("append to payload digests %s: %w", d.f.Name(), err)
	}
}

// Err is the first error appending to the index's file.
func (d *Digests) Err() error { return d.err }

// Close closes the index's file.
func (d *Digests) Close() error {
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// normDigest is a digest with its algorithm label in lower case
// ("SHA1:ABC" and "sha1:ABC" are one digest).
func normDigest(s string) string {
	s = strings.TrimSpace(s)
	algo, value, ok := strings.Cut(s, ":")
	if !ok || value == "" {
		return ""
	}
	return strings.ToLower(algo) + ":" + value
}

// AppendStats says what Append did.
type AppendStats struct {
	Records  int // records written, revisits included
	Revisits int // responses written as revisit records
	// InfoDropped counts archiveflow's own warcinfo records left out.
	InfoDropped int
	// Upgraded counts WARC/1.0 records (another tool's, GNU wget's)
	// written as WARC/1.1.
	Upgraded int
	// SavedBytes are the payload bytes not stored again.
	SavedBytes int64
	// Verbatim is why the file was copied as it is, without revisits: it
	// is not one WARC record per gzip member (nil: it was).
	Verbatim error
	// Damaged is why the end of src, DamagedBytes from the first record
	// that is not whole and well formed (a writer stopped mid-record), was
	// left out: the records before it were appended.
	Damaged      error
	DamagedBytes int64
	Written      int64 // bytes written to dst
}

// appendRec is what Append's scan found about one record of the source.
type appendRec struct {
	drop bool
	// digest is a complete response's payload digest (one Append may store
	// or write as a revisit); orig is that response as an Original.
	digest   string
	orig     Original
	h        Header
	httpHead []byte // a revisit's block: the response's HTTP header
	payload  int64
}

// Append copies the WARC file src (size bytes) to dst record by record.
// A response record whose payload an earlier stored record holds (the same
// WARC-Payload-Digest in idx, or earlier in src) is written as a revisit
// record (WARC-Profile RevisitProfile): the same record id, date, target
// URI and other fields, WARC-Refers-To, WARC-Refers-To-Target-URI and
// WARC-Refers-To-Date naming the stored record, and the HTTP header as its
// block, without the payload. A warcinfo record whose software field names
// archiveflow (Software) is left out: dst has its own. Every other
// WARC/1.1 record is copied byte for byte, its gzip member as it is, and
// each response stored with its payload is added to idx once written.
//
// A WARC/1.0 record (another tool's: GNU wget writes 1.0) is written as
// WARC/1.1, so the job's file is of one version: the same fields and block,
// its target URI without the angle brackets 1.0 writers put around it, a
// 1.0 revisit profile as the 1.1 one (its digests stay true: the block is
// unchanged).
//
// Only a non-empty payload of a complete response (no WARC-Truncated, an
// application/http block whose HTTP header ends within 64 KiB) is
// deduplicated. A src that is not gzip compressed with one record per
// member, or not a WARC, is copied as it is (AppendStats.Verbatim says
// why). A src whose records end in a member that is cut short or damaged
// (its writer was killed mid-record) has its whole records appended and
// the rest left out (AppendStats.Damaged), so the job's file stays
// readable after it.
func Append(dst io.Writer, src io.ReaderAt, size int64, idx *Digests) (AppendStats, error) {
	return ScanAppend(src, size).Write(dst, idx)
}

// AppendScan is Append's reading of a WARC file, done without the
// destination or its digest index: a caller that writes under a lock
// scans outside it (ScanAppend), then writes under it (Write).
type AppendScan struct {
	src   io.ReaderAt
	size  int64
	recs  []appendRec
	spans []span
	st    AppendStats // Verbatim, Damaged, DamagedBytes
}

// ScanAppend reads src (size bytes) for Append.
func ScanAppend(src io.ReaderAt, size int64) *AppendScan {
	s := &AppendScan{src: src, size: size}
	visit := func(h Header, block io.Reader) (bool, error) {
		r := appendRec{h: h}
		switch {
		case h.Type == "warcinfo":
			r.drop = ownInfo(block)
		case dedupable(h):
			digest := normDigest(h.Get("WARC-Payload-Digest"))
			head := httpHead(block, h.ContentLength)
			if digest == "" || head == nil || int64(len(head)) >= h.ContentLength {
				break
			}
			r.digest, r.httpHead, r.payload = digest, head, h.ContentLength-int64(len(head))
			r.orig = Original{TargetURI: h.TargetURI, Date: h.Get("WARC-Date"), ID: h.ID}
		}
		s.recs = append(s.recs, r)
		return r.drop, nil
	}
	br := readers.Get().(*bufio.Reader)
	defer putReader(br)
	br.Reset(io.NewSectionReader(src, 0, size))
	magic, _ := br.Peek(2)
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		s.st.Verbatim = errors.New("not gzip compressed")
	} else if spans, err := scanGzip(br, visit); err != nil {
		if len(spans) == 0 || errors.Is(err, ErrMultiRecordMember) {
			s.st.Verbatim = err
		} else {
			last := spans[len(spans)-1]
			s.st.Damaged, s.st.DamagedBytes = err, size-(last.off+last.n)
			s.spans, s.recs = spans, s.recs[:len(spans)]
		}
	} else {
		s.spans = spans
	}
	return s
}

// Size is the scanned file's size.
func (s *AppendScan) Size() int64 { return s.size }

// Write writes the scanned file to dst as Append does, deciding each
// response's revisit against idx (nil: a new one) and what the file
// stored before it.
func (s *AppendScan) Write(dst io.Writer, idx *Digests) (st AppendStats, err error) {
	if idx == nil {
		idx = NewDigests()
	}
	st = s.st
	cw := &countWriter{w: dst}
	defer func() { st.Written = cw.n }()
	src := s.src
	if st.Verbatim != nil {
		err = copySection(cw, src, 0, s.size)
		return st, err
	}
	var w *Writer // for revisits, taken from the pool at the first
	defer func() {
		if w != nil {
			w.w = io.Discard
			revisitWriters.Put(w)
		}
	}()
	seen := map[string]Original{} // the responses this file stores, by payload digest
	for i, sp := range s.spans {
		r := s.recs[i]
		var revisit *Original
		if r.digest != "" {
			o, ok := seen[r.digest]
			if !ok {
				o, ok = idx.Lookup(r.digest)
			}
			if ok {
				revisit = &o
			} else {
				seen[r.digest] = r.orig
			}
		}
		switch {
		case r.drop:
			st.InfoDropped++
			continue
		case revisit != nil:
			if w == nil {
				w = revisitWriters.Get().(*Writer)
				w.w = cw
			}
			if err := w.member(revisitHead(r.h, *revisit, r.httpHead), r.httpHead); err != nil {
				return st, err
			}
			st.Revisits++
			st.SavedBytes += r.payload
		default:
			if upgradable(r.h) {
				if w == nil {
					w = revisitWriters.Get().(*Writer)
					w.w = cw
				}
				if err := w.upgrade(src, sp); err != nil {
					return st, fmt.Errorf("record at offset %d as WARC/1.1: %w", sp.off, err)
				}
				st.Upgraded++
			} else if err := copySection(cw, src, sp.off, sp.n); err != nil {
				return st, fmt.Errorf("copy record at offset %d: %w", sp.off, err)
			}
			if r.digest != "" {
				idx.Add(r.digest, r.orig)
			}
		}
		st.Records++
	}
	return st, nil
}

// revisitWriters keep Writers (their buffers) for Append's revisit records.
var revisitWriters = sync.Pool{New: func() any { return NewWriter(io.Discard) }}

// dedupable says whether a record is a complete HTTP response with a
// payload digest.
func dedupable(h Header) bool {
	return h.Type == "response" && h.Get("WARC-Truncated") == "" && h.Get("WARC-Payload-Digest") != "" &&
		strings.HasPrefix(strings.ToLower(h.Get("Content-Type")), "application/http")
}

// httpHead reads the HTTP header block (through its blank line) at the
// start of a response's block of n bytes; nil when it does not end within
// maxHTTPHead bytes.
func httpHead(block io.Reader, n int64) []byte {
	var buf []byte
	for size := int64(4 << 10); ; size *= 4 {
		size = min(size, n, maxHTTPHead)
		more := make([]byte, size-int64(len(buf)))
		m, _ := io.ReadFull(block, more)
		from := max(len(buf)-3, 0)
		buf = append(buf, more[:m]...)
		if i := bytes.Index(buf[from:], []byte("\r\n\r\n")); i >= 0 {
			return buf[:from+i+4]
		}
		if m < len(more) || size == min(n, maxHTTPHead) {
			return nil
		}
	}
}

// ownInfo says whether a warcinfo block names archiveflow as its software.
func ownInfo(block io.Reader) bool {
	buf := make([]byte, 8<<10) // a warcinfo record's fields are few
	m, _ := io.ReadFull(block, buf)
	for line := range strings.SplitSeq(string(buf[:m]), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "software") &&
			strings.HasPrefix(strings.TrimSpace(value), "archiveflow/") {
			return true
		}
	}
	return false
}

// revisitHead is the header block of the revisit record that replaces the
// response h, whose payload orig holds, with block as its block.
func revisitHead(h Header, orig Original, block []byte) string {
	var b strings.Builder
	b.WriteString(Version + "\r\n")
	for _, f := range h.Fields {
		switch strings.ToLower(f.Name) {
		case "content-length", "warc-block-digest", "warc-profile", "warc-refers-to",
			"warc-refers-to-target-uri", "warc-refers-to-date":
			continue
		case "warc-type":
			f.Value = "revisit"
		}
		f = upgradeField(f)
		fmt.Fprintf(&b, "%s: %s\r\n", f.Name, f.Value)
	}
	if orig.ID != "" {
		fmt.Fprintf(&b, "WARC-Refers-To: %s\r\n", orig.ID)
	}
	fmt.Fprintf(&b, "WARC-Refers-To-Target-URI: %s\r\n", orig.TargetURI)
	if orig.Date != "" {
		fmt.Fprintf(&b, "WARC-Refers-To-Date: %s\r\n", orig.Date)
	}
	fmt.Fprintf(&b, "WARC-Profile: %s\r\n", RevisitProfile)
	fmt.Fprintf(&b, "WARC-Block-Digest: %s\r\n", Digest(block))
	fmt.Fprintf(&b, "Content-Length: %s\r\n\r\n", strconv.Itoa(len(block)))
	return b.String()
}

// upgradable says whether a record is WARC/1.0, which Append writes as
// WARC/1.1.
func upgradable(h Header) bool { return h.Version == "WARC/1.0" }

// upgradeField is a WARC/1.0 header field as WARC/1.1 writes it: a URI
// without the angle brackets 1.0 writers (GNU wget) put around it, a 1.0
// revisit profile as its 1.1 URI.
func upgradeField(f Field) Field {
	switch strings.ToLower(f.Name) {
	case "warc-target-uri", "warc-refers-to-target-uri":
		if len(f.Value) >= 2 && f.Value[0] == '<' && f.Value[len(f.Value)-1] == '>' {
			f.Value = f.Value[1 : len(f.Value)-1]
		}
	case "warc-profile":
		if rest, ok := strings.CutPrefix(f.Value, "http://netpreserve.org/warc/1.0/"); ok {
			f.Value = "http://netpreserve.org/warc/1.1/" + rest
		}
	}
	return f
}

// upgrade writes the WARC/1.0 record in the gzip member at s of src as a
// WARC/1.1 record, one gzip member, its block streamed as it is.
func (w *Writer) upgrade(src io.ReaderAt, s span) error {
	var zr gzip.Reader
	if err := zr.Reset(io.NewSectionReader(src, s.off, s.n)); err != nil {
		return gzipErr(err)
	}
	zr.Multistream(false)
	br := readers.Get().(*bufio.Reader)
	defer putReader(br)
	br.Reset(&zr)
	h, _, err := readHeader(br)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(Version + "\r\n")
	for _, f := range h.Fields {
		f = upgradeField(f)
		fmt.Fprintf(&b, "%s: %s\r\n", f.Name, f.Value)
	}
	b.WriteString("\r\n")
	gz := compressor(w.w)
	defer release(gz)
	if _, err := io.WriteString(gz, b.String()); err != nil {
		return err
	}
	if _, err := io.CopyN(gz, br, h.ContentLength); err != nil {
		return fmt.Errorf("copy block: %w", noEOF(err))
	}
	if _, err := io.WriteString(gz, "\r\n\r\n"); err != nil {
		return err
	}
	return gz.Close()
}

// copyBuffers are the buffers copySection copies through, kept between
// calls (io.Copy would allocate 32 KiB for each record Append copies).
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copySection copies src's n bytes at off to w.
func copySection(w io.Writer, src io.ReaderAt, off, n int64) error {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	_, err := io.CopyBuffer(w, io.NewSectionReader(src, off, n), *buf)
	return err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
