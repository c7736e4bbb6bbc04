package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Field is one named field of a WARC record header, as written.
type Field struct {
	Name  string
	Value string
}

// Header is the header block of one WARC record as read from a file.
type Header struct {
	Version   string // version line, e.g. WARC/1.0 or WARC/1.1
	Type      string // WARC-Type
	ID        string // WARC-Record-ID, as written (<urn:uuid:...>)
	TargetURI string // WARC-Target-URI, without the <...> some writers (wget) put around it
	// ConcurrentTo are the WARC-Concurrent-To record ids, as written; the
	// field may repeat.
	ConcurrentTo  []string
	ContentLength int64 // Content-Length: size of the record block
	// Fields are all header fields in file order.
	Fields []Field
}

// Get returns the value of the first field called name (compared without
// regard to case), or "" when there is none.
func (h Header) Get(name string) string {
	for _, f := range h.Fields {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// Values returns the values of every field called name (compared without
// regard to case), in file order.
func (h Header) Values(name string) []string {
	var out []string
	for _, f := range h.Fields {
		if strings.EqualFold(f.Name, name) {
			out = append(out, f.Value)
		}
	}
	return out
}

// ErrMultiRecordMember is returned (wrapped) by Filter for a gzip member that
// holds more than one record, e.g. a whole-file gzip: such a file cannot be
// filtered by copying members.
var ErrMultiRecordMember = errors.New("gzip member holds more than one record: file is not one record per gzip member")

// maxHeaderBytes bounds the header block of one record.
const maxHeaderBytes = 1 << 20

// readLine reads one line including its \n; at most limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, fmt.Errorf("header block longer than %d bytes", maxHeaderBytes)
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, err
	}
}

// readHeader reads the version line and header fields of one record, up to
// and including the blank line, and returns the number of bytes consumed.
// It returns io.EOF only when br is at its end before the record.
func readHeader(br *bufio.Reader) (Header, int64, error) {
	var h Header
	var n int64
	line, err := readLine(br, maxHeaderBytes)
	n += int64(len(line))
	if err == io.EOF && len(line) == 0 {
		return h, 0, io.EOF
	}
	if len(line) > 0 && !bytes.HasPrefix(line, []byte("WARC/")) {
		return h, n, fmt.Errorf("no WARC/ version line (starts %q)", truncate(line, 16))
	}
	if err != nil {
		return h, n, fmt.Errorf("read version line: %w", noEOF(err))
	}
	h.Version = strings.TrimRight(string(line), "\r\n")
	for {
		line, err := readLine(br, maxHeaderBytes-int(n))
		n += int64(len(line))
		if err != nil {
			return h, n, fmt.Errorf("read header: %w", noEOF(err))
		}
		s := strings.TrimRight(string(line), "\r\n")
		if s == "" {
			break
		}
		if s[0] == ' ' || s[0] == '\t' { // continuation of the previous field
			if len(h.Fields) == 0 {
				return h, n, fmt.Errorf("malformed header line %q", s)
			}
			f := &h.Fields[len(h.Fields)-1]
			f.Value = strings.TrimSpace(f.Value + " " + strings.TrimSpace(s))
			continue
		}
		name, value, ok := strings.Cut(s, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return h, n, fmt.Errorf("malformed header line %q", s)
		}
		h.Fields = append(h.Fields, Field{Name: name, Value: strings.TrimSpace(value)})
	}
	h.Type = h.Get("WARC-Type")
	h.ID = h.Get("WARC-Record-ID")
	h.TargetURI = h.Get("WARC-Target-URI")
	if len(h.TargetURI) >= 2 && h.TargetURI[0] == '<' && h.TargetURI[len(h.TargetURI)-1] == '>' {
		h.TargetURI = h.TargetURI[1 : len(h.TargetURI)-1]
	}
	h.ConcurrentTo = h.Values("WARC-Concurrent-To")
	cl := h.Values("Content-Length")
	if len(cl) != 1 {
		return h, n, fmt.Errorf("want one Content-Length header, have %d", len(cl))
	}
	h.ContentLength, err = strconv.ParseInt(cl[0], 10, 64)
	if err != nil || h.ContentLength < 0 {
		return h, n, fmt.Errorf("bad Content-Length %q", cl[0])
	}
	return h, n, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// noEOF turns io.EOF into io.ErrUnexpectedEOF: inside a record, EOF means
// truncation.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readBlockEnd skips the rest of a record block (n bytes) and reads the
// \r\n\r\n that ends every record.
func readBlockEnd(r io.Reader, n int64) error {
	if m, err := io.CopyN(io.Discard, r, n); err != nil {
		return fmt.Errorf("block truncated after %d of %d bytes: %w", m, n, noEOF(err))
	}
	var t [4]byte
	if _, err := io.ReadFull(r, t[:]); err != nil {
		return fmt.Errorf("record end: %w", noEOF(err))
	}
	if string(t[:]) != "\r\n\r\n" {
		return fmt.Errorf("block not followed by CRLF CRLF (wrong Content-Length?)")
	}
	return nil
}

// countingReader counts the bytes read through it. It implements
// io.ByteReader so compress/gzip reads exactly one member and no further.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// span is the raw bytes of one record (gzip member or uncompressed record).
type span struct {
	off, n int64
	drop   bool
}

// visitFunc is told about each record of a scanned stream, in order, with
// a reader of its block (it need not read it to its end), and says whether
// the record is dropped.
type visitFunc func(h Header, block io.Reader) (drop bool, err error)

// scan finds the records of a WARC stream and asks drop about each.
func scan(r io.Reader, drop func(Header) bool) ([]span, error) {
	visit := func(h Header, _ io.Reader) (bool, error) {
		return drop != nil && drop(h), nil
	}
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		return scanGzip(br, visit)
	}
	return scanPlain(br, visit)
}

