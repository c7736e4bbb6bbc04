package plugins

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// files is the built-in set as it is in this directory: every plugin's
// config.json and hook files.
//
//go:embed */config.json */on_Snapshot__*
var files embed.FS

// DirPrefix starts the name of a materialised set's directory:
// ROOT/builtin-HASH/.
const DirPrefix = "builtin-"

// hookPrefix starts the name of every hook file, which must be executable.
const hookPrefix = "on_Snapshot__"

// file is one embedded file with the mode it gets on disk.
type file struct {
	path string // slash-separated, relative to the set: wget/config.json
	mode fs.FileMode
	data []byte
}

var (
	setOnce sync.Once
	set     []file
	setHash string
)

// load reads the embedded set once, sorted by path, and hashes it.
func load() ([]file, string) {
	setOnce.Do(func() {
		err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := files.ReadFile(p)
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o644)
			if strings.HasPrefix(path.Base(p), hookPrefix) {
				mode = 0o755
			}
			set = append(set, file{path: p, mode: mode, data: data})
			return nil
		})
		if err != nil {
			panic(fmt.Sprintf("read the embedded plugin set: %v", err)) // the binary itself is broken
		}
		slices.SortFunc(set, func(a, b file) int { return strings.Compare(a.path, b.path) })
		h := sha256.New()
		for _, f := range set {
			fmt.Fprintf(h, "%s\x00%o\x00%d\x00", f.path, f.mode, len(f.data))
			h.Write(f.data)
		}
		setHash = hex.EncodeToString(h.Sum(nil))[:16]
	})
	return set, setHash
}

// Hash identifies the content of the embedded set (paths, modes, bytes):
// the materialised directory is named DirPrefix + Hash().
func Hash() string {
	_, h := load()
	return h
}

// Names lists the embedded plugins, sorted.
func Names() []string {
	set, _ := load()
	var names []string
	for _, f := range set {
		name, _, _ := strings.Cut(f.path, "/")
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name)
		}
	}
	return names
}

// Materialise makes sure ROOT/builtin-HASH/ holds exactly the embedded set
// (hook files 0755, config.json 0644) and returns its absolute path, a
// plugin root for discovery. ROOT is created if missing.
//
// It is idempotent and safe for processes starting at once: the set is
// written into a fresh temporary directory and renamed into place in one
// step, so a reader sees either nothing or the complete set; the loser of
// a race finds the winner's copy. A damaged copy (a file changed, missing
// or added) is replaced. Copies of other versions are left alone: a worker
// of an older build may still run hooks from them.
func Materialise(root string) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("built-in plugins: directory %s: %w", root, err)
	}
	set, hash := load()
	final := filepath.Join(abs, DirPrefix+hash)
	var lastErr error
	for range 3 {
		if lastErr = verify(final, set); lastErr == nil {
			return final, nil
		}
		if _, err := os.Lstat(final); err == nil {
			// Damaged: move it aside in one step, then delete it.
			stale, err := os.MkdirTemp(abs, ".stale-"+DirPrefix)
			if err != nil {
				return "", fmt.Errorf("built-in plugins: replace damaged %s: %w", final, err)
			}
			if err := os.Rename(final, filepath.Join(stale, "set")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				_ = os.RemoveAll(stale)
				return "", fmt.Errorf("built-in plugins: replace damaged %s (%v): %w", final, lastErr, err)
			}
			_ = os.RemoveAll(stale)
		}
		tmp, err := write(abs, set)
		if err != nil {
			return "", err
		}
		if err := os.Rename(tmp, final); err != nil {
			// Another process renamed its copy first: check it next round.
			_ = os.RemoveAll(tmp)
			lastErr = err
		}
	}
	return "", fmt.Errorf("built-in plugins: could not materialise them in %s: %w", final, lastErr)
}

// write puts the set into a new temporary directory under root.
func write(root string, set []file) (string, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("built-in plugins: create %s: %w", root, err)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-"+DirPrefix)
	if err != nil {
		return "", fmt.Errorf("built-in plugins: %w", err)
	}
	fail := func(err error) (string, error) {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("built-in plugins: write into %s: %w", tmp, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fail(err)
	}
	for _, f := range set {
		p := filepath.Join(tmp, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail(err)
		}
		if err := writeFile(p, f); err != nil {
			return fail(err)
		}
	}
	return tmp, nil
}

// writeFile writes one file durably with its exact mode (whatever the umask).
func writeFile(p string, f file) error {
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
	if err != nil {
		return err
	}
	_, err = out.Write(f.data)
	if err == nil {
		err = out.Chmod(f.mode)
	}
	if err == nil {
		err = out.Sync()
	}
	return errors.Join(err, out.Close())
}

// verify checks that dir holds exactly the set: the same plugin
// directories, the same files in each, with the same modes and bytes.
func verify(dir string, set []file) error {
	want := map[string]file{}
	for _, f := range set {
		want[f.path] = f
	}
	seen := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.Contains(rel, "/") {
				return fmt.Errorf("unexpected directory %s", rel)
			}
			return nil
		}
		f, ok := want[rel]
		if !ok {
			return fmt.Errorf("unexpected file %s", rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() || info.Mode().Perm() != f.mode {
			return fmt.Errorf("%s: mode %s, want %s", rel, info.Mode(), f.mode)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Equal(data, f.data) {
			return fmt.Errorf("%s: content differs from the built-in set", rel)
		}
		seen++
		return nil
	})
	if err != nil {
		return err
	}
	if seen != len(set) {
		return fmt.Errorf("%d of %d files present", seen, len(set))
	}
	return nil
}
