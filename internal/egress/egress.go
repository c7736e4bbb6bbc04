// Package egress owns the fetch proxy: a small HTTP proxy on loopback that
// hooks' fetchers are pointed at (the built-in ones explicitly, every other
// one through HTTP_PROXY/HTTPS_PROXY), which connects only where
// internal/netpolicy allows. Every connection is decided on the address it
// will really use, after DNS resolution, so a redirect, a page requisite or
// a host name that resolves to a denied address is refused the same way as
// a denied URL. A refusal is never an HTTP response a fetcher could take
// for the site's: a forwarded request is answered by closing the
// connection, a CONNECT by a 403 with the DeniedHeader (a tunnel that was
// never opened); each is reported through Options.OnDeny. Plain http://
// requests are forwarded; https:// and anything else tunnels with CONNECT.
// Neither rewrites HTTP: a tunnel is a splice, and a forwarded request is
// the client's bytes in origin-form whose answer is relayed as the origin
// sent it (forward.go), so a fetcher's WARC holds the origin's bytes. The
// decision is made for every origin connection, and each forwarded request
// has an origin connection of its own.
//
// The package also owns the one dialer every Go fetcher of the project
// connects with (Dialer, Transport): a fetcher inside the worker process
// dials with it directly, so the same decision is made whether or not a
// proxy stands in between.
package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// DeniedHeader is set on the proxy's 403 answer to a denied CONNECT; its
// value is the rule that matched. A fetcher that sees it knows the tunnel
// was refused by the policy, not by the site.
const DeniedHeader = "X-Archiveflow-Fetch-Denied"

// The hook environment's fetch policy keys (set by internal/engine, read by
// the built-in hooks and by any plugin that wants to honour the policy).
const (
	// EnvDeny is the fetch.deny list as a JSON array of rules
	// (internal/netpolicy grammar), for plugins that check URLs themselves.
	EnvDeny = "FETCH_DENY"
	// EnvProxy is the attempt's proxy (http://127.0.0.1:PORT); the
	// built-in fetchers send every request to it, loopback included.
	EnvProxy = "FETCH_PROXY"
)

// ProxyVars are the standard proxy variables set to the proxy too, so
// third-party fetchers (curl, wget, Python requests, Chromium on Linux) go
// through the policy without knowing about it.
var ProxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}

// dialTimeout bounds one connection attempt to a resolved address.
const dialTimeout = 30 * time.Second

// Denial is one refused request.
type Denial struct {
	// Target is the URL of a forwarded request, or host:port of a tunnel.
	Target   string
	Decision netpolicy.Decision
}

// Message is the job log line for the denial.
func (d Denial) Message() string {
	return fmt.Sprintf("fetch of %s %s", d.Target, d.Decision.Reason())
}

// LogLine is the line a fetcher prints on its stderr for a denial, a
// notice for the job's log (jsonl.NoticePrefix): the same words whether
// the proxy refused it or a fetcher's own dialer did, so the job log shows
// one kind of line per refusal.
func (d Denial) LogLine() string { return jsonl.NoticePrefix + d.Message() }

// Options configure a Proxy.
type Options struct {
	Policy *netpolicy.Policy
	// OnDeny is called once per refused target, possibly from several
	// goroutines at once, never after Close returns.
	OnDeny func(Denial)
	// Turn, when set, is asked before each origin connection (a CONNECT's
	// target, scheme://host:port/; a forwarded request's URL) and holds
	// it until end is called when the exchange ends: the crawl's per-host
	// budget (internal/hostbudget) for a hook process's fetches. An error
	// refuses the exchange as a denial does, never as a site's answer.
	Turn func(ctx context.Context, target string) (end func(), err error)
	Log  *zap.Logger
}

// headerTimeout bounds the wait for a client's request head.
const headerTimeout = 30 * time.Second

// Proxy is one running fetch proxy.
type Proxy struct {
	opts Options
	log  *zap.Logger
	ln   net.Listener
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	url  string
	// ctx ends when Close starts: a dial in progress gives up.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]struct{} // every open connection, the client's and the origin's
	refused map[string]string     // target → rule of every refusal so far (Refusals)
	failed  map[string]string     // target → why it could not be reached (Refusals)
	reached map[string]struct{}   // forwarded targets the site answered, a retry's included
	wg      sync.WaitGroup        // accept loop, connections and tunnel copies
}

// Start listens on a free loopback port and serves until Close.
func Start(opts Options) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fetch proxy: listen on loopback: %w", err)
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{opts: opts, log: log, ln: ln, url: "http://" + ln.Addr().String(), conns: map[net.Conn]struct{}{},
		refused: map[string]string{}, failed: map[string]string{}, reached: map[string]struct{}{},
		dial: Dialer(opts.Policy), ctx: ctx, cancel: cancel}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// serve accepts connections until Close.
func (p *Proxy) serve() {
	defer p.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, say: try again a little later.
			p.log.Debug("fetch proxy: accept", zap.Error(err))
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.serveConn(c)
		}()
	}
}

