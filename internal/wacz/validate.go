package wacz

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report says what Validate checked.
type Report struct {
	Files   int // entries whose hash and size were recomputed
	Entries int // index lines checked against their records
	Pages   int
}

// Validate checks the WACZ at path: every ZIP entry STORED; the
// datapackage-digest.json hash of datapackage.json; every resource's sha256
// and size recomputed, and every entry listed; indexes/index.cdxj sorted,
// each line well formed and pointing (offset, length, filename) at exactly
// one gzip member of a WARC in archive/ holding one record whose target URI
// and date are the line's; pages/pages.jsonl's header and each page's url.
// An error that IsInvalid names the file inside the WACZ it is about.
func Validate(path string) (Report, error) {
	var rep Report
	f, err := os.Open(path)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rep, err
	}
	zr, err := zip.NewReader(f, fi.Size())
	if err != nil {
		return rep, fmt.Errorf("%w: %s: %v", errInvalid, path, err)
	}
	files := map[string]*zip.File{}
	for _, zf := range zr.File {
		if zf.Method != zip.Store {
			return rep, invalid(zf.Name, "compressed (method %d): every entry of a WACZ must be STORED", zf.Method)
		}
		if _, dup := files[zf.Name]; dup {
			return rep, invalid(zf.Name, "in the ZIP twice")
		}
		files[zf.Name] = zf
	}
	required := []string{DataPackage, DataPackageDig, PagesPath, IndexPath}
	if files[IndexPath] == nil && (files[CompressedIndexPath] != nil || files[IndexIdxPath] != nil) {
		required = append(required[:3], CompressedIndexPath, IndexIdxPath)
	}
	for _, name := range required {
		if files[name] == nil {
			return rep, invalid(name, "missing")
		}
	}

	dpb, err := readEntry(files[DataPackage])
	if err != nil {
		return rep, err
	}
	digb, err := readEntry(files[DataPackageDig])
	if err != nil {
		return rep, err
	}
	var dig digestFile
	if err := json.Unmarshal(digb, &dig); err != nil {
		return rep, invalid(DataPackageDig, "%v", err)
	}
	if sum := sha256.Sum256(dpb); dig.Path != DataPackage || dig.Hash != "sha256:"+hex.EncodeToString(sum[:]) {
		return rep, invalid(DataPackage, "hash sha256:%x, datapackage-digest.json says %s for %q", sum, dig.Hash, dig.Path)
	}
	var dp dataPackage
	if err := json.Unmarshal(dpb, &dp); err != nil {
		return rep, invalid(DataPackage, "%v", err)
	}
	if dp.Profile != "data-package" || dp.WACZVersion == "" {
		return rep, invalid(DataPackage, "profile %q, wacz_version %q: want data-package and a version", dp.Profile, dp.WACZVersion)
	}
	listed := map[string]bool{DataPackage: true, DataPackageDig: true}
	for _, r := range dp.Resources {
		zf := files[r.Path]
		if zf == nil {
			return rep, invalid(r.Path, "listed in datapackage.json, not in the ZIP")
		}
		h := sha256.New()
		rc, err := zf.Open()
		if err != nil {
			return rep, invalid(r.Path, "%v", err)
		}
		n, err := io.Copy(h, rc) // also checks the entry's CRC-32
		rc.Close()
		if err != nil {
			return rep, invalid(r.Path, "%v", err)
		}
		if got := sumString(h); got != r.Hash || n != r.Bytes {
			return rep, invalid(r.Path, "%d bytes, %s; datapackage.json says %d bytes, %s", n, got, r.Bytes, r.Hash)
		}
		listed[r.Path] = true
		rep.Files++
	}
	for name, zf := range files {
		if !listed[name] && !zf.FileInfo().IsDir() {
			return rep, invalid(name, "not listed in datapackage.json")
		}
	}

	if rep.Entries, err = checkIndex(f, files); err != nil {
		return rep, err
	}
	rep.Pages, err = checkPages(files[PagesPath])
	return rep, err
}

