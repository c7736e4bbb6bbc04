package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/builtin/wgetlog"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
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

// deniedError is a request the fetch policy refused (a redirect hop or
// a requisite included): retrying cannot help.
type deniedError struct {
	url, rule string
}

func (e *deniedError) Error() string {
	return fmt.Sprintf("fetch of %s denied by fetch.deny rule %q", e.url, e.rule)
}

// redirectLoopError is a URL whose redirects did not end within
// maxRedirects: another attempt would follow the same chain, so it is a
// final failure, not a transient one.
type redirectLoopError struct{ url string }

func (e *redirectLoopError) Error() string {
	return fmt.Sprintf("%s: more than %d redirects (a redirect loop)", e.url, maxRedirects)
}

// policies are the parsed fetch.deny lists of this process, by FETCH_DENY.
var policies sync.Map // FETCH_DENY → *netpolicy.Policy

// policy is the hook's fetch policy: the worker's own when the hook runs
// inside the worker (egress.WithPolicy), else FETCH_DENY's, parsed once per
// list.
func (h *Hook) policy() (*netpolicy.Policy, error) {
	if h.Policy != nil {
		return h.Policy, nil
	}
	rules, err := h.Inv.StringList(egress.EnvDeny)
	if err != nil {
		return nil, err
	}
	key := strings.Join(rules, "\n")
	if p, ok := policies.Load(key); ok {
		return p.(*netpolicy.Policy), nil
	}
	p, err := netpolicy.Parse(rules)
	if err != nil {
		return nil, fmt.Errorf("env %s: %w", egress.EnvDeny, err)
	}
	actual, _ := policies.LoadOrStore(key, p)
	return actual.(*netpolicy.Policy), nil
}

// fetchTransports are shared by every Go fetch of this process: a crawl
// running hooks in-process keeps its connections alive across pages.
var fetchTransports sync.Map // transportKey → *http.Transport

// transportKey names a shared transport: its policy or proxy, and whether
// it records from the wire.
type transportKey struct {
	via       any // *netpolicy.Policy or the proxy's URL
	recording bool
}

// fetchTransport is the transport every built-in Go fetcher uses; every
// connection of it (each redirect hop and requisite included) is decided
// on its resolved address by the one dialer, egress.Dialer:
//   - in a hook process with the attempt's fetch proxy (FETCH_PROXY), each
//     connection is a CONNECT tunnel through it (egress.TunnelTransport):
//     the worker's policy and resolver decide, and the bytes on the wire
//     are the origin's;
//   - otherwise (inside the worker, or no proxy) it dials directly with
//     the hook's policy (egress.Transport).
//
// A refusal is a *egress.DeniedError the fetcher reports itself (denied).
func (h *Hook) fetchTransport() (*http.Transport, error) { return h.transport(false) }

// recordingTransport is fetchTransport's recording copy
// (egress.RecordingTransport: connections kept alive per host, but one
// request per tunnel through the attempt's proxy; each exchange's bytes
// kept apart, HTTP/1.1 above TLS), for pagefetch, which archives what was
// on the wire.
func (h *Hook) recordingTransport() (*http.Transport, error) { return h.transport(true) }

func (h *Hook) transport(recording bool) (*http.Transport, error) {
	var key transportKey
	var build func() *http.Transport
	tunnel := false
	if p := h.Inv.FetchProxy; p != nil && h.Policy == nil {
		key.via = p.String()
		tunnel = true
		build = func() *http.Transport { return egress.TunnelTransport(p) }
	} else {
		policy, err := h.policy()
		if err != nil {
			return nil, err
		}
		key.via = policy
		build = func() *http.Transport { return egress.Transport(policy) }
	}
	key.recording = recording
	if t, ok := fetchTransports.Load(key); ok {
		return t.(*http.Transport), nil
	}
	t := build()
	if recording {
		t = egress.RecordingTransport(t)
		// The attempt's proxy takes a crawl page's host turn per origin
		// connection (egress.Options.Turn): one request per tunnel keeps
		// pagefetch in a hook process at a turn per fetch, the crawl's
		// delay between every two, as inside the worker.
		t.DisableKeepAlives = tunnel
	}
	actual, _ := fetchTransports.LoadOrStore(key, t)
	return actual.(*http.Transport), nil
}

// notice prints a line for the job's log on the hook's stderr
// (jsonl.NoticePrefix): logged even for a crawl page, whose other stderr
// lines are not.
func (h *Hook) notice(format string, args ...any) {
	if h.Stderr != nil {
		fmt.Fprintln(h.Stderr, jsonl.NoticePrefix+fmt.Sprintf(format, args...))
	}
}

// cut prints a notice that something was lost to a limit
// (jsonl.CutPrefix): a crawl counts it and keeps it in the page's note.
func (h *Hook) cut(format string, args ...any) {
	if h.Stderr != nil {
		fmt.Fprintln(h.Stderr, jsonl.CutPrefix+fmt.Sprintf(format, args...))
	}
}

// denied turns a fetch error that is a policy refusal into a *deniedError
// for target (the hop the refusal was for, when err names it), after
// printing the refusal's line (egress.Denial.LogLine) on the hook's stderr:
// the runner puts it in the job's log. Any other error: nil.
func (h *Hook) denied(target string, err error) *deniedError {
	d, ok := egress.DeniedBy(err)
	if !ok {
		return nil
	}
	var ue *neturl.Error
	if errors.As(err, &ue) && ue.URL != "" {
		target = ue.URL
	}
	h.notice("%s", egress.Denial{Target: target, Decision: d.Decision}.Message())
	return &deniedError{url: target, rule: d.Decision.Rule}
}

// getError is a GET of u that got no answer. net/http's *url.Error says
// `Get "URL": ` itself: only its cause follows our words, and the URL it
// failed at when a redirect led there.
func getError(u string, err error) error {
	var ue *neturl.Error
	if !errors.As(err, &ue) {
		return fmt.Errorf("get %s: %w", u, err)
	}
	if ue.URL != "" && ue.URL != u {
		return fmt.Errorf("get %s: redirected to %s: %w", u, ue.URL, ue.Err)
	}
	return fmt.Errorf("get %s: %w", u, ue.Err)
}

// get fetches url with the hook's user agent and timeout, follows redirects,
// reads at most limit body bytes, and reports one Response record per HTTP
// exchange (each redirect hop and the final answer). A transport error is
// returned as an error (after a status-0 Response record); a request the
// fetch policy denied (a redirect included) as a *deniedError, without a
// Response record: its line on stderr reports it in the job log.
func (h *Hook) get(ctx context.Context, url string, limit int64) (*fetched, error) {
	f := &fetched{URL: url}
	transport, err := h.fetchTransport()
	if err != nil {
		return nil, err
	}
	client := &http.Client{
		Transport: transport,
		Timeout:   h.Inv.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return &redirectLoopError{url: url}
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
	if denied := h.denied(url, err); denied != nil {
		return nil, denied
	}
	if err != nil {
		h.responseCode(url, 0, 0, wgetlog.CodeNetworkError)
		return nil, getError(url, err)
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
	h.emitResponse(model.Response{URL: url, Status: status, Bytes: bytes, WgetCode: code})
}

// emitResponse prints one Response record.
func (h *Hook) emitResponse(r model.Response) {
	if err := h.Out.Response(r); err != nil {
		h.Log.Warn("cannot print Response record", zap.Error(err))
	}
}
