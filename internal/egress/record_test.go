package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// recordedGet fetches u with c and returns the body and what its
// exchange sent and received (Exchange.Take).
func recordedGet(t *testing.T, c *http.Client, u string) (resp *http.Response, body, sent, received []byte) {
	t.Helper()
	var ex *Exchange
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) { ex = StartExchange(ci.Conn) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err = c.Do(req)
	require.NoError(t, err, u)
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err, u)
	require.NoError(t, resp.Body.Close())
	require.NotNil(t, ex, "%s: a connection of RecordingTransport", u)
	sent, received = ex.Take()
	return resp, body, sent, received
}

// fetchTransports are the two ways a Go fetcher connects under an empty
// policy: "direct" (Transport, the worker's) and "tunnel"
// (TunnelTransport through a fetch proxy that lasts as long as t, a hook
// process's).
func fetchTransports(t *testing.T) map[string]*http.Transport {
	pol, err := netpolicy.Parse(nil)
	require.NoError(t, err)
	proxy, err := Start(Options{Policy: pol})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	proxyURL, err := url.Parse(proxy.URL())
	require.NoError(t, err)
	return map[string]*http.Transport{"direct": Transport(pol), "tunnel": TunnelTransport(proxyURL)}
}

// TestRecordingTransportKeepsTheWireBytes: a connection of
// RecordingTransport keeps the request as the origin received it and the
// answer as the origin wrote it (ResponseMessage finds its end), for every
// answer of egresstest.UnusualAnswers, dialled directly (Transport) and
// through the fetch proxy's tunnel (TunnelTransport); connections are
// reused, the request says nothing of Connection (keep-alive is HTTP/1.1's
// default) and each exchange's recording is that exchange alone
// (StartExchange); the payload is the body net/http read. PathChunked's
// whitespace before a chunk extension's ";" (valid per RFC 9112, "invalid
// byte in chunk length" to net/http's own reader) is read too: the client
// is handed its size lines without it (sizeLines), the recording keeps
// it; egresstest.ChunkExtensions is the same without it.
func TestRecordingTransportKeepsTheWireBytes(t *testing.T) {
	answers := egresstest.UnusualAnswers()
	answers[egresstest.PathChunkExtensions] = egresstest.ChunkExtensions()
	origin := egresstest.NewOrigin(t, answers)
	for name, base := range fetchTransports(t) {
		c := &http.Client{Transport: RecordingTransport(base)}
		before := origin.Connections()
		for target, a := range answers {
			_, body, sent, received := recordedGet(t, c, origin.URL(target))
			got := origin.Received(target)
			require.NotEmpty(t, got, target)
			assert.Equal(t, string(got[len(got)-1]), string(sent), "%s %s: the request as the origin received it, alone", name, target)
			assert.NotContains(t, string(sent), "\r\nConnection:", "%s %s: the request as sent", name, target)
			msg, payload, cut := ResponseMessage(received, http.MethodGet, -1)
			assert.Equal(t, string(a.Bytes), string(msg), "%s %s: the answer as the origin wrote it", name, target)
			assert.True(t, bytes.HasPrefix(received, a.Bytes), "%s %s: nothing of an earlier answer before it", name, target)
			assert.Equal(t, string(body), string(payload), "%s %s: the payload is the body without its transfer coding", name, target)
			assert.False(t, cut)
		}
		assert.Less(t, origin.Connections()-before, len(answers), "%s: connections are reused", name)
	}
}

// TestRecordingTransportRecordsHTTP1AboveTLS: over https the recorded
// bytes are the HTTP/1.1 messages inside TLS, even when the server
// offers HTTP/2.
func TestRecordingTransportRecordsHTTP1AboveTLS(t *testing.T) {
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto", r.Proto)
		fmt.Fprint(w, "secret body")
	}))
	site.EnableHTTP2 = true
	site.StartTLS()
	defer site.Close()
	pol, err := netpolicy.Parse(nil)
	require.NoError(t, err)
	base := Transport(pol)
	roots := x509.NewCertPool()
	roots.AddCert(site.Certificate())
	base.TLSClientConfig = &tls.Config{RootCAs: roots}
	rt := RecordingTransport(base)

	resp, body, sent, received := recordedGet(t, &http.Client{Transport: rt}, site.URL+"/x")
	assert.Equal(t, "HTTP/1.1", resp.Proto)
	assert.Equal(t, "secret body", string(body))
	assert.True(t, bytes.HasPrefix(sent, []byte("GET /x HTTP/1.1\r\n")), "%q", sent)
	assert.True(t, bytes.HasPrefix(received, []byte("HTTP/1.1 200 OK\r\n")), "%q", received)
	assert.Contains(t, string(received), "X-Proto: HTTP/1.1\r\n")
	_, payload, _ := ResponseMessage(received, http.MethodGet, -1)
	assert.Equal(t, "secret body", string(payload))
}

// TestResponseMessageCutsAtTheLimit: a body over the limit is cut where
// its limit-th byte ends, in a chunked body too; interim answers are part
// of the message; bytes after the answer's end are not.
func TestResponseMessageCutsAtTheLimit(t *testing.T) {
	for _, c := range []struct {
		name, raw string
		limit     int64
		msg, body string
		cut       bool
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", -1, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "hello", false},
		{"length cut", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 3, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", "hel", true},
		{"close cut", "HTTP/1.0 200 OK\r\n\r\nhello", 4, "HTTP/1.0 200 OK\r\n\r\nhell", "hell", true},
		{"chunked cut", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n", 5,
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n4\r\nde", "abcde", true},
		{"chunked at the limit", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\nEXTRA", 3,
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\n", "abc", false},
		{"interim", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\nEXTRA", -1,
			"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\n", "", false},
	} {
		msg, body, cut := ResponseMessage([]byte(c.raw), http.MethodGet, c.limit)
		assert.Equal(t, c.msg, string(msg), c.name)
		assert.Equal(t, c.body, string(body), c.name)
		assert.Equal(t, c.cut, cut, c.name)
	}
}
