package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/builtin/wgetlog"
	"github.com/archiveflow/archiveflow/internal/model"
)

// maxRedirects bounds a redirect chain, as browsers and wget do.
const maxRedirects = 20

// hop is one redirect answered while following a URL.
type hop struct {
	URL      string `json:"url"`
	Status   int    `json:"status"`
	Location string `json:"location"`
}

// fetched is the outcome of one GET with its redirects followed.
type fetched struct {
	URL       string // requested
	FinalURL  string
	Status    int
	Header    http.Header
	Body      []byte
	Truncated bool // Body was cut at the size limit
	Redirects []hop
}

// get fetches url with the hook's user agent and timeout, follows redirects,
// reads at most limit body bytes, and reports one Response record per HTTP
// exchange (each redirect hop and the final answer). A transport error is
// returned as an error (after a status-0 Response record).
func (h *Hook) get(ctx context.Context, url string, limit int64) (*fetched, error) {
	f := &fetched{URL: url}
	client := &http.Client{
		Timeout: h.Inv.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if r := req.Response; r != nil {
				f.Redirects = append(f.Redirects, hop{URL: r.Request.URL.String(), Status: r.StatusCode, Location: r.Header.Get("Location")})
				h.response(r.Request.URL.String(), r.StatusCode, max(r.ContentLength, 0))
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("build request for %q: %w", url, err)
	}
	if ua := h.Inv.UserAgent; ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	resp, err := client.Do(req)
	if err != nil {
		h.responseCode(url, 0, 0, wgetlog.CodeNetworkError)
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil && !errors.Is(err, io.EOF) {
		h.responseCode(resp.Request.URL.String(), resp.StatusCode, int64(len(body)), wgetlog.CodeNetworkError)
		return nil, fmt.Errorf("read body of %s: %w", resp.Request.URL, err)
	}
	if int64(len(body)) > limit {
		body, f.Truncated = body[:limit], true
	}
	f.FinalURL = resp.Request.URL.String()
	f.Status = resp.StatusCode
	f.Header = resp.Header
	f.Body = body
	h.response(f.FinalURL, f.Status, int64(len(body)))
	return f, nil
}

func (h *Hook) response(url string, status int, bytes int64) {
	h.responseCode(url, status, bytes, wgetlog.CodeFinished)
}

func (h *Hook) responseCode(url string, status int, bytes int64, code string) {
	if err := h.Out.Response(model.Response{URL: url, Status: status, Bytes: bytes, WgetCode: code}); err != nil {
		h.Log.Warn("cannot print Response record", zap.Error(err))
	}
}
