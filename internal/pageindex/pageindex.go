// Package pageindex owns a crawl's page index on one worker host: every
// crawl page attempt's record (the page as a snapshot and one result per
// hook: snapindex.Line, index.json's document on one line) appended to
// ARCHIVE_DIR/crawls/IDENT/pageindex/INSTANCE.jsonl by the worker process
// that ran it (INSTANCE: HOSTNAME-PID, as the job WARC's name), one write
// per page attempt and no file or directory per page. `starter pages
// --url` reads a page's attempts from it (Page) and the WACZ its pages'
// titles (Titles).
//
// What the frontier marks done is here: the engine appends a page
// attempt's line before the attempt returns, so before its outcome is
// recorded. The write reaches the kernel when Append returns (no buffer in
// the process), so a worker killed afterwards loses nothing; one killed
// during the write leaves at most a torn last line in its own file, which
// no later write continues (a new process writes a file of its own) and
// readers skip, and its page, never recorded, runs again. A page attempt
// run twice (a repeated activity) has two lines: the last one counts.
package pageindex

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/snapindex"
)

// Ext is the extension of a page index file.
const Ext = ".jsonl"

// Writer appends one worker process's page attempts of a crawl to its
// file in the crawl's page index directory; it is safe for concurrent use.
type Writer struct {
	mu   sync.Mutex
	path string
	f    *os.File
	torn bool // a write failed part way: the next line starts on a line of its own
}

// NewWriter is the writer of dir/INSTANCE.jsonl (instance: a path element);
// the directory and the file are created at the first Append.
func NewWriter(dir, instance string) *Writer {
	return &Writer{path: filepath.Join(dir, instance+Ext)}
}

// Append writes the page attempt's line (snap.Page its page) with one
// write to the file.
func (w *Writer) Append(snap snapindex.Snapshot, results []model.ArchiveResult) error {
	if snap.Page <= 0 {
		return fmt.Errorf("page index: page id %d: must be > 0", snap.Page)
	}
	line, err := snapindex.Line(snap, results)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
			return fmt.Errorf("page index: %w", err)
		}
		f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("page index: %w", err)
		}
		w.f = f
	}
	if w.torn {
		line = append([]byte{'\n'}, line...)
	}
	n, err := w.f.Write(line)
	w.torn = err != nil && n > 0
	if err != nil {
		return fmt.Errorf("page index: append page %d to %s: %w", snap.Page, w.path, err)
	}
	return nil
}

// Close closes the file (a later Append opens it again).
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Attempt is one page attempt as its line says.
type Attempt struct {
	Snapshot snapindex.Snapshot
	Results  []model.ArchiveResult
}

// Number is the attempt's number (its results', 0 when it has none).
func (a Attempt) Number() int {
	if len(a.Results) == 0 {
		return 0
	}
	return a.Results[0].Attempts
}

// Page reads page id's attempts from the page index files in dir, first
// attempt first (of one attempt written twice, the later line). A missing
// directory is no attempt.
func Page(dir string, id int64) ([]Attempt, error) {
	prefix := []byte(`{"page":` + strconv.FormatInt(id, 10) + `,`)
	byNumber := map[int]Attempt{}
	err := scan(dir, prefix, func(a Attempt) {
		if old, ok := byNumber[a.Number()]; !ok || !a.Snapshot.SealedAt.Before(old.Snapshot.SealedAt) {
			byNumber[a.Number()] = a
		}
	})
	out := make([]Attempt, 0, len(byNumber))
	for _, a := range byNumber {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number() < out[j].Number() })
	return out, err
}

// Titles maps each page of the page index files in dir to the title of
// its last attempt that has one.
func Titles(dir string) (map[int64]string, error) {
	type seen struct {
		title  string
		number int
	}
	last := map[int64]seen{}
	err := scan(dir, []byte(`{"page":`), func(a Attempt) {
		if a.Snapshot.Title == "" {
			return
		}
		if s, ok := last[a.Snapshot.Page]; !ok || a.Number() >= s.number {
			last[a.Snapshot.Page] = seen{a.Snapshot.Title, a.Number()}
		}
	})
	out := make(map[int64]string, len(last))
	for id, s := range last {
		out[id] = s.title
	}
	return out, err
}

// scan calls fn with every whole line beginning with prefix of the page
// index files in dir (each file in name order, its lines in the order
// written); a line that does not parse (a torn last line) is skipped.
func scan(dir string, prefix []byte, fn func(Attempt)) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("page index: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), Ext) {
			continue
		}
		if err := scanFile(filepath.Join(dir, e.Name()), prefix, fn); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func scanFile(path string, prefix []byte, fn func(Attempt)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("page index: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' && bytes.HasPrefix(line, prefix) {
			if snap, results, perr := snapindex.ParseLine(line); perr == nil && snap.Page > 0 {
				fn(Attempt{Snapshot: snap, Results: results})
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("page index: read %s: %w", path, err)
		}
	}
}