// readEntry reads an entry whole.
func readEntry(zf *zip.File) ([]byte, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, invalid(zf.Name, "%v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxReadEntry+1))
	if err != nil {
		return nil, invalid(zf.Name, "%v", err)
	}
	if len(b) > maxReadEntry {
		return nil, fmt.Errorf("%s: over %d MiB: too large for this check", zf.Name, maxReadEntry>>20)
	}
	return b, nil
}

// maxReadEntry bounds an entry Validate reads whole (the package files, a
// compressed index).
const maxReadEntry = 256 << 20

// checkIndex checks the index, plain or compressed, against the WARCs.
func checkIndex(f *os.File, files map[string]*zip.File) (int, error) {
	if files[IndexPath] == nil {
		lines, err := checkIdx(files)
		if err != nil {
			return 0, err
		}
		return checkLines(f, files, CompressedIndexPath, lines)
	}
	rc, err := files[IndexPath].Open()
	if err != nil {
		return 0, invalid(IndexPath, "%v", err)
	}
	defer rc.Close()
	return checkLines(f, files, IndexPath, rc)
}

// checkIdx checks a compressed index: index.idx's !meta line, one sorted
// line per block with the key and timestamp of the block's first line, the
// blocks contiguous gzip members covering index.cdx.gz. It returns the
// blocks' lines.
func checkIdx(files map[string]*zip.File) (io.Reader, error) {
	idx, err := readEntry(files[IndexIdxPath])
	if err != nil {
		return nil, err
	}
	gz, err := readEntry(files[CompressedIndexPath])
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(idx), "\n"), "\n")
	var meta struct{ Format, Filename string }
	head, js, _ := strings.Cut(lines[0], " {")
	if head != "!meta 0" || json.Unmarshal([]byte("{"+js), &meta) != nil || meta.Format != "cdxj-gzip-1.0" || meta.Filename != path.Base(CompressedIndexPath) {
		return nil, invalid(IndexIdxPath, `line 1: want !meta 0 {"format":"cdxj-gzip-1.0","filename":"index.cdx.gz"}, have %q`, truncate(lines[0], 100))
	}
	var all bytes.Buffer
	var next int64
	prev := ""
	for i, line := range lines[1:] {
		where := fmt.Sprintf("line %d", i+2)
		keyTS, js, ok := strings.Cut(line, " {")
		var blk struct{ Offset, Length int64 }
		if !ok || json.Unmarshal([]byte("{"+js), &blk) != nil || strings.Count(keyTS, " ") != 1 {
			return nil, invalid(IndexIdxPath, "%s: not KEY TIMESTAMP {offset, length}: %q", where, truncate(line, 100))
		}
		if keyTS < prev {
			return nil, invalid(IndexIdxPath, "%s: not sorted", where)
		}
		prev = keyTS
		if blk.Offset != next || blk.Length <= 0 || blk.Offset+blk.Length > int64(len(gz)) {
			return nil, invalid(IndexIdxPath, "%s: block at %d, %d bytes: want the next block of %s at %d (%d bytes)", where, blk.Offset, blk.Length, CompressedIndexPath, next, len(gz))
		}
		next += blk.Length
		br := bytes.NewReader(gz[blk.Offset : blk.Offset+blk.Length])
		zr, err := gzip.NewReader(br)
		var text []byte
		if err == nil {
			zr.Multistream(false)
			text, err = io.ReadAll(zr)
		}
		if err == nil && br.Len() > 0 {
			err = fmt.Errorf("%d bytes after its gzip member", br.Len())
		}
		if err != nil {
			return nil, invalid(CompressedIndexPath, "block at %d (%s of index.idx): %v", blk.Offset, where, err)
		}
		if first, _, _ := strings.Cut(string(text), "\n"); !strings.HasPrefix(first, keyTS+" ") {
			return nil, invalid(IndexIdxPath, "%s: %q is not the block's first line's key and timestamp (%q)", where, keyTS, truncate(first, 80))
		}
		all.Write(text)
	}
	if next != int64(len(gz)) {
		return nil, invalid(IndexIdxPath, "the blocks cover %d of the %d bytes of %s", next, len(gz), CompressedIndexPath)
	}
	return &all, nil
}