// serveConn answers the requests a client connection carries: forwarded
// http:// requests, each decided and sent on an origin connection of its
// own, as long as the answers leave the connection open; or one CONNECT;
// or the proxy's own resource.
func (p *Proxy) serveConn(c net.Conn) {
	br := bufio.NewReaderSize(c, 16<<10)
	for first := true; ; first = false {
		if !first {
			// An idle kept-alive connection waits for its next request
			// (until the proxy closes).
			if _, err := br.Peek(1); err != nil {
				return
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(headerTimeout))
		head, err := readHead(br)
		if err != nil {
			if errors.Is(err, errHeadTooLarge) {
				p.answer(c, http.StatusRequestHeaderFieldsTooLarge, nil, "archiveflow fetch proxy: request head too large")
			}
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			p.answer(c, http.StatusBadRequest, nil, "archiveflow fetch proxy: "+err.Error())
			return
		}
		switch {
		case r.Method == http.MethodConnect:
			p.tunnel(c, br, r)
			return
		case r.URL.IsAbs() && r.URL.Scheme == "http" && r.URL.Host != "":
			if !p.forward(c, br, head, r) {
				return
			}
		case r.Method == http.MethodGet && !r.URL.IsAbs() && r.URL.Path == RefusalsPath:
			p.refusals(c)
			return
		default:
			p.answer(c, http.StatusBadRequest, nil, "archiveflow fetch proxy: send absolute http:// URLs, or CONNECT host:port for anything else")
			return
		}
	}
}

// answer writes the proxy's own answer (never the site's: a CONNECT's,
// the proxy's resource's, a request that is no proxy request) and closes
// the connection.
func (p *Proxy) answer(c net.Conn, status int, header http.Header, body string) {
	if header == nil {
		header = http.Header{}
	}
	if header.Get("Content-Type") == "" {
		header.Set("Content-Type", "text/plain; charset=utf-8")
		header.Set("X-Content-Type-Options", "nosniff")
		body += "\n"
	}
	resp := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Header: header, Close: true,
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
	_ = c.SetWriteDeadline(time.Now().Add(headerTimeout))
	_ = resp.Write(c)
	_ = c.Close()
}

// URL is the proxy's address, http://127.0.0.1:PORT.
func (p *Proxy) URL() string { return p.url }

// Close stops the proxy: no new connections, every open one closed, and
// no OnDeny call after it returns.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.cancel()
	err := p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// DeniedError is a connection the policy refuses; Decision names the rule.
type DeniedError struct{ Decision netpolicy.Decision }

func (e *DeniedError) Error() string { return e.Decision.Reason() }

// Transport returns a new HTTP transport for fetching under policy: it
// dials only through Dialer(policy), never through the environment's
// proxy settings, and does not ask for compression (DisableCompression),
// so a body is kept as the origin served it. It is the one constructor of
// a fetching transport in the project (a test fails on any other); a
// caller may tune its pool and timeouts but not how it connects.
func Transport(policy *netpolicy.Policy) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         Dialer(policy),
		DisableCompression:  true,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 15 * time.Second,
	}
}

// DeniedBy returns the denial when err (a fetcher's error, however
// wrapped, e.g. in a *url.Error of a redirect hop) is a policy refusal.
func DeniedBy(err error) (*DeniedError, bool) {
	var d *DeniedError
	if errors.As(err, &d) {
		return d, true
	}
	return nil, false
}

// Dialer returns a DialContext that connects to addr (host:port) only when
// policy allows every address the host resolves to, and then to exactly
// those addresses, so the name cannot resolve differently between the
// check and the connect; a refusal is a *DeniedError. The proxy dials with
// it; a fetcher inside the worker process (no proxy in between) sets it as
// its transport's DialContext.
func Dialer(policy *netpolicy.Policy) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("fetch policy: address %q: %w", addr, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return nil, fmt.Errorf("fetch policy: port of %q: %w", addr, err)
		}
		addrs, d, err := policy.Resolve(ctx, host, port)
		if err != nil {
			return nil, &UnreachableError{Addr: addr, Err: err}
		}
		if d.Denied {
			return nil, &DeniedError{d}
		}
		dialer := net.Dialer{Timeout: dialTimeout}
		var errs []error
		for _, a := range addrs {
			c, err := dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			return nil, errors.Join(errs...) // the fetcher gave up, not the site
		}
		return nil, &UnreachableError{Addr: addr, Err: errors.Join(errs...)}
	}
}

// UnreachableError is a connection Dialer could not make: the host did
// not resolve, or no address accepted it. Nothing reached the site.
type UnreachableError struct {
	Addr string // host:port
	Err  error
}

