package wacz

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SidecarSuffix names a WARC's kept index: FILE.warc.gz beside
// FILE.warc.gz.cdxj. Its first line says how much of which file it
// covers ("!archiveflow-cdxj 1 BYTES INODE"); each other line is a record
// in those bytes: its WARC-Date (RFC 3339, to the nanosecond) and its CDXJ
// line.
// A WARC only grows by whole records (internal/warc's writers and the
// engine's job WARC append; a tool that rewrites one, warc.Edit, renames a
// new file into place, which changes its inode), so the index of its
// first BYTES stays true and only what follows needs reading.
const SidecarSuffix = ".cdxj"

const sidecarMagic = "!archiveflow-cdxj 1"

// UpdateIndex brings path's kept index up to date, reading only the bytes
// appended since it was last written, and returns the entries of every
// complete record (named name) and the size of the WARC's complete part,
// as IndexWARC does. A kept index that does not fit the file (another
// inode, a file shorter than it says, a malformed line) is rebuilt from
// the start. Failing to write the index (a read-only directory) is not an
// error: the entries are returned all the same.
func UpdateIndex(path, name string) (entries []Entry, complete int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	ino := inode(fi)
	kept, from, ok := readSidecar(path+SidecarSuffix, ino, fi.Size())
	if !ok {
		kept, from = nil, 0
	}
	more, complete, err := indexFrom(path, name, from)
	if err != nil {
		return nil, 0, err
	}
	for i := range kept {
		kept[i].Filename = name
	}
	entries = append(kept, more...)
	if complete != from || !ok {
		_ = writeSidecar(path+SidecarSuffix, entries, complete, ino)
	}
	return entries, complete, nil
}

// inode is fi's inode number (0 where the system has none).
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// readSidecar reads a kept index that covers the first bytes of a file
// with inode ino and size size; ok false when there is none or it does not
// fit.
func readSidecar(path string, ino uint64, size int64) (entries []Entry, covered int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, false
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.ReadString('\n')
	if err != nil {
		return nil, 0, false
	}
	fields := strings.Fields(strings.TrimPrefix(head, sidecarMagic))
	if !strings.HasPrefix(head, sidecarMagic+" ") || len(fields) != 2 {
		return nil, 0, false
	}
	covered, err1 := strconv.ParseInt(fields[0], 10, 64)
	keptIno, err2 := strconv.ParseUint(fields[1], 10, 64)
	if err1 != nil || err2 != nil || keptIno != ino || covered > size || covered < 0 {
		return nil, 0, false
	}
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			return entries, covered, true
		}
		if err != nil && err != io.EOF {
			return nil, 0, false
		}
		stamp, cdxj, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		t, terr := time.Parse(time.RFC3339Nano, stamp)
		e, perr := ParseLine(cdxj)
		if terr != nil || perr != nil || e.Offset+e.Length > covered {
			return nil, 0, false
		}
		e.Time = t
		entries = append(entries, e)
	}
}

// writeSidecar replaces the kept index at path (a temporary file renamed
// into place: a reader never sees half of one).
func writeSidecar(path string, entries []Entry, covered int64, ino uint64) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(tmp)
	fmt.Fprintf(bw, "%s %d %d\n", sidecarMagic, covered, ino)
	for _, e := range entries {
		// The record's WARC-Date in full first: the CDXJ timestamp keeps
		// only seconds.
		bw.WriteString(e.Time.UTC().Format(time.RFC3339Nano) + " ")
		bw.WriteString(e.Line())
		bw.WriteByte('\n')
	}
	err = errors.Join(bw.Flush(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// ParseLine reads one CDXJ line as Line writes it.
func ParseLine(line string) (Entry, error) {
	key, rest, ok1 := strings.Cut(line, " ")
	ts, js, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || len(ts) != 14 {
		return Entry{}, fmt.Errorf("cdxj line %q: want KEY TIMESTAMP14 {JSON}", truncate(line, 80))
	}
	t, err := time.Parse("20060102150405", ts)
	if err != nil {
		return Entry{}, fmt.Errorf("cdxj line %q: timestamp: %w", truncate(line, 80), err)
	}
	var f cdxjFields
	if err := json.Unmarshal([]byte(js), &f); err != nil {
		return Entry{}, fmt.Errorf("cdxj line %q: %w", truncate(line, 80), err)
	}
	e := Entry{Key: key, Time: t, Timestamp: ts, URL: f.URL, Mime: f.Mime, Digest: f.Digest, Filename: f.Filename}
	if e.Offset, err = strconv.ParseInt(f.Offset, 10, 64); err != nil {
		return Entry{}, fmt.Errorf("cdxj line %q: offset: %w", truncate(line, 80), err)
	}
	if e.Length, err = strconv.ParseInt(f.Length, 10, 64); err != nil {
		return Entry{}, fmt.Errorf("cdxj line %q: length: %w", truncate(line, 80), err)
	}
	if f.Status != "" {
		if e.Status, err = strconv.Atoi(f.Status); err != nil {
			return Entry{}, fmt.Errorf("cdxj line %q: status: %w", truncate(line, 80), err)
		}
	}
	return e, nil
}