// checkLines checks the index lines read from r (named name) against the
// WARCs' bytes, read at their place in the ZIP file f (STORED entries are
// their raw bytes).
func checkLines(f *os.File, files map[string]*zip.File, name string, r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	prev, n := "", 0
	// One member buffer, reader and decompressor for every line (a
	// decompressor's state is ~40 KB to allocate).
	var (
		member []byte
		br     = bufio.NewReader(nil)
		gz     gzip.Reader
	)
	for sc.Scan() {
		line := sc.Text()
		n++
		where := fmt.Sprintf("line %d", n)
		if n > 1 && line < prev {
			return n, invalid(name, "%s: not sorted (after %q)", where, truncate(prev, 80))
		}
		prev = line
		key, rest, ok1 := strings.Cut(line, " ")
		ts, js, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || len(ts) != 14 || strings.Trim(ts, "0123456789") != "" {
			return n, invalid(name, "%s: not SURT TIMESTAMP JSON: %q", where, truncate(line, 120))
		}
		var fl cdxjFields
		if err := json.Unmarshal([]byte(js), &fl); err != nil {
			return n, invalid(name, "%s: %v", where, err)
		}
		if key != SURT(fl.URL) {
			return n, invalid(name, "%s: key %q is not the SURT of %q (%q)", where, key, fl.URL, SURT(fl.URL))
		}
		off, err1 := strconv.ParseInt(fl.Offset, 10, 64)
		length, err2 := strconv.ParseInt(fl.Length, 10, 64)
		if err1 != nil || err2 != nil || off < 0 || length <= 0 {
			return n, invalid(name, "%s: offset %q, length %q", where, fl.Offset, fl.Length)
		}
		wf := files[ArchiveDir+fl.Filename]
		if wf == nil || strings.Contains(fl.Filename, "/") || !isWARCName(fl.Filename) {
			return n, invalid(name, "%s: filename %q: no such WARC in %s", where, fl.Filename, ArchiveDir)
		}
		if uint64(off+length) > wf.UncompressedSize64 {
			return n, invalid(name, "%s: offset %d + length %d past the end of %s (%d bytes)", where, off, length, wf.Name, wf.UncompressedSize64)
		}
		start, err := wf.DataOffset()
		if err != nil {
			return n, invalid(wf.Name, "%v", err)
		}
		member = slices.Grow(member[:0], int(length))[:length]
		if _, err := f.ReadAt(member, start+off); err != nil {
			return n, invalid(wf.Name, "read %d bytes at %d: %v", length, off, err)
		}
		br.Reset(bytes.NewReader(member))
		e, ok, err := readMember(br, &gz)
		if _, perr := br.Peek(1); err == nil && perr != io.EOF {
			err = fmt.Errorf("the record's gzip member is shorter than the line's length %d", length)
		}
		if err == nil && !ok {
			err = fmt.Errorf("the record there is not a response, revisit or resource")
		}
		if err != nil {
			return n, invalid(name, "%s: %s at offset %d: %v", where, wf.Name, off, err)
		}
		if e.URL != fl.URL || e.Timestamp != ts {
			return n, invalid(name, "%s: %s at offset %d holds %s %s, the line says %s %s", where, wf.Name, off, e.Timestamp, e.URL, ts, fl.URL)
		}
	}
	if err := sc.Err(); err != nil {
		return n, invalid(name, "%v", err)
	}
	return n, nil
}

// checkPages checks pages.jsonl's header line and that each page has a
// url and a date.
func checkPages(zf *zip.File) (int, error) {
	rc, err := zf.Open()
	if err != nil {
		return 0, invalid(zf.Name, "%v", err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		if n == 1 {
			var h struct{ Format string }
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Format != "json-pages-1.0" {
				return 0, invalid(zf.Name, "line 1: want the json-pages-1.0 header, have %q", truncate(sc.Text(), 80))
			}
			continue
		}
		var p pageLine
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil || p.URL == "" {
			return n - 1, invalid(zf.Name, "line %d: not a page with a url: %q", n, truncate(sc.Text(), 80))
		}
		if _, err := time.Parse(time.RFC3339Nano, p.TS); err != nil {
			return n - 1, invalid(zf.Name, "line %d: page %s: ts %q: want an RFC 3339 date", n, p.URL, p.TS)
		}
	}
	if err := sc.Err(); err != nil {
		return n, invalid(zf.Name, "%v", err)
	}
	if n == 0 {
		return 0, invalid(zf.Name, "empty: want the json-pages-1.0 header")
	}
	return n - 1, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
