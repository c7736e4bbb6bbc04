package procs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/archiveflow/archiveflow/internal/model"
)

// ListOutputs lists the regular files under dir, excluding runner files of
// any attempt (IsRunnerFile), with paths relative to dir using '/', sorted,
// and the sum of their sizes. Symlinks are not followed nor listed. Files
// that vanish during the walk are skipped.
func ListOutputs(dir string) ([]model.OutputFile, int64, error) {
	var out []model.OutputFile
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() || IsRunnerFile(path) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		out = append(out, model.OutputFile{Path: filepath.ToSlash(rel), Size: info.Size()})
		total += info.Size()
		return nil
	})
	if err != nil {
		return out, total, fmt.Errorf("list outputs of %s: %w", dir, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, total, nil
}
