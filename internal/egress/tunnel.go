package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// Headers of the proxy's CONNECT exchange with a fetcher of the project.
const (
	// SelfReportHeader on a CONNECT says the fetcher reports a refusal
	// itself, naming the URL it was fetching (a more useful line than the
	// tunnel's host:port): the proxy only remembers it (Refusals).
	SelfReportHeader = "X-Archiveflow-Reports-Denials"
	// DeniedAddrHeader on a refused CONNECT is the resolved address a rule
	// matched, when a name resolved to it.
	DeniedAddrHeader = "X-Archiveflow-Fetch-Denied-Address"
	// OriginAddrHeader on the proxy's 200 answer to a CONNECT that carries
	// SelfReportHeader is the address (IP:port) of the origin connection
	// the proxy opened for the tunnel (OriginAddr).
	OriginAddrHeader = "X-Archiveflow-Origin-Address"
)

// RefusalsPath is the proxy's own resource (a plain GET, not a proxy
// request) listing the targets it answered without the site so far
// (Unanswered): a forwarded request's URL, a tunnel's host:port. A hook
// that runs a third-party fetcher through the proxy reads it to tell the
// proxy's refusals and the requests that never reached a site from the
// site's own answers (Refusals).
const RefusalsPath = "/archiveflow/refusals"

// Unanswered are the targets a proxy answered without the site.
type Unanswered struct {
	// Refused: target → the fetch.deny rule that refused it.
	Refused map[string]string `json:"refused"`
	// Unreachable: target → why no connection was made (its host did not
	// resolve, no address accepted it). Nothing reached the site.
	Unreachable map[string]string `json:"unreachable"`
}

// Refusals asks the fetch proxy at proxy which targets it answered
// without the site so far.
func Refusals(ctx context.Context, proxy *url.URL) (Unanswered, error) {
	u := proxy.ResolveReference(&url.URL{Path: RefusalsPath})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Unanswered{}, fmt.Errorf("fetch proxy refusals: %w", err)
	}
	// The proxy itself, on loopback: no policy applies to it.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var out Unanswered
	resp, err := client.Do(req)
	if err != nil {
		return out, fmt.Errorf("fetch proxy refusals: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("fetch proxy refusals: %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&out); err != nil {
		return out, fmt.Errorf("fetch proxy refusals: %w", err)
	}
	return out, nil
}

// TunnelTransport is Transport for a fetcher in a hook process: every
// connection, http:// included, is a CONNECT tunnel through the attempt's
// fetch proxy (TunnelDialer), so the decision is the worker's, made by the
// proxy's Dialer with the worker's resolver, and the bytes on the wire are
// the origin's (a tunnel does not re-serialise them).
func TunnelTransport(proxy *url.URL) *http.Transport {
	t := Transport(nil)
	t.DialContext = TunnelDialer(proxy)
	return t
}

// TunnelDialer returns a DialContext that opens a CONNECT tunnel to addr
// through the fetch proxy at proxy. A refusal is a *DeniedError with the
// proxy's rule; the fetcher reports it (SelfReportHeader).
func TunnelDialer(proxy *url.URL) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: dialTimeout}
		conn, err := d.DialContext(ctx, "tcp", proxy.Host)
		if err != nil {
			return nil, fmt.Errorf("fetch proxy %s: %w", proxy.Host, err)
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		c, err := connect(conn, addr)
		if !stop() {
			_ = conn.Close()
			return nil, ctx.Err()
		}
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		_ = c.SetDeadline(time.Time{})
		return c, nil
	}
}

// connect sends CONNECT addr on conn and reads the proxy's answer.
func connect(conn net.Conn, addr string) (net.Conn, error) {
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr,
		Header: http.Header{SelfReportHeader: {"1"}}}
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("fetch proxy: CONNECT %s: %w", addr, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("fetch proxy: CONNECT %s: %w", addr, err)
	}
	var reason []byte
	if resp.StatusCode != http.StatusOK {
		reason, _ = io.ReadAll(io.LimitReader(resp.Body, 512))
	}
	_ = resp.Body.Close()
	if rule := resp.Header.Get(DeniedHeader); rule != "" {
		host, _, _ := net.SplitHostPort(addr)
		d := netpolicy.Decision{Denied: true, Rule: rule, Host: strings.ToLower(strings.Trim(host, "[]"))}
		if a, err := netip.ParseAddr(resp.Header.Get(DeniedAddrHeader)); err == nil {
			d.Addr = a
		}
		return nil, &DeniedError{Decision: d}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch proxy: CONNECT %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(reason)))
	}
	if br.Buffered() > 0 {
		return nil, fmt.Errorf("fetch proxy: CONNECT %s: data before the tunnel opened", addr)
	}
	tc := &tunnelConn{Conn: conn}
	if ap, err := netip.ParseAddrPort(resp.Header.Get(OriginAddrHeader)); err == nil {
		tc.origin = ap
	}
	return tc, nil
}

// tunnelConn is a tunnel through the fetch proxy, with the origin address
// the proxy named (invalid when it named none).
type tunnelConn struct {
	net.Conn
	origin netip.AddrPort
}

// OriginAddr is the address of the origin a fetching connection reached:
// for a tunnel through the fetch proxy (TunnelDialer), the one the proxy
// named (false when it named none); for a direct TCP connection (Dialer),
// its remote address. A TLS connection is looked through to the
// connection below.
func OriginAddr(c net.Conn) (netip.AddrPort, bool) {
	for {
		if tc, ok := c.(*tunnelConn); ok {
			return tc.origin, tc.origin.IsValid()
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	if c == nil || c.RemoteAddr() == nil {
		return netip.AddrPort{}, false
	}
	if _, ok := c.(*net.TCPConn); !ok {
		return netip.AddrPort{}, false // not a connection Dialer made
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	return ap, err == nil
}

// policyKey is the context key of WithPolicy.
type policyKey struct{}

// WithPolicy returns ctx carrying policy: a fetcher called inside the
// worker process (an in-process built-in hook) decides with the worker's
// own policy object, resolver included, instead of parsing FETCH_DENY.
func WithPolicy(ctx context.Context, policy *netpolicy.Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, policy)
}

// PolicyFrom returns the policy WithPolicy put in ctx.
func PolicyFrom(ctx context.Context) (*netpolicy.Policy, bool) {
	p, ok := ctx.Value(policyKey{}).(*netpolicy.Policy)
	return p, ok && p != nil
}
