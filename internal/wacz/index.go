package wacz

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/archiveflow/archiveflow/internal/warc"
)

// Entry is one CDXJ line: a capture and where its record lies in its WARC.
type Entry struct {
	Key       string    // SURT of URL
	Time      time.Time // WARC-Date
	URL       string
	Mime      string // the response's content type (no parameters); "warc/revisit" for a revisit
	Status    int    // the HTTP status (0: none, e.g. a resource record)
	Digest    string // WARC-Payload-Digest
	Offset    int64  // of the record's gzip member in the WARC file
	Length    int64  // of the gzip member
	Filename  string // the WARC's name in archive/
	Timestamp string // Time as 14 digits
}

// cdxjFields is the JSON part of a CDXJ line, keys in pywb's order.
type cdxjFields struct {
	URL      string `json:"url"`
	Mime     string `json:"mime,omitempty"`
	Status   string `json:"status,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Length   string `json:"length"`
	Offset   string `json:"offset"`
	Filename string `json:"filename"`
}

// Line is the entry as a CDXJ line (without its newline).
func (e Entry) Line() string {
	f := cdxjFields{URL: e.URL, Mime: e.Mime, Digest: e.Digest,
		Length: strconv.FormatInt(e.Length, 10), Offset: strconv.FormatInt(e.Offset, 10), Filename: e.Filename}
	if e.Status > 0 {
		f.Status = strconv.Itoa(e.Status)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(f) // strings only: cannot fail
	return e.Key + " " + e.Timestamp + " " + strings.TrimRight(b.String(), "\n")
}

// timestamp14 is a WARC date as a CDXJ timestamp.
func timestamp14(t time.Time) string { return t.UTC().Format("20060102150405") }

// indexed reports the record types a CDXJ line is written for: what a
// replay serves (request and warcinfo records are not looked up by URL).
func indexed(typ string) bool {
	switch typ {
	case "response", "revisit", "resource":
		return true
	}
	return false
}

// position tracks where a bufio.Reader is in its source: the bytes the
// reader took from src, less those still buffered. compress/gzip reads a
// *bufio.Reader byte by byte (io.ByteReader), so after a member it stands
// exactly at the member's end.
type position struct {
	src io.Reader
	n   int64
	br  *bufio.Reader
}

func newPosition(src io.Reader) *position {
	p := &position{src: src}
	p.br = bufio.NewReaderSize(p, 64<<10)
	return p
}

// Read is the buffered reader's source.
func (p *position) Read(b []byte) (int, error) {
	n, err := p.src.Read(b)
	p.n += int64(n)
	return n, err
}

// offset is the reader's position in src.
func (p *position) offset() int64 { return p.n - int64(p.br.Buffered()) }

// errMultiRecord is a gzip member holding more than one record: its
// records cannot be addressed by offset.
var errMultiRecord = errors.New("gzip member holds more than one record (a WACZ needs one gzip member per record)")

// errPartial is a gzip member cut short by the end of the file.
var errPartial = errors.New("gzip member cut short by the end of the file")

// IndexWARC reads the WARC file at path (gzip, one member per record, as
// internal/warc and GNU wget write it) and returns the CDXJ entries of its
// response, revisit and resource records, named name, and the size of its
// complete part: a file still being appended to may end in a partial
// member, which is left out (complete < the file's size). Any other
// malformed member is an error naming the file and the member's offset.
func IndexWARC(path, name string) (entries []Entry, complete int64, err error) {
	return indexFrom(path, name, 0)
}

// indexFrom is IndexWARC from offset from, where a record (gzip member)
// begins.
func indexFrom(path, name string, from int64) (entries []Entry, complete int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := fi.Size()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, 0, err
	}
	pos := newPosition(io.LimitReader(f, size-from))
	pos.n = from
	var zr gzip.Reader
	for {
		off := pos.offset()
		if _, err := pos.br.Peek(1); err == io.EOF {
			return entries, off, nil
		}
		e, ok, err := readMember(pos.br, &zr)
		if err != nil {
			if errors.Is(err, errPartial) {
				// A partial last member: a record still being written.
				return entries, off, nil
			}
			return nil, 0, fmt.Errorf("%s: record (gzip member) at offset %d: %w", path, off, err)
		}
		if ok {
			e.Offset, e.Length, e.Filename = off, pos.offset()-off, name
			entries = append(entries, e)
		}
	}
}

// recordReaders are the buffers readMember reads a member's record
// through, kept between members: warc.Read takes a *bufio.Reader of its
// buffer's size as it is, where it would allocate 64 KiB for each record.
var recordReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// readMember reads one gzip member holding one record and returns its
// entry (ok false: a type not indexed).
func readMember(br *bufio.Reader, zr *gzip.Reader) (e Entry, ok bool, err error) {
	if magic, _ := br.Peek(2); len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return e, false, fmt.Errorf("not a gzip member (starts %q): a WACZ needs gzip WARCs, one member per record", magic)
	}
	if err := zr.Reset(br); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return e, false, errPartial
		}
		return e, false, fmt.Errorf("gzip: %w", err)
	}
	zr.Multistream(false)
	records := 0
	rb := recordReaders.Get().(*bufio.Reader)
	rb.Reset(zr)
	defer func() {
		rb.Reset(nil)
		recordReaders.Put(rb)
	}()
	err = warc.Read(rb, func(h warc.Header, block io.Reader) error {
		records++
		if records > 1 {
			return errMultiRecord
		}
		if !indexed(h.Type) {
			return nil
		}
		ok = true
		e, err = entryOf(h, block)
		return err
	})
	if err != nil {
		// Tell a member cut short (the file is being written) from a
		// complete member holding a malformed record.
		if _, derr := io.Copy(io.Discard, zr); errors.Is(derr, io.ErrUnexpectedEOF) {
			return e, false, errPartial
		}
		return e, false, err
	}
	if records == 0 {
		return e, false, errors.New("empty gzip member")
	}
	// Read to the member's end: checks its CRC and size.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return e, false, errPartial
		}
		return e, false, fmt.Errorf("gzip: %w", err)
	}
	return e, ok, nil
}

// entryOf makes the entry of one record (offsets are the caller's).
func entryOf(h warc.Header, block io.Reader) (Entry, error) {
	t, err := time.Parse(time.RFC3339Nano, h.Get("WARC-Date"))
	if err != nil {
		return Entry{}, fmt.Errorf("record %s: WARC-Date %q: %w", h.ID, h.Get("WARC-Date"), err)
	}
	e := Entry{Key: SURT(h.TargetURI), Time: t, Timestamp: timestamp14(t), URL: h.TargetURI, Digest: h.Get("WARC-Payload-Digest")}
	switch {
	case h.Type == "revisit":
		e.Mime = "warc/revisit"
		if resp, err := http.ReadResponse(bufio.NewReader(block), nil); err == nil {
			e.Status = resp.StatusCode
		}
	case h.Type == "response" && strings.HasPrefix(h.Get("Content-Type"), "application/http"):
		resp, err := http.ReadResponse(bufio.NewReader(block), nil)
		if err != nil {
			return e, fmt.Errorf("record %s (%s): HTTP response: %w", h.ID, h.TargetURI, err)
		}
		e.Status = resp.StatusCode
		e.Mime = mediaType(resp.Header.Get("Content-Type"))
	default:
		e.Mime = mediaType(h.Get("Content-Type"))
	}
	if e.Mime == "" {
		e.Mime = "unk"
	}
	return e, nil
}

// mediaType is a Content-Type without its parameters, lowercased.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}
