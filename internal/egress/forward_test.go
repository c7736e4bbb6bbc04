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
// everything the proxy sent back until it closed the connection (the
// requests say Connection: close, or the last one is refused).
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
		"Connection: close\r\n" +
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
		"Connection: close\r\n" +
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
// then a final one) and then closes the client's connection, which said
// Connection: close; the bytes are the origin's.
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
		{"POST http://" + origin.Addr + "/interim HTTP/1.1\r\nHost: " + origin.Addr + "\r\nExpect: 100-continue\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx", interim},
		{"HEAD http://" + origin.Addr + "/head HTTP/1.1\r\nHost: " + origin.Addr + "\r\nConnection: close\r\n\r\n", head},
	} {
		start := time.Now()
		assert.Equal(t, tc.want, rawExchange(t, h, tc.req))
		assert.Less(t, time.Since(start), 5*time.Second, "the proxy waited for the origin to close")
	}
}

// TestEveryForwardedRequestIsDecided: a client that sends its next
// request on the same connection, kept alive or pipelined, to the same
// site or a denied one, has it decided and sent on an origin connection
// of its own: the denied one is refused (no answer, the connection
// closed, reported) and never reaches the denied port; one origin
// connection per request.
func TestEveryForwardedRequestIsDecided(t *testing.T) {
	h := newHarness(t)
	answer := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
	origin := egresstest.NewOrigin(t, map[string]egresstest.Answer{"/a": {Bytes: []byte(answer)}, "/b": {Bytes: []byte(answer)}})
	get := func(addr, path string) string {
		return fmt.Sprintf("GET http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, path, addr)
	}
	deniedURL := "http://" + h.denied.Addr + "/x"

	// Pipelined: /a, /b, then the denied one.
	assert.Equal(t, answer+answer, rawExchange(t, h, get(origin.Addr, "/a")+get(origin.Addr, "/b")+get(h.denied.Addr, "/x")))
	require.Len(t, h.denials(), 1)
	assert.Equal(t, deniedURL, h.denials()[0].Target)

	// Kept alive: each request after the answer to the one before.
	c, err := net.Dial("tcp", h.proxy.ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	br := bufio.NewReader(c)
	for _, path := range []string{"/a", "/b"} {
		_, err = io.WriteString(c, get(origin.Addr, path))
		require.NoError(t, err)
		buf := make([]byte, len(answer))
		_, err = io.ReadFull(br, buf)
		require.NoError(t, err)
		assert.Equal(t, answer, string(buf))
	}
	_, err = io.WriteString(c, get(h.denied.Addr, "/x"))
	require.NoError(t, err)
	rest, err := io.ReadAll(br)
	require.NoError(t, err, "the refused request's connection is closed")
	assert.Empty(t, string(rest), "a refused request was answered")

	assert.Len(t, origin.Received("/a"), 2)
	assert.Len(t, origin.Received("/b"), 2)
	assert.Equal(t, 4, origin.Connections(), "one origin connection per request")
	assert.Zero(t, h.denied.Connections(), "the denied port was connected to")
	assert.Len(t, h.denials(), 1, "one refused target is reported once")
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
