// Package snapfiles owns the layout of a snapshot directory as the built-in
// hooks see it: one sub-directory per plugin, holding the plugin's output
// files and the runner's own files (HOOK_STEM.<32 hex>.{stdout.log,
// stderr.log,pid,sh}, DESIGN.md §3), which are never output.
package snapfiles

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/archiveflow/archiveflow/internal/model"
)

var runnerFile = regexp.MustCompile(`\.[0-9a-f]{32}\.(stdout\.log|stderr\.log|pid|sh)$`)

// IsRunnerFile reports whether a file name is one of the runner's own files.
func IsRunnerFile(name string) bool {
	return runnerFile.MatchString(filepath.Base(name))
}

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
		if d.IsDir() || !d.Type().IsRegular() || IsRunnerFile(rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		files = append(files, File{Path: rel, Size: info.Size()})
		return nil
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
// from the runner's stdout log.
type HookResult struct {
	Hook       string          `json:"hook"`
	Status     model.Status    `json:"status"`
	OutputStr  string          `json:"output_str,omitempty"`
	OutputJSON json.RawMessage `json:"output_json,omitempty"`
	Error      string          `json:"error,omitempty"`
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
		if !strings.HasSuffix(name, ".stdout.log") || !IsRunnerFile(name) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		stem := runnerFile.ReplaceAllString(name, "")
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
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var rec struct {
			Type string `json:"type"`
			HookResult
		}
		if json.Unmarshal(line, &rec) != nil || rec.Type != "ArchiveResult" {
			continue
		}
		last = rec.HookResult
	}
	// An over-long line ends the scan early; what was read so far stands.
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return HookResult{}, fmt.Errorf("read hook log %s: %w", path, err)
	}
	return last, nil
}
