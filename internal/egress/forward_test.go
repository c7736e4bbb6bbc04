package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
)

// rawExchange sends raw bytes to the proxy on one connection and returns
// everything the proxy sent back until it closed the connection.
func rawExchange(t *testing.T, h *harness, send string) string {
	t.Helper()
	c, err := net.Dial("tcp", h.proxy.ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, send)
	require.NoError(t, err)
	got, err := io.ReadAll(c)
	require.NoError(t, err, "the proxy must end the exchange by closing the connection")
	return string(got)
}

// TestForwardSendsTheClientsBytesInOriginForm: what the origin receives is
// the client's request, fields in their case and order, duplicates and
// body included, with only the request-target in origin-form and
// Proxy-Authorization left out; a client without Host gets one added.
func TestForwardSendsTheClientsBytesInOriginForm(t *testing.T) {
	h := newHarness(t)
	origin := egresstest.NewOrigin(t, map[string]egresstest.Answer{
		"/form?a=1&b=%2F": {Bytes: []byte("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")},
		"/":               {Bytes: []byte("HTTP/1.0 200 OK\r\n\r\nroot"), Close: true},
	})
	req := "POST http://" + origin.Addr + "/form?a=1&b=%2F HTTP/1.1\r\n" +
		"host: " + origin.Addr + "\r\n" +
		"X-Dup: 1\r\n" +
		"Proxy-Authorization: Basic c2VjcmV0\r\n" +
		"x-dup: 2\r\n" +
		"Proxy-Connection: keep-alive\r\n" +
		"Content-Length: 7\r\n" +
		"\r\n" +
		"a=b&c=d"
	got := rawExchange(t, h, req)
	assert.Equal(t, "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", got)
	want := "POST /form?a=1&b=%2F HTTP/1.1\r\n" +
		"host: " + origin.Addr + "\r\n" +
		"X-Dup: 1\r\n" +
		"x-dup: 2\r\n" +
		"Proxy-Connection: keep-alive\r\n" +
		"Content-Length: 7\r\n" +
		"\r\n" +
		"a=b&c=d"
	require.Len(t, origin.Received("/form?a=1&b=%2F"), 1)
	assert.Equal(t, want, string(origin.Received("/form?a=1&b=%2F")[0]))

	// HTTP/1.0 without Host, no path: "/" and the authority as Host.
	got = rawExchange(t, h, "GET http://"+origin.Addr+" HTTP/1.0\r\nUser-Agent: old\r\n\r\n")
	assert.Equal(t, "HTTP/1.0 200 OK\r\n\r\nroot", got)
	require.Len(t, origin.Received("/"), 1)
	assert.Equal(t, "GET / HTTP/1.0\r\nUser-Agent: old\r\nHost: "+origin.Addr+"\r\n\r\n", string(origin.Received("/")[0]))
}

// TestForwardEndsWhereTheAnswerEnds: the proxy finds the end of an answer
// without the origin closing its connection (HEAD, interim 1xx answers
// then a final one, a chunked body) and then closes the client's
// connection; the bytes are the origin's.
func TestForwardEndsWhereTheAnswerEnds(t *testing.T) {
	h := newHarness(t)
	interim := "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n" +
		"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nyes"
	head := "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
	origin := egresstest.NewOrigin(t, map[string]egresstest.Answer{
		"/interim": {Bytes: []byte(interim)},
		"/head":    {Bytes: []byte(head)},
	})
	for _, tc := range []struct{ req, want string }{
		{"POST http://" + origin.Addr + "/interim HTTP/1.1\r\nHost: " + origin.Addr + "\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx", interim},
		{"HEAD http://" + origin.Addr + "/head HTTP/1.1\r\nHost: " + origin.Addr + "\r\n\r\n", head},
	} {
		start := time.Now()
		assert.Equal(t, tc.want, rawExchange(t, h, tc.req))
		assert.Less(t, time.Since(start), 5*time.Second, "the proxy waited for the origin to close")
	}
}