// visitBlock calls visit with the block of h read from r and then reads the
// rest of the block and the record's end.
func visitBlock(r io.Reader, h Header, visit visitFunc) (bool, error) {
	block := &io.LimitedReader{R: r, N: h.ContentLength}
	drop, err := visit(h, block)
	if err != nil {
		return false, err
	}
	return drop, readBlockEnd(r, block.N)
}

func scanPlain(br *bufio.Reader, visit visitFunc) ([]span, error) {
	var spans []span
	var off int64
	for {
		h, n, err := readHeader(br)
		if err == io.EOF {
			return spans, nil
		}
		drop := false
		if err == nil {
			drop, err = visitBlock(br, h, visit)
		}
		if err != nil {
			return nil, fmt.Errorf("record at offset %d: %w", off, err)
		}
		size := n + h.ContentLength + 4
		spans = append(spans, span{off: off, n: size, drop: drop})
		off += size
	}
}

func scanGzip(br *bufio.Reader, visit visitFunc) ([]span, error) {
	var spans []span
	cr := &countingReader{r: br}
	zr := decompressors.Get().(*gzip.Reader)
	defer decompressors.Put(zr)
	dbr := readers.Get().(*bufio.Reader)
	defer putReader(dbr)
	for {
		off := cr.n
		if _, err := br.Peek(1); err == io.EOF {
			return spans, nil
		}
		drop, err := readMember(cr, zr, dbr, visit)
		if err != nil {
			// The whole members before the bad one, for Append.
			return spans, fmt.Errorf("record (gzip member) at offset %d: %w", off, err)
		}
		spans = append(spans, span{off: off, n: cr.n - off, drop: drop})
	}
}

// decompressors are the gzip readers scans read members with, kept
// between calls (their inflate state is ~40 KB to allocate). One may hold
// on to its last source until it reads the next.
var decompressors = sync.Pool{New: func() any { return new(gzip.Reader) }}

// readers are the 64 KiB buffers scans read through, kept between calls
// (Append runs once per crawl page).
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// putReader returns br to readers, holding on to nothing it read.
func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}

// readMember reads one gzip member from cr, which must hold exactly one
// record, visits the record and leaves cr just after the member.
func readMember(cr *countingReader, zr *gzip.Reader, dbr *bufio.Reader, visit visitFunc) (bool, error) {
	if magic, _ := cr.r.Peek(2); len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return false, fmt.Errorf("not a gzip member (starts %q)", magic)
	}
	if err := zr.Reset(cr); err != nil {
		return false, gzipErr(noEOF(err))
	}
	zr.Multistream(false)
	dbr.Reset(zr)
	h, _, err := readHeader(dbr)
	if err == io.EOF {
		return false, errors.New("empty gzip member")
	}
	drop := false
	if err == nil {
		drop, err = visitBlock(dbr, h, visit)
	}
	if err != nil {
		return false, err
	}
	// The member must end right after the record; reading to its end also
	// checks the gzip CRC and size.
	if _, err := dbr.Peek(1); err != io.EOF {
		if err != nil {
			return false, gzipErr(err)
		}
		if next, _ := dbr.Peek(5); string(next) == "WARC/" {
			return false, ErrMultiRecordMember
		}
		return false, errors.New("data after the record inside its gzip member")
	}
	return drop, nil
}

// gzipErr marks err as coming from decompression, once.
func gzipErr(err error) error {
	if strings.HasPrefix(err.Error(), "gzip: ") {
		return err
	}
	return fmt.Errorf("gzip: %w", err)
}

// Filter rewrites the WARC file at path without the records for which drop
// returns true and returns how many it removed. The file may be gzip
// compressed with one gzip member per record (as this package and GNU wget
// write it) or uncompressed; gzip is detected by its magic bytes. Every kept
// record stays byte-identical: its gzip member (or, uncompressed, its raw
// bytes up to and including the closing CRLF CRLF) is copied as is.
//
// The whole file is checked before anything is written. When nothing is
// dropped the file is not touched. Otherwise the result goes to a temporary
// file in the same directory, with the same permission bits, which is renamed
// over path (a symbolic link is followed and its target replaced). A malformed
// or truncated file, or a gzip member holding more than one record
// (ErrMultiRecordMember, e.g. a whole-file gzip), is an error naming the file
// and the record's offset and leaves the file unchanged. drop may have been
// called for some records before such an error is found; a nil drop keeps
// every record (and so only checks the file).
func Filter(path string, drop func(Header) bool) (dropped int, err error) {
	return Edit(path, func(h Header, _ io.Reader) (Change, error) {
		return Change{Drop: drop != nil && drop(h)}, nil
	})
}

