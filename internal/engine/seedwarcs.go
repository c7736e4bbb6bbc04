package engine

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// AppendedFile lists, in a start page's snapshot directory (or its kept
// attempt's, attempts/N), the WARC files CompleteSeedPage appended to the
// job's WARC on this host: one line per file, "INODE SIZE MTIME_NS PATH"
// (PATH relative to the directory, tab-separated). A repeated
// CompleteSeedPage (the activity retried after its records were appended:
// a Redis error, a lost worker) appends only files not listed as they are
// now, so the job's WARC holds each record once. A file a later run of
// the start page writes anew (starter retry, a later retry) is another
// file (another inode, size or time), and is appended.
const AppendedFile = "job-warc-appended.tsv"

// appended is one WARC file as AppendedFile lists it.
type appended struct {
	ino, size, mtime int64
}

func appendedOf(info fs.FileInfo) appended {
	a := appended{size: info.Size(), mtime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		a.ino = int64(st.Ino)
	}
	return a
}

// appendSeedWARCs appends dir's WARC files (not its earlier attempts') to
// the job ident's WARC, each once however often it is called: a file is
// listed in dir's AppendedFile only after what appendWARCs appended is on
// disk (the job's WARC fsynced), and the list is fsynced before the next
// file: a host crash at any point leaves no file listed whose records the
// job's WARC lacks, and appends at most the file whose list entry had not
// reached the disk again (its records twice, never lost). remove deletes
// them afterwards (a kept attempt's: not kept beside it).
func (e *Engine) appendSeedWARCs(ident, dir string, remove bool) error {
	files, err := listWARCs(dir)
	if err != nil || len(files) == 0 {
		return err
	}
	done, err := readAppended(dir)
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, path := range files {
		info, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		now := appendedOf(info)
		if was, ok := done[rel]; ok && was == now {
			continue // appended by an earlier call
		}
		if err := e.warcs.appendWARCs(e, ident, []string{path}, nil); err != nil {
			return err
		}
		if err := e.warcs.sync(ident); err != nil {
			return err
		}
		done[rel] = now
		if err := writeAppended(dir, done); err != nil {
			return err
		}
	}
	if remove {
		for _, f := range files {
			_ = os.Remove(f)
		}
	}
	return nil
}

// readAppended reads dir's AppendedFile (none: nothing appended yet).
func readAppended(dir string) (map[string]appended, error) {
	out := map[string]appended{}
	f, err := os.Open(filepath.Join(dir, AppendedFile))
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the appended start page WARCs: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "\t", 4)
		if len(parts) != 4 {
			continue // a torn line: its file is appended again
		}
		ino, err1 := strconv.ParseInt(parts[0], 10, 64)
		size, err2 := strconv.ParseInt(parts[1], 10, 64)
		mtime, err3 := strconv.ParseInt(parts[2], 10, 64)
		if err1 == nil && err2 == nil && err3 == nil {
			out[parts[3]] = appended{ino: ino, size: size, mtime: mtime}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the appended start page WARCs: %w", err)
	}
	return out, nil
}

// writeAppended replaces dir's AppendedFile with done, durably: a new
// file, fsynced, renamed over the old, and the rename fsynced (dir's
// entry): a reader, after a host crash too, sees the old list or the new
// one.
func writeAppended(dir string, done map[string]appended) error {
	var b strings.Builder
	for rel, a := range done {
		fmt.Fprintf(&b, "%d\t%d\t%d\t%s\n", a.ino, a.size, a.mtime, rel)
	}
	path := filepath.Join(dir, AppendedFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("list the appended start page WARCs: %w", err)
	}
	_, err = f.WriteString(b.String())
	if err = errors.Join(err, syncFile(f), f.Close()); err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("list the appended start page WARCs: %w", err)
	}
	return nil
}

// syncFile is (*os.File).Sync: a variable so a test can see the order of
// the fsyncs.
var syncFile = (*os.File).Sync

// syncDir fsyncs directory dir (a rename in it is then durable).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(syncFile(d), d.Close())
}
