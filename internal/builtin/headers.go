package builtin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/archiveflow/archiveflow/internal/builtin/hookio"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Files of the headers hook (in SNAP_DIR/headers/).
const (
	headersFile     = "headers.json"
	headersBodyFile = "response.body"
)

// headersMeta is headers.json.
type headersMeta struct {
	URL           string      `json:"url"`
	Status        int         `json:"status"`
	StatusText    string      `json:"status_text"`
	FinalURL      string      `json:"final_url"`
	ContentType   string      `json:"content_type"`
	Headers       http.Header `json:"headers"`
	Redirects     []hop       `json:"redirects"`
	BodyFile      string      `json:"body_file"`
	BodyBytes     int64       `json:"body_bytes"`
	BodyTruncated bool        `json:"body_truncated"`
	// Denied is the fetch policy's refusal of the URL or a redirect hop:
	// later hooks read no page and fetch none.
	Denied string `json:"denied,omitempty"`
}

func readHeadersJSON(snapDir string) (*headersMeta, error) {
	var m headersMeta
	if err := readJSON(snapDir, "headers/"+headersFile, &m); err != nil {
		return nil, err
	}
	if m.BodyFile == "" {
		m.BodyFile = headersBodyFile
	}
	return &m, nil
}

// runHeaders GETs the URL, follows redirects, and saves the final response's
// status, headers and redirect chain (headers.json) and body (response.body,
// for later hooks). Any HTTP answer is a success: the headers are what was
// archived; a transport error is transient.
func runHeaders(ctx context.Context, h *Hook) (hookio.Result, error) {
	f, err := h.get(ctx, h.Inv.URL, maxPageBytes)
	var denied *deniedError
	if errors.As(err, &denied) {
		meta := headersMeta{URL: h.Inv.URL, Denied: denied.Error(), Redirects: []hop{}}
		if werr := writeJSON(filepath.Join(h.Dir, headersFile), meta); werr != nil {
			return hookio.Result{}, werr
		}
	}
	if err != nil {
		return hookio.Result{}, fmt.Errorf("headers: %w", err)
	}
	if err := os.WriteFile(filepath.Join(h.Dir, headersBodyFile), f.Body, 0o644); err != nil {
		return hookio.Result{}, fmt.Errorf("save response body: %w", err)
	}
	meta := headersMeta{
		URL:           h.Inv.URL,
		Status:        f.Status,
		StatusText:    http.StatusText(f.Status),
		FinalURL:      f.FinalURL,
		ContentType:   f.Header.Get("Content-Type"),
		Headers:       f.Header,
		Redirects:     f.Redirects,
		BodyFile:      headersBodyFile,
		BodyBytes:     int64(len(f.Body)),
		BodyTruncated: f.Truncated,
	}
	if meta.Redirects == nil {
		meta.Redirects = []hop{}
	}
	if err := writeJSON(filepath.Join(h.Dir, headersFile), meta); err != nil {
		return hookio.Result{}, err
	}
	return hookio.Result{
		Status:    model.StatusSucceeded,
		OutputStr: fmt.Sprintf("HTTP %d %s", f.Status, f.FinalURL),
		OutputJSON: map[string]any{
			"status": f.Status, "final_url": f.FinalURL, "redirects": len(f.Redirects),
			"content_type": meta.ContentType, "file": headersFile, "body_file": headersBodyFile,
		},
	}, nil
}
