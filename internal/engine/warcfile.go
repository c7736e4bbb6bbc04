package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/wacz"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// warcFiles are the job WARCs this worker writes: one open file per crawl,
// ARCHIVE_DIR/crawls/IDENT/warc/IDENT-INSTANCE-NNNNN.warc.gz, rotated past
// Config.WARCMaxBytes. INSTANCE is this worker process (HOSTNAME-PID), so
// files of different hosts, or of one host's successive processes, never
// collide. Page WARCs are gzip member streams, one record per member:
// appending one copies its members (warc.Append), except that a response
// whose payload the crawl already stored on this host becomes a revisit
// record, and the page's own warcinfo gives way to the job file's (each
// job file begins with a warcinfo record naming archiveflow and its
// version). The payload index, ARCHIVE_DIR/crawls/IDENT/payload-digests.tsv,
// is per crawl and host: it outlives the worker process, so a restarted
// worker refers to what its predecessor stored.
type warcFiles struct{ perCrawl[*jobWARC] }

type jobWARC struct {
	mu      sync.Mutex
	ident   string
	dir     string
	base    string // IDENT-INSTANCE
	seq     int
	f       *os.File
	buf     *bufio.Writer // in front of f, flushed before appendWARCs returns
	size    int64
	files   int           // page files appended to f
	digests *warc.Digests // opened with the first file
}

// jobWARCDir is where a crawl's job WARCs are (archivedir.CrawlWARCs).
func (e *Engine) jobWARCDir(ident string) string {
	return archivedir.CrawlWARCs(e.cfg.ArchiveDir, ident)
}

// appendWARCs appends files, in order, to the crawl's WARC, rotating
// before a file that would take it past the size limit (a file is never
// split). A path in mem is read from memory (a page WARC an in-process
// pagefetch kept: builtin.WithCrawlPage) rather than from disk. What one
// call appends is written through a buffer and reaches the file before it
// returns: a page's records are in the job's WARC before its outcome is
// recorded, with one write per page rather than one per record.
func (w *warcFiles) appendWARCs(e *Engine, ident string, files []string, mem map[string][]byte) error {
	// Each file is read (decompressed, its records parsed) before the
	// crawl's WARC is locked: pages running at once wait for each other's
	// writes only (warc.ScanAppend).
	scans := make([]*warc.AppendScan, len(files))
	for i, path := range files {
		var src io.ReaderAt
		var size int64
		if data, ok := mem[path]; ok {
			src, size = bytes.NewReader(data), int64(len(data))
		} else {
			f, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("open page warc %s: %w", path, err)
			}
			defer f.Close()
			info, err := f.Stat()
			if err != nil {
				return fmt.Errorf("stat page warc %s: %w", path, err)
			}
			src, size = f, info.Size()
		}
		scans[i] = warc.ScanAppend(src, size)
	}
	j, _ := w.get(ident, func() *jobWARC {
		return &jobWARC{ident: ident, dir: e.jobWARCDir(ident), base: archivedir.Name(ident) + "-" + archivedir.Name(e.cfg.Instance)}
	})
	j.mu.Lock()
	defer j.mu.Unlock()
	defer j.flush()
	for i, path := range files {
		if err := j.ensureRoom(scans[i].Size(), e.cfg.WARCMaxBytes); err != nil {
			return err
		}
		st, err := scans[i].Write(j.buf, j.digests)
		j.size += st.Written
		j.files++
		if err != nil {
			return fmt.Errorf("append %s to %s: %w", path, j.f.Name(), err)
		}
		if st.Verbatim != nil {
			e.log.Debug("page warc appended as it is", zap.String("file", path), zap.Error(st.Verbatim))
		}
		if st.Damaged != nil {
			e.log.Warn("page warc ends in a damaged record: its whole records appended, the rest left out",
				zap.String("file", path), zap.Int64("bytes_left_out", st.DamagedBytes), zap.Error(st.Damaged))
		}
		if derr := j.digests.Err(); derr != nil {
			e.log.Warn("payload digest index", zap.String("ident", ident), zap.Error(derr))
		}
	}
	return j.flush()
}

