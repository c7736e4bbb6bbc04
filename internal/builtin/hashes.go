package builtin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/archiveflow/archiveflow/internal/builtin/hookio"
	"github.com/archiveflow/archiveflow/internal/builtin/snapfiles"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Files of the hashes hook (in SNAP_DIR/hashes/).
const (
	hashesFile    = "hashes.json"
	hashesSumFile = "sha256sums.txt" // `sha256sum -c` format, paths relative to SNAP_DIR
)

// hashedFile is one entry of hashes.json.
type hashedFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// runHashes records the sha256 of every output file of the snapshot, except
// the runner's files, its own files and the index hook's files (index runs
// after it). A background hook still running (wget) is hashed as it is now.
// Symbolic links are not followed: hashes.json lists them apart
// (symlinks_not_followed), so a hook cannot make archiveflow read, hash or
// count a file outside the snapshot.
func runHashes(ctx context.Context, h *Hook) (hookio.Result, error) {
	own := filepath.Base(h.Dir)
	listing, err := snapfiles.Walk(h.SnapDir, func(rel string, isDir bool) bool {
		top, _, _ := strings.Cut(rel, "/")
		return top == own || top == "index" || isTempFile(rel)
	})
	if err != nil {
		return hookio.Result{}, fmt.Errorf("hashes: %w", err)
	}
	hashed := make([]hashedFile, 0, len(listing.Files))
	var sums strings.Builder
	var total int64
	for _, f := range listing.Files {
		if err := ctx.Err(); err != nil {
			return hookio.Result{}, fmt.Errorf("hashes: %w", err)
		}
		sum, size, err := sha256File(h.SnapDir, f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a temporary file that went away
		}
		if err != nil {
			return hookio.Result{}, fmt.Errorf("hashes: %w", err)
		}
		hashed = append(hashed, hashedFile{Path: f.Path, Size: size, SHA256: sum})
		fmt.Fprintf(&sums, "%s  %s\n", sum, f.Path)
		total += size
	}
	links := listing.Symlinks
	if links == nil {
		links = []string{}
	}
	if len(hashed) == 0 {
		return hookio.Result{Status: model.StatusNoResults, OutputStr: "no output files to hash" + linksNote(links),
			OutputJSON: map[string]any{"symlinks_not_followed": links}}, nil
	}
	doc := map[string]any{"algorithm": "sha256", "files": hashed, "total_bytes": total, "symlinks_not_followed": links}
	if err := writeJSON(filepath.Join(h.Dir, hashesFile), doc); err != nil {
		return hookio.Result{}, err
	}
	if err := writeFileAtomic(filepath.Join(h.Dir, hashesSumFile), []byte(sums.String())); err != nil {
		return hookio.Result{}, err
	}
	return hookio.Result{Status: model.StatusSucceeded, OutputStr: fmt.Sprintf("%d files, %d bytes", len(hashed), total) + linksNote(links),
		OutputJSON: map[string]any{"file": hashesFile, "sums_file": hashesSumFile, "files": len(hashed), "total_bytes": total,
			"symlinks_not_followed": len(links)}}, nil
}

// linksNote says how many symbolic links were left alone, for output_str.
func linksNote(links []string) string {
	switch len(links) {
	case 0:
		return ""
	case 1:
		return "; 1 symlink not followed"
	}
	return fmt.Sprintf("; %d symlinks not followed", len(links))
}

// sha256File hashes the file rel inside snapDir; it is opened without
// leaving snapDir, so a file swapped for a link after the walk is refused.
func sha256File(snapDir, rel string) (string, int64, error) {
	f, err := snapfiles.Open(snapDir, rel)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	hash := sha256.New()
	n, err := io.Copy(hash, f)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", rel, err)
	}
	return hex.EncodeToString(hash.Sum(nil)), n, nil
}

// isTempFile reports the built-in hooks' in-progress files: ".partial.NAME"
// (browser captures) and ".NAME.tmpDIGITS" (atomic writes).
func isTempFile(rel string) bool {
	base := path.Base(rel)
	return strings.HasPrefix(base, ".partial.") || (strings.HasPrefix(base, ".") && strings.Contains(base, ".tmp"))
}
