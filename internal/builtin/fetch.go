package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/builtin/wgetlog"
	"github.com/archiveflow/archiveflow/internal/egress"
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

// deniedError is a request the runner's fetch proxy refused: the fetch
// policy forbids its address. Retrying cannot help.
type deniedError struct {
	url, rule string
}

func (e *deniedError) Error() string {
	return fmt.Sprintf("fetch of %s denied by fetch.deny rule %q", e.url, e.rule)
}

// transport sends every request through the runner's fetch proxy when
// there is one (loopback included, which Go's environment proxy would
// skip), and turns the proxy's refusal of a tunnel into a deniedError.
func (h *Hook) transport() http.RoundTripper {
	proxy := h.Inv.FetchProxy
	if proxy == nil {
		return http.DefaultTransport
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = http.ProxyURL(proxy)
	t.OnProxyConnectResponse = func(_ context.Context, _ *neturl.URL, req *http.Request, resp *http.Response) error {
		if rule := resp.Header.Get(egress.DeniedHeader); rule != "" {
			return &deniedError{url: "https://" + req.Host, rule: rule}
		}
		return nil
	}
	return t
}

// get fetches url with the hook's user agent and timeout, follows redirects,
// reads at most limit body bytes, and reports one Response record per HTTP
// exchange (each redirect hop and the final answer). A transport error is
// returned as an error (after a status-0 Response record); a request the
// fetch policy denied (a redirect included) as a *deniedError, without a
// Response record: the runner reports it in the job log.
func (h *Hook) get(ctx context.Context, url string, limit int64) (*fetched, error) {
	f := &fetched{URL: url}
	client := &http.Client{
		Transport: h.transport(),
		Timeout:   h.Inv.Timeout,
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
	var denied *deniedError
	if errors.As(err, &denied) {
		return nil, denied
	}
	if err != nil {
		h.responseCode(url, 0, 0, wgetlog.CodeNetworkError)
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if rule := resp.Header.Get(egress.DeniedHeader); rule != "" && h.Inv.FetchProxy != nil {
		return nil, &deniedError{url: resp.Request.URL.String(), rule: rule}
	}
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
