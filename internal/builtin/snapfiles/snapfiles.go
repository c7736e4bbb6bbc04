// Package snapfiles owns the layout of a snapshot directory as the built-in
// hooks see it: one sub-directory per plugin, holding the plugin's output
// files and the runner's own files, which are never output (their name
// pattern is internal/procs' ParseRunnerFile; the records in their stdout
// logs are internal/jsonl's). It also owns reading a snapshot directory
// without leaving it: a hook may leave symlinks (to /etc/passwd, to /), and
// nothing read, hashed, listed or counted through this package follows one
// out of the directory (os.Root).
package snapfiles

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// File is one output file, its path relative to the snapshot directory
// (slash-separated).
type File struct {
	Path string
	Size int64
}

// Listing is what Walk found: the output files, and the symbolic links it
// did not follow (slash-separated paths relative to the walked directory).
type Listing struct {
	Files    []File
	Symlinks []string
}

// Walk lists the output files under root (a snapshot directory), sorted by
// path, skipping runner files and any path for which skip returns true
// (skip receives the slash-separated path relative to root; returning true
// for a directory skips all of it). Symbolic links are never followed nor
// counted, whatever they point to: they are returned in Symlinks. Other
// non-regular files (fifos, sockets, devices) are left out.
func Walk(root string, skip func(rel string, isDir bool) bool) (Listing, error) {
	var l Listing
	r, err := OpenRoot(root)
	if err != nil {
		return l, fmt.Errorf("walk snapshot dir %s: %w", root, err)
	}
	defer r.Close()
	err = fs.WalkDir(r.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && rel != "." {
				return nil // removed while we walked: a background hook's temp file
			}
			return err
		}
		if rel == "." {
			return nil
		}
		if skip != nil && skip(rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l.Symlinks = append(l.Symlinks, rel)
			return nil
		case d.IsDir() || !d.Type().IsRegular() || procs.IsRunnerFile(rel):
			return nil
		}
		switch info, err := d.Info(); {
		case errors.Is(err, fs.ErrNotExist):
			return nil // removed since it was listed
		case err != nil:
			return err
		default:
			l.Files = append(l.Files, File{Path: rel, Size: info.Size()})
			return nil
		}
	})
	if err != nil {
		return Listing{}, fmt.Errorf("walk snapshot dir %s: %w", root, err)
	}
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Path < l.Files[j].Path })
	sort.Strings(l.Symlinks)
	return l, nil
}

// Open opens the file rel (slash-separated) inside dir for reading. A path
// that leaves dir, by .. or through a symbolic link that points outside
// it, is refused; links that stay inside are followed.
func Open(dir, rel string) (*os.File, error) {
	r, err := OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, fmt.Errorf("open %s in %s: %w", rel, dir, err)
	}
	return f, nil
}

// openRoot opens dir as an os.Root, refusing a dir that is itself a
// symbolic link (a hook may replace a directory with one): dir must be the
// very directory that was opened.
func OpenRoot(dir string) (*os.Root, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	opened, err := r.Stat(".")
	if err == nil {
		var here os.FileInfo
		if here, err = os.Lstat(dir); err == nil && (!here.IsDir() || !os.SameFile(opened, here)) {
			err = fmt.Errorf("%s is a symbolic link, not followed", dir)
		}
	}
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// ReadFile reads at most limit bytes of the file rel inside dir, as Open
// finds it.
func ReadFile(dir, rel string, limit int64) ([]byte, error) {
	f, err := Open(dir, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path.Join(dir, rel), err)
	}
	return b, nil
}

// Plugins lists the plugin sub-directories of a snapshot directory, sorted.
func Plugins(snapDir string) ([]string, error) {
	entries, err := os.ReadDir(snapDir)
	if err != nil {
		return nil, fmt.Errorf("list plugins of snapshot dir %s: %w", snapDir, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// HookResult is the last ArchiveResult record a hook printed, as read back
// from the runner's stdout log, with the hook's file stem.
type HookResult struct {
	Hook string `json:"hook"`
	jsonl.ArchiveResult
}

// LastResults reads the runner stdout logs in pluginDir and returns, per hook
// stem, the last ArchiveResult record of the most recent attempt (by the
// log's modification time). Hooks whose latest log has no record yet are
// returned with an empty Status.
func LastResults(pluginDir string) ([]HookResult, error) {
	entries, err := os.ReadDir(pluginDir)
	if err != nil {
		return nil, fmt.Errorf("read plugin dir %s: %w", pluginDir, err)
	}
	type latest struct {
		path string
		mod  int64
	}
	newest := map[string]latest{}
	for _, e := range entries {
		name := e.Name()
		f, ok := procs.ParseRunnerFile(name)
		if !ok || f.Suffix != procs.SuffixStdout || !e.Type().IsRegular() {
			continue // a symlink named like a runner log is not one
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		stem := f.Stem
		if cur, ok := newest[stem]; !ok || info.ModTime().UnixNano() > cur.mod {
			newest[stem] = latest{filepath.Join(pluginDir, name), info.ModTime().UnixNano()}
		}
	}
	results := make([]HookResult, 0, len(newest))
	for stem, l := range newest {
		r, err := lastRecord(pluginDir, filepath.Base(l.path))
		if err != nil {
			return nil, err
		}
		r.Hook = stem
		results = append(results, r)
	}
	sort.Slice(results, func(i, j int) bool { return results[i].Hook < results[j].Hook })
	return results, nil
}

func lastRecord(dir, name string) (HookResult, error) {
	path := filepath.Join(dir, name)
	f, err := Open(dir, name)
	if err != nil {
		return HookResult{}, fmt.Errorf("open hook log %s: %w", path, err)
	}
	defer f.Close()
	var last HookResult
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if rec, err := jsonl.ParseLine(sc.Bytes()); err == nil && rec.Type == jsonl.TypeArchiveResult {
			last.ArchiveResult = *rec.ArchiveResult
		}
	}
	// An over-long line ends the scan early; what was read so far stands.
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return HookResult{}, fmt.Errorf("read hook log %s: %w", path, err)
	}
	return last, nil
}