// Change is what Edit does with one record: keep it as it is (the zero
// Change), drop it, or give it a new block.
type Change struct {
	Drop bool
	// Block, when not nil, replaces the record's block: the record keeps
	// its version line and fields, in order, but for Content-Length and
	// WARC-Block-Digest, which are recomputed (SHA-1, as Digest).
	Block []byte
}

// Edit rewrites the WARC file at path as edit says for each record, and
// returns how many records it dropped or changed. It is Filter's rewrite
// (the same checks, temporary file and rename; a file nothing changes in
// is not touched), with a record's new block written as one gzip member
// in a compressed file. edit gets each record's block to read (it need not
// read it to its end).
func Edit(path string, edit func(h Header, block io.Reader) (Change, error)) (changed int, err error) {
	defer func() {
		if err != nil {
			changed, err = 0, fmt.Errorf("warc edit %s: %w", path, err)
		}
	}()
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(target)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, errors.New("not a regular file")
	}
	br := bufio.NewReaderSize(f, 64<<10)
	magic, _ := br.Peek(2)
	gz := len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b
	repl := map[int][]byte{} // record index -> its new bytes
	n := 0
	visit := func(h Header, block io.Reader) (bool, error) {
		i := n
		n++
		c, err := edit(h, block)
		if err != nil || c.Drop || c.Block == nil {
			return c.Drop, err
		}
		rec, err := encodeRecord(h, c.Block, gz)
		if err != nil {
			return false, err
		}
		repl[i] = rec
		return false, nil
	}
	var spans []span
	if gz {
		spans, err = scanGzip(br, visit)
	} else {
		spans, err = scanPlain(br, visit)
	}
	if err != nil {
		return 0, err
	}
	for i, s := range spans {
		if s.drop || repl[i] != nil {
			changed++
		}
	}
	if changed == 0 {
		return 0, nil
	}

	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".filter-*")
	if err != nil {
		return 0, err
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		return 0, err
	}
	for i := 0; i < len(spans); {
		if spans[i].drop {
			i++
			continue
		}
		if rec := repl[i]; rec != nil {
			if _, err := tmp.Write(rec); err != nil {
				return 0, fmt.Errorf("write the changed record at offset %d: %w", spans[i].off, err)
			}
			i++
			continue
		}
		// Copy a run of kept records at once.
		off, n := spans[i].off, int64(0)
		for ; i < len(spans) && !spans[i].drop && repl[i] == nil; i++ {
			n += spans[i].n
		}
		if m, err := io.Copy(tmp, io.NewSectionReader(f, off, n)); err != nil || m != n {
			return 0, fmt.Errorf("copy records at offset %d: copied %d of %d bytes: %v", off, m, n, err)
		}
	}
	if now, err := f.Stat(); err != nil || now.Size() != fi.Size() || !now.ModTime().Equal(fi.ModTime()) {
		return 0, errors.New("file changed while being filtered")
	}
	if err := tmp.Sync(); err != nil {
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return 0, err
	}
	renamed = true
	if d, err := os.Open(dir); err == nil { // make the rename durable; best effort
		_ = d.Sync()
		_ = d.Close()
	}
	return changed, nil
}

// encodeRecord is h with block as its block: the version line and fields
// as they were but Content-Length and WARC-Block-Digest, then the block and
// the record's end; one gzip member when gz.
func encodeRecord(h Header, block []byte, gz bool) ([]byte, error) {
	var head strings.Builder
	head.WriteString(h.Version + "\r\n")
	for _, f := range h.Fields {
		v := f.Value
		switch {
		case strings.EqualFold(f.Name, "Content-Length"):
			v = strconv.Itoa(len(block))
		case strings.EqualFold(f.Name, "WARC-Block-Digest"):
			v = Digest(block)
		}
		head.WriteString(f.Name + ": " + v + "\r\n")
	}
	head.WriteString("\r\n")
	if !gz {
		return append(append([]byte(head.String()), block...), "\r\n\r\n"...), nil
	}
	var buf bytes.Buffer
	if err := NewWriter(&buf).member(head.String(), block); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Read calls fn for each record of the WARC stream r, gzip compressed (per
// record or as a whole) or not, with its header and a reader of its block.
// fn need not read the block to its end. An error from fn stops Read and is
// returned as is.
func Read(r io.Reader, fn func(h Header, block io.Reader) error) error {
	src := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := src.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return fmt.Errorf("warc read: gzip: %w", err)
		}
		defer zr.Close()
		src = bufio.NewReaderSize(zr, 64<<10)
	}
	for i := 0; ; i++ {
		h, _, err := readHeader(src)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("warc read: record %d: %w", i, err)
		}
		block := &io.LimitedReader{R: src, N: h.ContentLength}
		if err := fn(h, block); err != nil {
			return err
		}
		if err := readBlockEnd(src, block.N); err != nil {
			return fmt.Errorf("warc read: record %d: %w", i, err)
		}
	}
}
