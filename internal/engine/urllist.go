package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/model"
)

// URLListFile is the name of a URL-list job's downloaded list in the
// crawl's directory (ArchiveBot keeps it next to the job's WARC as
// …-urls.txt).
const URLListFile = "url-list.txt"

// FetchURLList downloads a URL-list job's list (activities.PageRunner):
// through the fetch policy (config fetch.deny, checked after DNS
// resolution), at most in.MaxBytes, only text (a text/* content type or
// none), with in's user agent. It keeps the list as URLListFile in the
// crawl's directory on this worker. A refusal that another attempt would
// not change (denied, 4xx, not text, too large) wraps
// activities.ErrURLListRefused.
func (e *Engine) FetchURLList(ctx context.Context, in activities.URLListFetch) (activities.URLListData, error) {
	var out activities.URLListData
	transport := egress.Transport(e.cfg.Fetch)
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: in.Timeout}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL, nil)
	if err != nil {
		return out, fmt.Errorf("url list %s: %w: %w", in.URL, activities.ErrURLListRefused, err)
	}
	if in.UserAgent != "" {
		req.Header.Set("User-Agent", in.UserAgent)
	}
	resp, err := client.Do(req)
	if de, ok := egress.DeniedBy(err); ok {
		target := in.URL
		if ue := (*url.Error)(nil); errors.As(err, &ue) && ue.URL != "" {
			target = ue.URL // a redirect hop
		}
		return out, fmt.Errorf("url list %s: %w: the fetch policy denies it: %s", in.URL, activities.ErrURLListRefused,
			egress.Denial{Target: target, Decision: de.Decision}.Message())
	}
	if err != nil {
		return out, fmt.Errorf("download url list %s: %w", in.URL, err)
	}
	defer resp.Body.Close()
	switch {
	case model.TransientStatus(resp.StatusCode):
		return out, fmt.Errorf("download url list %s: HTTP status %s", in.URL, resp.Status)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return out, fmt.Errorf("url list %s: %w: HTTP status %s: must be 2xx", in.URL, activities.ErrURLListRefused, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !strings.HasPrefix(mt, "text/") {
			return out, fmt.Errorf("url list %s: %w: content type %q: must be text (text/*)", in.URL, activities.ErrURLListRefused, ct)
		}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, in.MaxBytes+1))
	if err != nil {
		return out, fmt.Errorf("download url list %s: %w", in.URL, err)
	}
	if int64(len(data)) > in.MaxBytes {
		return out, fmt.Errorf("url list %s: %w: more than %d bytes (config crawl.url_list.max_bytes)", in.URL, activities.ErrURLListRefused, in.MaxBytes)
	}
	dir := e.crawlDir(in.Ident)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return out, fmt.Errorf("keep url list of %s: %w", in.Ident, err)
	}
	path := filepath.Join(dir, URLListFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return out, fmt.Errorf("keep url list of %s: %w", in.Ident, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return out, fmt.Errorf("keep url list of %s: %w", in.Ident, err)
	}
	return activities.URLListData{Data: data, Path: path}, nil
}
