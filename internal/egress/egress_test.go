package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// harness is a proxy with a policy denying the guarded port and
// 169.254.0.0/16, and a log of its denials.
type harness struct {
	proxy  *Proxy
	denied *egresstest.Guarded
	mu     sync.Mutex
	log    []Denial
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{denied: egresstest.Guard(t)}
	pol, err := netpolicy.Parse([]string{"169.254.0.0/16", h.denied.Addr})
	require.NoError(t, err)
	pol = pol.WithLookup(func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "metadata.test":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		case "loop.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	})
	p, err := Start(Options{Policy: pol, OnDeny: func(d Denial) {
		h.mu.Lock()
		h.log = append(h.log, d)
		h.mu.Unlock()
	}})
	require.NoError(t, err)
	h.proxy = p
	t.Cleanup(func() { _ = p.Close() })
	return h
}

func (h *harness) denials() []Denial {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Denial(nil), h.log...)
}

func (h *harness) client(t *testing.T) *http.Client {
	t.Helper()
	u, err := url.Parse(h.proxy.URL())
	require.NoError(t, err)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(u),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test server
	}}
}

func TestForwardsAllowedHTTP(t *testing.T) {
	h := newHarness(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Site", "yes")
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "path=%s ua=%s", r.URL.Path, r.UserAgent())
	}))
	defer site.Close()
	req, err := http.NewRequest(http.MethodGet, site.URL+"/a?b=c", nil)
	require.NoError(t, err)
	req.Header.Set("User-Agent", "archiver/1")
	resp, err := h.client(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusTeapot, resp.StatusCode)
	assert.Equal(t, "yes", resp.Header.Get("X-Site"))
	assert.Equal(t, "path=/a ua=archiver/1", string(body))
	assert.Empty(t, resp.Header.Get(DeniedHeader))
	assert.Empty(t, h.denials())
}

func TestTunnelsAllowedHTTPS(t *testing.T) {
	h := newHarness(t)
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "secure")
	}))
	defer site.Close()
	resp, err := h.client(t).Get(site.URL + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "secure", string(body))
}

// TestDeniesAfterResolutionAndAcrossRedirects: direct requests, a name
// that resolves to a denied address, and a redirect to a denied port, over
// plain HTTP and CONNECT: none reaches the guarded listener, each is
// reported once with its rule; a forwarded request gets no HTTP answer
// (the connection is closed), a CONNECT a 403 naming the rule.
func TestDeniesAfterResolutionAndAcrossRedirects(t *testing.T) {
	h := newHarness(t)
	deniedURL := "http://" + h.denied.Addr + "/x"
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, deniedURL+"?via=moved", http.StatusFound)
	}))
	defer site.Close()
	portRule := h.denied.Addr

	cases := []struct{ url, rule, target string }{
		{deniedURL, portRule, deniedURL},
		{site.URL + "/moved", portRule, deniedURL + "?via=moved"},
		{"http://169.254.169.254/latest/meta-data/", "169.254.0.0/16", "http://169.254.169.254/latest/meta-data/"},
		{"http://metadata.test/computeMetadata/v1/", "169.254.0.0/16", "http://metadata.test/computeMetadata/v1/"},
		{fmt.Sprintf("http://loop.test:%d/", h.denied.Port()), portRule, fmt.Sprintf("http://loop.test:%d/", h.denied.Port())},
	}
	for _, tc := range cases {
		before := len(h.denials())
		resp, err := h.client(t).Get(tc.url)
		if err == nil {
			_ = resp.Body.Close()
		}
		// No HTTP answer at all: the connection is closed, so no fetcher
		// can record a status the site never sent.
		require.Error(t, err, tc.url)
		assert.ErrorIs(t, err, io.EOF, tc.url)
		got := h.denials()
		require.Len(t, got, before+1, tc.url)
		assert.Equal(t, tc.target, got[before].Target)
		assert.Equal(t, tc.rule, got[before].Decision.Rule)
	}

	// CONNECT (https) to the same places.
	for host, rule := range map[string]string{
		h.denied.Addr:         portRule,
		"169.254.169.254:443": "169.254.0.0/16",
		"metadata.test:443":   "169.254.0.0/16",
	} {
		before := len(h.denials())
		_, err := h.client(t).Get("https://" + host + "/")
		require.Error(t, err, host)
		assert.Contains(t, err.Error(), "Forbidden", host)
		got := h.denials()
		require.Len(t, got, before+1, host)
		assert.Equal(t, host, got[before].Target)
		assert.Equal(t, rule, got[before].Decision.Rule)
	}
	assert.Zero(t, h.denied.Connections(), "the denied port was connected to")
	assert.Contains(t, h.denials()[2].Message(), `fetch of http://169.254.169.254/latest/meta-data/ denied by fetch.deny rule "169.254.0.0/16"`)
	assert.Contains(t, h.denials()[3].Message(), "(metadata.test resolves to 169.254.169.254)")
}