// sync writes the crawl's open WARC file to disk (fsync): what
// appendWARCs appended survives a host crash from then on.
func (w *warcFiles) sync(ident string) error {
	j, ok := w.get(ident, nil)
	if !ok {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil // closed: closeFile synced it
	}
	if err := j.flush(); err != nil {
		return err
	}
	if err := syncFile(j.f); err != nil {
		return fmt.Errorf("sync %s: %w", j.f.Name(), err)
	}
	return nil
}

// flush writes what the buffer holds to the open file.
func (j *jobWARC) flush() error {
	if j.buf == nil || j.buf.Buffered() == 0 {
		return nil
	}
	if err := j.buf.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", j.f.Name(), err)
	}
	return nil
}

// PayloadDigestsFile is where a crawl's payload digest index lives on a
// worker host, below ARCHIVE_DIR/crawls/IDENT.
const PayloadDigestsFile = "payload-digests.tsv"

// ensureRoom opens the next file when none is open or the current one
// would grow past max with n more bytes.
func (j *jobWARC) ensureRoom(n, max int64) error {
	if j.f != nil && (max <= 0 || j.files == 0 || j.size+n <= max) {
		return nil
	}
	if err := j.closeFile(); err != nil {
		return err
	}
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return fmt.Errorf("create warc dir: %w", err)
	}
	if j.digests == nil {
		d, err := warc.OpenDigests(filepath.Join(filepath.Dir(j.dir), PayloadDigestsFile))
		if err != nil {
			return err
		}
		j.digests = d
	}
	if j.seq == 0 {
		j.seq = lastSeq(j.dir, j.base)
	}
	for {
		j.seq++
		name := filepath.Join(j.dir, fmt.Sprintf("%s-%05d.warc.gz", j.base, j.seq))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		w := warc.NewWriter(f)
		_, err = w.Info(filepath.Base(name), map[string]string{
			"software":   warc.Software(),
			"format":     "WARC File Format 1.1",
			"conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
			"isPartOf":   j.ident,
			"robots":     "ignore",
			"description": "archiveflow crawl " + j.ident + ": each page's fetches; a response whose payload the crawl " +
				"stored before on this host is a revisit record (identical-payload-digest)",
		})
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("write warcinfo to %s: %w", name, err)
		}
		j.f, j.size, j.files = f, w.Written(), 0
		if j.buf == nil {
			j.buf = bufio.NewWriterSize(f, 256<<10)
		} else {
			j.buf.Reset(f)
		}
		return nil
	}
}

// lastSeq is the highest sequence number of base's files in dir (0: none).
func lastSeq(dir, base string) int {
	entries, _ := os.ReadDir(dir)
	last := 0
	for _, en := range entries {
		rest, ok := strings.CutPrefix(en.Name(), base+"-")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSuffix(rest, ".warc.gz")); err == nil && n > last {
			last = n
		}
	}
	return last
}

// closeFile closes the open job WARC and brings its kept CDXJ index up to
// date (wacz.UpdateIndex, FILE.warc.gz.cdxj beside it): the crawl's index
// grows file by file as WARCs rotate and at the teardown, so the seal's
// WACZ reads only what no index covers yet.
func (j *jobWARC) closeFile() error {
	if j.f == nil {
		return nil
	}
	name := j.f.Name()
	err := errors.Join(j.flush(), j.f.Sync(), j.f.Close())
	j.f = nil
	if err != nil {
		return fmt.Errorf("close job warc: %w", err)
	}
	// An index that cannot be written now is built by whoever reads the
	// WARC next (the seal, export): it costs time, never records.
	_, _, _ = wacz.UpdateIndex(name, filepath.Base(name))
	return nil
}

// close closes a crawl's WARC file (its crawl ended on this worker).
func (w *warcFiles) close(ident string) error {
	j, ok := w.take(ident)
	if !ok {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.closeFile()
	if j.digests != nil {
		err = errors.Join(err, j.digests.Close())
		j.digests = nil
	}
	return err
}