func (e *UnreachableError) Error() string { return e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// maxRefused bounds the targets a proxy remembers having refused.
const maxRefused = 10000

// report remembers a refused target (Refusals) and hands it to OnDeny once
// per target: a fetcher that gets no answer retries (wget's --tries, a
// browser, Go's transport on a kept-alive connection), and one refusal is
// one line. A client that reports its refusals itself (SelfReportHeader)
// is not reported again.
func (p *Proxy) report(target string, d netpolicy.Decision, selfReported bool) {
	p.mu.Lock()
	_, seen := p.refused[target]
	if !seen && len(p.refused) < maxRefused {
		p.refused[target] = d.Rule
	}
	p.mu.Unlock()
	if seen || selfReported {
		return
	}
	p.log.Debug("fetch denied", zap.String("target", target), zap.String("rule", d.Rule))
	if p.opts.OnDeny != nil {
		p.opts.OnDeny(Denial{Target: target, Decision: d})
	}
}

// unreached remembers a target the proxy could not reach (Refusals).
func (p *Proxy) unreached(target string, err error) {
	p.log.Debug("fetch target unreachable", zap.String("target", target), zap.Error(err))
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, seen := p.failed[target]; !seen && len(p.failed) < maxRefused {
		p.failed[target] = err.Error()
	}
}

// answered remembers a forwarded target the site answered: a retry that
// reached it makes an earlier failure of the same target no longer
// "unanswered".
func (p *Proxy) answered(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reached) < maxRefused {
		p.reached[target] = struct{}{}
	}
}

// refusals answers GET RefusalsPath: the targets refused and those it
// could not reach so far, less any the site answered on another try, as
// JSON (Unanswered).
func (p *Proxy) refusals(c net.Conn) {
	p.mu.Lock()
	un := Unanswered{Refused: map[string]string{}, Unreachable: map[string]string{}}
	for t, r := range p.refused {
		if _, ok := p.reached[t]; !ok {
			un.Refused[t] = r
		}
	}
	for t, e := range p.failed {
		if _, ok := p.reached[t]; !ok {
			un.Unreachable[t] = e
		}
	}
	p.mu.Unlock()
	body, err := json.Marshal(un)
	if err != nil {
		p.answer(c, http.StatusInternalServerError, nil, err.Error())
		return
	}
	p.answer(c, http.StatusOK, http.Header{"Content-Type": {"application/json"}}, string(body))
}

// tunnel answers CONNECT host:port (r, the client's bytes after it in
// br): a splice to the address the policy allowed, or the proxy's own
// refusal (a 403 naming the rule, a tunnel that was never opened).
func (p *Proxy) tunnel(client net.Conn, br *bufio.Reader, r *http.Request) {
	target := r.Host
	end, err := p.turn("https://" + target + "/")
	if err != nil {
		p.answer(client, http.StatusServiceUnavailable, nil, "archiveflow fetch proxy: "+err.Error())
		return
	}
	defer end()
	upstream, err := p.dial(p.ctx, "tcp", target)
	if err != nil {
		if denied, ok := DeniedBy(err); ok {
			// A refused tunnel: the fetcher reports a proxy error, never
			// a response of the site.
			p.report(target, denied.Decision, r.Header.Get(SelfReportHeader) != "")
			h := http.Header{DeniedHeader: {denied.Decision.Rule}}
			if a := denied.Decision.Addr; a.IsValid() {
				h.Set(DeniedAddrHeader, a.String())
			}
			p.answer(client, http.StatusForbidden, h, "archiveflow fetch proxy: "+Denial{Target: target, Decision: denied.Decision}.Message())
			return
		}
		var unreachable *UnreachableError
		if errors.As(err, &unreachable) {
			p.unreached(target, err)
		}
		// An answer to CONNECT: a tunnel never opened, not the site's.
		p.answer(client, http.StatusBadGateway, nil, "archiveflow fetch proxy: "+err.Error())
		return
	}
	if !p.track(upstream) {
		return
	}
	established := "HTTP/1.1 200 Connection established\r\n"
	if r.Header.Get(SelfReportHeader) != "" {
		// One of archiveflow's own fetchers: it records the origin's
		// address (WARC-IP-Address), which only this end of the tunnel knows.
		if ap, err := netip.ParseAddrPort(upstream.RemoteAddr().String()); err == nil {
			established += OriginAddrHeader + ": " + ap.String() + "\r\n"
		}
	}
	if _, err := client.Write([]byte(established + "\r\n")); err != nil {
		p.untrack(client, upstream)
		return
	}
	// Bytes the client sent after its CONNECT request are already buffered.
	var fromClient io.Reader = client
	if n := br.Buffered(); n > 0 {
		fromClient = io.MultiReader(io.LimitReader(br, int64(n)), client)
	}
	// Either direction ending ends both.
	var once sync.Once
	done := func() { once.Do(func() { p.untrack(client, upstream) }) }
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer done()
		_, _ = io.Copy(upstream, fromClient)
	}()
	_, _ = io.Copy(client, upstream)
	done()
}

// turn takes the exchange's turn (Options.Turn) for target; end is never
// nil.
func (p *Proxy) turn(target string) (end func(), err error) {
	if p.opts.Turn == nil {
		return func() {}, nil
	}
	end, err = p.opts.Turn(p.ctx, target)
	if err != nil {
		p.log.Info("fetch waits for its host's turn no longer", zap.String("target", target), zap.Error(err))
		return nil, err
	}
	if end == nil {
		end = func() {}
	}
	return end, nil
}

// track registers connections so Close can end them; false (and all
// closed) when the proxy is closing.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// redactedURL is u without user information, for logs.
func redactedURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}
