// Package snapfiles owns the layout of a snapshot directory as the built-in
// hooks see it: one sub-directory per plugin, holding the plugin's output
// files and the runner's own files, which are never output (their name
// pattern is internal/procs' ParseRunnerFile; the records in their stdout
// logs are internal/jsonl's).
package snapfiles

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// Walk lists the output files under root (a snapshot directory), sorted by
// path, skipping runner files, symlinks, and any path for which skip returns
// true (skip receives the slash-separated path relative to root; returning
// true for a directory skips all of it).
func Walk(root string, skip func(rel string, isDir bool) bool) ([]File, error) {
	var files []File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != root {
				return nil // removed while we walked: a background hook's temp file
			}
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() || procs.IsRunnerFile(rel) {
			return nil
		}
		switch info, err := d.Info(); {
		case errors.Is(err, fs.ErrNotExist):
			return nil // removed since it was listed
		case err != nil:
			return err
		default:
			files = append(files, File{Path: rel, Size: info.Size()})
			return nil
		}
	})
	if err != nil {
		return nil, fmt.Errorf("walk snapshot dir %s: %w", root, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
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
		if !ok || f.Suffix != procs.SuffixStdout {
			continue
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
		r, err := lastRecord(l.path)
		if err != nil {
			return nil, err
		}
		r.Hook = stem
		results = append(results, r)
	}
	sort.Slice(results, func(i, j int) bool { return results[i].Hook < results[j].Hook })
	return results, nil
}

func lastRecord(path string) (HookResult, error) {
	f, err := os.Open(path)
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