func TestRejectsNonProxyRequests(t *testing.T) {
	h := newHarness(t)
	resp, err := http.Get(h.proxy.URL() + "/not-a-proxy-request")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestCloseEndsOpenTunnels: a tunnel in use is cut by Close, which then
// returns, and the proxy refuses new connections.
func TestCloseEndsOpenTunnels(t *testing.T) {
	h := newHarness(t)
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	conn, err := net.Dial("tcp", h.proxy.ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", echo.Addr(), echo.Addr())
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	assert.Contains(t, string(buf[:n]), "200 Connection established")
	_, err = conn.Write([]byte("ping"))
	require.NoError(t, err)
	n, err = io.ReadFull(conn, buf[:4])
	require.NoError(t, err)
	assert.Equal(t, "ping", string(buf[:n]))

	closed := make(chan error, 1)
	go func() { closed <- h.proxy.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with a tunnel open")
	}
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Read(buf)
	require.Error(t, err, "the tunnel must be closed")
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the tunnel was left open: %v", err)
	_, err = net.DialTimeout("tcp", h.proxy.ln.Addr().String(), time.Second)
	assert.Error(t, err, "a closed proxy accepts no connection")
}

// TestDialerHoldsThePolicyWithoutAProxy: a fetcher inside the worker
// process that dials with Dialer never reaches a denied address, is told
// the rule, and reaches an allowed one.
func TestDialerHoldsThePolicyWithoutAProxy(t *testing.T) {
	h := newHarness(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	defer site.Close()
	client := &http.Client{Timeout: 10 * time.Second, Transport: Transport(h.proxy.opts.Policy)}

	for target, rule := range map[string]string{
		"http://" + h.denied.Addr + "/":            h.denied.Addr,
		"http://metadata.test/latest/meta-data/":   "169.254.0.0/16",
		"http://169.254.169.254/latest/meta-data/": "169.254.0.0/16",
	} {
		_, err := client.Get(target)
		var denied *DeniedError
		require.ErrorAs(t, err, &denied, target)
		assert.Equal(t, rule, denied.Decision.Rule, target)
	}
	assert.Zero(t, h.denied.Connections(), "the denied port saw no connection")

	resp, err := client.Get(site.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "ok", string(body))
}

// TestTurnHoldsEachOriginExchange: with Options.Turn, every origin
// exchange (a forwarded request, a CONNECT tunnel) takes its turn first
// and ends it when the exchange is over; a refused turn reaches no origin:
// a forwarded request gets no answer, a CONNECT a 503 from the proxy.
func TestTurnHoldsEachOriginExchange(t *testing.T) {
	var mu sync.Mutex
	var turns, ends []string
	refuse := false
	pol, err := netpolicy.Parse([]string{"169.254.0.0/16"})
	require.NoError(t, err)
	p, err := Start(Options{Policy: pol, Turn: func(_ context.Context, target string) (func(), error) {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return nil, errors.New("host budget: no turn within crawl.per_host.max_wait")
		}
		turns = append(turns, target)
		return func() { mu.Lock(); ends = append(ends, target); mu.Unlock() }, nil
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	hits := 0
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mu.Lock(); hits++; mu.Unlock() }))
	defer site.Close()
	tlsSite := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mu.Lock(); hits++; mu.Unlock() }))
	defer tlsSite.Close()
	h := &harness{proxy: p}
	c := h.client(t)
	for _, u := range []string{site.URL + "/a", tlsSite.URL + "/b"} {
		resp, err := c.Get(u)
		require.NoError(t, err, u)
		_, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	c.CloseIdleConnections() // the tunnel ends with its connection
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(ends) == 2 }, 10*time.Second, 10*time.Millisecond,
		"each exchange ends its turn")
	mu.Lock()
	assert.Equal(t, []string{site.URL + "/a", "https://" + strings.TrimPrefix(tlsSite.URL, "https://") + "/"}, turns)
	assert.Equal(t, 2, hits)
	refuse = true
	mu.Unlock()

	_, err = h.client(t).Get(site.URL + "/c")
	assert.Error(t, err, "a forwarded request without a turn gets no answer")
	_, err = h.client(t).Get(tlsSite.URL + "/d")
	assert.ErrorContains(t, err, "Service Unavailable")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 2, hits, "no origin reached without a turn")
}
