package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/builtin/snapfiles"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// Page sources, in the vocabulary of output_json's "source" field.
const (
	sourceDOM     = "dom"     // ../dom/output.html (Chromium's rendered DOM)
	sourceWget    = "wget"    // the page file named by ../wget/wget.json
	sourceHeaders = "headers" // ../headers/response.body
	// sourcePageFetch is the page file named by ../pagefetch/pagefetch.json.
	sourcePageFetch = "pagefetch"
	sourceFetch     = "fetch" // the hook fetched the URL itself
)

// maxPageBytes caps how much of a page the parsing hooks read or fetch.
const maxPageBytes = 32 << 20

// page is the HTML a parsing hook works on.
type page struct {
	Source      string
	Path        string // relative to SNAP_DIR; empty for sourceFetch
	URL         string // the URL the page was served from (after redirects)
	ContentType string
	Body        []byte
}

// errNoPage is a source that knows the URL has no page to read (pagefetch
// got an error answer): later sources are not tried, so a parsing hook
// does not fetch the URL again, and the hook reports noresults.
var errNoPage = errors.New("there is no page to read")

// loadPage returns the first non-empty page among sources, in order.
// sourceFetch, when listed, fetches the URL (reporting its Response records).
func (h *Hook) loadPage(ctx context.Context, sources ...string) (*page, error) {
	var tried []string
	for _, src := range sources {
		p, err := h.pageFrom(ctx, src)
		var denied *deniedError
		if errors.Is(err, errNoPage) || errors.As(err, &denied) {
			return nil, err // a refusal is final: no other source fetches it
		}
		if err != nil {
			h.Log.Debug("page source unavailable", zap.String("source", src), zap.Error(err))
			tried = append(tried, fmt.Sprintf("%s: %v", src, err))
			continue
		}
		return p, nil
	}
	return nil, fmt.Errorf("no page to read: %s", strings.Join(tried, "; "))
}

func (h *Hook) pageFrom(ctx context.Context, src string) (*page, error) {
	switch src {
	case sourceDOM:
		return h.readPage(src, "dom/output.html", h.finalURL(), "text/html; charset=utf-8")
	case sourcePageFetch:
		return h.pageFetchSource(ctx)
	case sourceHeaders:
		meta, err := readHeadersJSON(h.SnapDir)
		if err != nil {
			return nil, err
		}
		if meta.Denied != "" {
			return nil, fmt.Errorf("headers: %s: %w", meta.Denied, errNoPage)
		}
		return h.readPage(src, "headers/"+meta.BodyFile, meta.FinalURL, meta.ContentType)
	case sourceWget:
		sum, err := readWgetJSON(h.SnapDir)
		if err != nil {
			return nil, err
		}
		if sum.MainFile == "" {
			return nil, errors.New("wget has not saved the page yet")
		}
		return h.readPage(src, "wget/"+sum.MainFile, sum.MainURL, sum.MainContentType)
	case sourceFetch:
		f, err := h.get(ctx, h.Inv.URL, maxPageBytes)
		if err != nil {
			return nil, err
		}
		if f.Status < 200 || f.Status > 299 {
			return nil, fmt.Errorf("GET %s answered HTTP %d", f.FinalURL, f.Status)
		}
		return &page{Source: src, URL: f.FinalURL, ContentType: f.Header.Get("Content-Type"), Body: f.Body}, nil
	}
	return nil, fmt.Errorf("page source %q: unknown", src)
}

func (h *Hook) readPage(src, rel, pageURL, contentType string) (*page, error) {
	body, err := snapfiles.ReadFile(h.SnapDir, rel, maxPageBytes)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, fmt.Errorf("%s is empty", rel)
	}
	if pageURL == "" {
		pageURL = h.Inv.URL
	}
	return &page{Source: src, Path: rel, URL: pageURL, ContentType: contentType, Body: body}, nil
}

// finalURL is the URL after redirects as the headers hook saw it, else --url.
func (h *Hook) finalURL() string {
	if meta, err := readHeadersJSON(h.SnapDir); err == nil && meta.FinalURL != "" {
		return meta.FinalURL
	}
	return h.Inv.URL
}

func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// maxJSONBytes caps a summary file another hook wrote (headers.json,
// wget.json).
const maxJSONBytes = 4 << 20

// readJSON decodes the JSON file rel inside the snapshot directory snapDir
// into v, never following a link out of it (snapfiles.ReadFile).
func readJSON(snapDir, rel string, v any) error {
	b, err := snapfiles.ReadFile(snapDir, rel, maxJSONBytes)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", rel, err)
	}
	return nil
}

// writeJSON writes v, indented, to path atomically (other hooks may read it
// while this one runs).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// writeFileAtomic writes data to a temporary file next to path and renames it.
// path's directory is created when missing (writeOutput).
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if errors.Is(err, fs.ErrNotExist) {
		if err = procs.EnsureDir(filepath.Dir(path)); err == nil {
			tmp, err = os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name()) // only then: the parsing hooks write a file a page
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeOutput writes an output file of a hook, creating its directory when
// missing: a built-in run inside the worker for a crawl page has no
// directory until it writes an output (procs.Spec.NoRunnerFiles), and one
// that writes none leaves none.
func writeOutput(path string, data []byte) error {
	err := os.WriteFile(path, data, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err = procs.EnsureDir(filepath.Dir(path)); err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
	}
	return err
}