// TestOneForwardedRequestPerConnection: a client that sends a second
// request on its connection, kept alive or pipelined, to the same site or
// a denied one, gets its connection closed after the first answer: no
// second request reaches any origin without a connection (and a decision)
// of its own.
func TestOneForwardedRequestPerConnection(t *testing.T) {
	h := newHarness(t)
	answer := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
	origin := egresstest.NewOrigin(t, map[string]egresstest.Answer{"/a": {Bytes: []byte(answer)}, "/b": {Bytes: []byte(answer)}})
	first := fmt.Sprintf("GET http://%s/a HTTP/1.1\r\nHost: %s\r\n\r\n", origin.Addr, origin.Addr)
	for _, second := range []string{
		fmt.Sprintf("GET http://%s/b HTTP/1.1\r\nHost: %s\r\n\r\n", origin.Addr, origin.Addr),
		fmt.Sprintf("GET http://%s/x HTTP/1.1\r\nHost: %s\r\n\r\n", h.denied.Addr, h.denied.Addr),
	} {
		// Pipelined.
		assert.Equal(t, answer, rawExchange(t, h, first+second))
		// Kept alive: the second request after the first answer.
		c, err := net.Dial("tcp", h.proxy.ln.Addr().String())
		require.NoError(t, err)
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = io.WriteString(c, first)
		require.NoError(t, err)
		br := bufio.NewReader(c)
		buf := make([]byte, len(answer))
		_, err = io.ReadFull(br, buf)
		require.NoError(t, err)
		assert.Equal(t, answer, string(buf))
		_, _ = io.WriteString(c, second) // may fail: the proxy closed it
		rest, _ := io.ReadAll(br)
		assert.Empty(t, string(rest), "a second request on one connection was answered")
		_ = c.Close()
	}
	assert.Len(t, origin.Received("/a"), 4)
	assert.Empty(t, origin.Received("/b"))
	assert.Equal(t, 4, origin.Connections(), "one origin connection per request")
	assert.Zero(t, h.denied.Connections())
	assert.Empty(t, h.denials(), "the second request was never read, so never refused")
}

// TestResponseFraming: where an answer ends, read from its head alone.
func TestResponseFraming(t *testing.T) {
	for _, tc := range []struct {
		head, method string
		status       int
		framing      framing
		length       int64
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "GET", 200, byLength, 5},
		{"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nContent-Length: 5\r\n\r\n", "GET", 200, byLength, 5},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", "GET", 200, byClose, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", "GET", 200, byClose, 0},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD", 200, noBody, 0},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\nContent-Length: 5\r\n\r\n", "GET", 200, chunked, 0},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "GET", 200, byClose, 0},
		{"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "GET", 200, byClose, 0},
		{"HTTP/1.0 200 OK\r\n\r\n", "GET", 200, byClose, 0},
		{"HTTP/1.1 200 OK\n\n", "GET", 200, byClose, 0},
		{"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", "GET", 304, noBody, 0},
		{"HTTP/1.1 204 No Content\r\n\r\n", "GET", 204, noBody, 0},
		{"HTTP/1.1 103 Early Hints\r\n\r\n", "GET", 103, noBody, 0},
		{"ICY 200 OK\r\n\r\n", "GET", 0, byClose, 0},
	} {
		status, f, n := responseFraming([]byte(tc.head), tc.method)
		assert.Equal(t, []any{tc.status, tc.framing, tc.length}, []any{status, f, n}, "%s %q", tc.method, tc.head)
	}
	for target, want := range map[string]string{
		"http://h":           "/",
		"http://h:80":        "/",
		"http://h?q=1":       "/?q=1",
		"HTTP://h/a%2Fb?c#f": "/a%2Fb?c",
		"http://u:p@h/x":     "/x",
		"http://[::1]:8/y":   "/y",
	} {
		got, err := originForm(target)
		require.NoError(t, err, target)
		assert.Equal(t, want, got, target)
	}
	_, err := originForm("/relative")
	assert.Error(t, err)
	assert.True(t, strings.HasPrefix(string(must(requestHead([]byte("GET http://h/x HTTP/1.1\nA: b\n\n"), "h"))), "GET /x HTTP/1.1\nA: b\nHost: h\n\n"))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
