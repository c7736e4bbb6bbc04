package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTunnelTransportDecidesAtTheProxy: a hook process's Go fetcher
// (TunnelTransport) reaches an allowed site over plain HTTP through a
// tunnel, the origin's bytes unchanged; a denied address, a name the
// proxy's resolver maps to a denied address and a redirect hop to a denied
// port are each a *DeniedError with the proxy's rule (and the address the
// name resolved to), never a connection to the guarded port. The proxy
// does not report them itself (the fetcher does, naming its URL) but
// lists them in Refusals, beside a forwarded request it refused.
func TestTunnelTransportDecidesAtTheProxy(t *testing.T) {
	h := newHarness(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "http://"+h.denied.Addr+"/hop", http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("X-Origin", "yes")
		fmt.Fprint(w, "origin body")
	}))
	defer site.Close()
	proxyURL, err := url.Parse(h.proxy.URL())
	require.NoError(t, err)
	client := &http.Client{Timeout: 10 * time.Second, Transport: TunnelTransport(proxyURL)}

	resp, err := client.Get(site.URL + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "origin body", string(body))
	assert.Equal(t, "yes", resp.Header.Get("X-Origin"))

	cases := []struct{ url, rule, reason string }{
		{"http://" + h.denied.Addr + "/", h.denied.Addr, fmt.Sprintf("denied by fetch.deny rule %q", h.denied.Addr)},
		{"http://metadata.test/latest/", "169.254.0.0/16", `denied by fetch.deny rule "169.254.0.0/16" (metadata.test resolves to 169.254.169.254)`},
		{"http://2852039166/latest/", "169.254.0.0/16", `denied by fetch.deny rule "169.254.0.0/16" (2852039166 resolves to 169.254.169.254)`},
		{site.URL + "/moved", h.denied.Addr, fmt.Sprintf("denied by fetch.deny rule %q", h.denied.Addr)},
	}
	for _, tc := range cases {
		_, err := client.Get(tc.url)
		d, ok := DeniedBy(err)
		require.True(t, ok, "%s: %v", tc.url, err)
		assert.Equal(t, tc.rule, d.Decision.Rule, tc.url)
		assert.Equal(t, tc.reason, d.Decision.Reason(), tc.url)
	}
	assert.Empty(t, h.denials(), "a self-reporting fetcher's refusals are not reported again")

	// A forwarded request (wget's, through HTTP_PROXY) refused too.
	_, err = h.client(t).Get("http://169.254.169.254/forwarded")
	require.Error(t, err)
	refused, err := Refusals(context.Background(), proxyURL)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		h.denied.Addr:                      h.denied.Addr,
		"metadata.test:80":                 "169.254.0.0/16",
		"2852039166:80":                    "169.254.0.0/16",
		"http://169.254.169.254/forwarded": "169.254.0.0/16",
	}, refused.Refused)
	assert.Empty(t, refused.Unreachable)
	assert.Len(t, h.denials(), 1, "the forwarded refusal is reported by the proxy")
	assert.Zero(t, h.denied.Connections(), "the denied port was connected to")
}

// TestRefusalIsReportedOncePerTarget: wget and browsers retry a request
// that got no answer; the job log gets one line per refused URL.
func TestRefusalIsReportedOncePerTarget(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		_, err := h.client(t).Get("http://169.254.169.254/again")
		require.Error(t, err)
	}
	assert.Len(t, h.denials(), 1)
}

// TestUnreachableSiteGetsNoFabricatedAnswer: a forwarded request to a
// port nothing listens on is answered by closing the connection (no 502
// with the proxy's text for a fetcher to record as the site's), and the
// target is listed as unreachable until the site answers it.
func TestUnreachableSiteGetsNoFabricatedAnswer(t *testing.T) {
	h := newHarness(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	target := "http://" + closedAddr + "/nothing-here"
	resp, err := h.client(t).Get(target)
	if err == nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err, "no HTTP answer at all")
	assert.ErrorIs(t, err, io.EOF)
	proxyURL, err := url.Parse(h.proxy.URL())
	require.NoError(t, err)
	un, err := Refusals(context.Background(), proxyURL)
	require.NoError(t, err)
	assert.Contains(t, un.Unreachable[target], "connection refused")
	assert.Empty(t, un.Refused)
	assert.Empty(t, h.denials(), "not a policy refusal")

	// The site comes up on that port and answers: no longer unanswered.
	ln2, err := net.Listen("tcp", closedAddr)
	if err != nil {
		t.Skipf("port %s taken again: %v", closedAddr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "up") })}
	go func() { _ = srv.Serve(ln2) }()
	defer srv.Close()
	resp, err = h.client(t).Get(target)
	require.NoError(t, err)
	_ = resp.Body.Close()
	un, err = Refusals(context.Background(), proxyURL)
	require.NoError(t, err)
	assert.Empty(t, un.Unreachable, "answered on a later try")
}

// TestOriginAddrThroughTheTunnel: a fetcher in a hook process learns the
// origin's address (for WARC-IP-Address) from the proxy's answer to its
// CONNECT, over plain HTTP and TLS, for a name the proxy resolved; a
// direct connection's is its remote address; a connection to the proxy
// that named nothing has none.
func TestOriginAddrThroughTheTunnel(t *testing.T) {
	h := newHarness(t)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewTLSServer(handler)
	defer secure.Close()
	proxyURL, err := url.Parse(h.proxy.URL())
	require.NoError(t, err)
	tunnel := TunnelTransport(proxyURL)
	tunnel.TLSClientConfig = secure.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	direct := Transport(nil)
	direct.TLSClientConfig = tunnel.TLSClientConfig.Clone()

	get := func(tr *http.Transport, u string) (netip.AddrPort, bool) {
		t.Helper()
		var ap netip.AddrPort
		var ok bool
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) { ap, ok = OriginAddr(ci.Conn) },
		}))
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: tr}).Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return ap, ok
	}
	for _, site := range []*httptest.Server{plain, secure} {
		want := netip.MustParseAddrPort(site.Listener.Addr().String())
		for name, tr := range map[string]*http.Transport{"tunnel": tunnel, "direct": direct} {
			ap, ok := get(tr, site.URL+"/")
			assert.True(t, ok, "%s %s", name, site.URL)
			assert.Equal(t, want, ap, "%s %s", name, site.URL)
		}
	}
	// By name: the proxy's resolver maps loop.test to 127.0.0.1.
	ap, ok := get(tunnel, "http://loop.test:"+strconv.Itoa(int(netip.MustParseAddrPort(plain.Listener.Addr().String()).Port()))+"/")
	assert.True(t, ok)
	assert.Equal(t, plain.Listener.Addr().String(), ap.String())

	// A tunnel whose proxy named no origin has no address, not the proxy's.
	c, err := net.Dial("tcp", proxyURL.Host)
	require.NoError(t, err)
	defer c.Close()
	_, ok = OriginAddr(&tunnelConn{Conn: c})
	assert.False(t, ok)
}
