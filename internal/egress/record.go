package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync"
)

// RecordingTransport returns a copy of t (a Transport or TunnelTransport:
// it connects as t does, under the same policy) whose connections record
// the bytes written to them and read from them, one Exchange per request,
// for a fetcher that archives HTTP from the wire rather than from
// net/http's parsed and re-serialised messages:
//   - connections are kept alive and reused per host (t's pool). A fetcher
//     begins each request's Exchange from httptrace's GotConn
//     (StartExchange) and takes its bytes from that Exchange, never from
//     the connection: net/http pools a connection as soon as an answer's
//     body has been read to its end, before the fetcher has taken its
//     recording, and the next fetch on it records into an Exchange of its
//     own. A connection records nothing before its first StartExchange;
//   - above TLS for https (the handshake is done here, on t's connection,
//     offering HTTP/1.1 only), so the bytes are the HTTP/1.1 messages
//     themselves, never HTTP/2 frames or ciphertext;
//   - for a tunnel through the fetch proxy, after the CONNECT exchange:
//     the bytes between the fetcher and the origin.
func RecordingTransport(t *http.Transport) *http.Transport {
	c := t.Clone()
	dial := c.DialContext
	c.ForceAttemptHTTP2 = false
	c.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &recordingConn{Conn: conn}, nil
	}
	base := c.TLSClientConfig
	handshakeTimeout := c.TLSHandshakeTimeout
	c.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := &tls.Config{}
		if base != nil {
			cfg = base.Clone()
		}
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			cfg.ServerName = host
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(conn, cfg)
		hctx := ctx
		if handshakeTimeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, handshakeTimeout)
			defer cancel()
		}
		if err := tc.HandshakeContext(hctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return &recordingConn{Conn: tc}, nil
	}
	return c
}

// recordingConn records every byte written to and read from the
// connection below it into its current Exchange (none: not recorded).
// What its reader gets is the bytes received with one change (sizeLines):
// the whitespace net/http refuses before a chunk extension.
type recordingConn struct {
	net.Conn
	mu      sync.Mutex
	ex      *Exchange // the exchange now on the connection, nil before the first
	method  string    // the exchange's request's, from the bytes sent
	lines   sizeLines
	pending []byte // handed to the reader, not read yet
	err     error  // the connection's read error, once pending is read
}

// Exchange is what one request and its answer carried on a connection of
// a RecordingTransport, from StartExchange until the next request on the
// connection starts another: the request's bytes as written and the
// bytes read after them (the answer, and whatever else came before the
// next exchange started, which ResponseMessage leaves out).
type Exchange struct {
	c              *recordingConn
	sent, received bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) == 0 && c.err == nil {
		c.mu.Unlock()
		n, err := c.Conn.Read(p)
		c.mu.Lock()
		if n > 0 {
			if c.ex != nil {
				c.ex.received.Write(p[:n])
			}
			c.lines.method = c.method
			c.pending = c.lines.feed(p[:n])
		}
		if err != nil {
			c.pending = append(c.pending, c.lines.flush()...)
			c.err = err
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	if len(c.pending) == 0 && c.err != nil {
		return n, c.err
	}
	return n, nil
}

// StartExchange begins a new Exchange on a connection of a
// RecordingTransport (as httptrace.GotConnInfo.Conn names it; nil for any
// other connection) and returns it: the connection records into it from
// now on, and into the previous exchange no more. A fetcher calls it from
// GotConn, before its request is written. On a reused connection the
// previous answer has been read to its end by then (net/http pools a
// connection only after that), so its bytes are all in its own Exchange.
func StartExchange(c net.Conn) *Exchange {
	rc, ok := c.(*recordingConn)
	if !ok {
		return nil
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.ex = &Exchange{c: rc}
	rc.method = ""
	rc.lines = sizeLines{}
	return rc.ex
}

// Write records p in the current exchange before writing it, so the bytes
// an answer already came for are there even while the Write that sent
// them has not returned; what was not written is dropped after. The
// request's method tells sizeLines whether its answer has a body.
func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	ex := c.ex
	if ex != nil {
		ex.sent.Write(p)
		if c.method == "" {
			c.method, _, _ = strings.Cut(ex.sent.String(), " ")
		}
	}
	c.mu.Unlock()
	n, err := c.Conn.Write(p)
	if n < len(p) && ex != nil {
		c.mu.Lock()
		// (Unless the fetcher took the exchange already, as it may when
		// the answer came before the request was all written.)
		if keep := ex.sent.Len() - (len(p) - n); keep >= 0 {
			ex.sent.Truncate(keep)
		}
		c.mu.Unlock()
	}
	return n, err
}

// NetConn is the connection below (OriginAddr looks through it).
func (c *recordingConn) NetConn() net.Conn { return c.Conn }

// Take returns the bytes the exchange wrote (sent) and read (received) so
// far, and lets go of them: a kept-alive connection idle in its pool
// holds no page's bytes (what it reads later, before another exchange
// starts, is kept anew). None for a nil Exchange. What was read may go on
// past the end of the response (a reader's buffer reads ahead):
// ResponseMessage finds its end.
func (e *Exchange) Take() (sent, received []byte) {
	if e == nil {
		return nil, nil
	}
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	sent, received = e.sent.Bytes(), e.received.Bytes()
	e.sent, e.received = bytes.Buffer{}, bytes.Buffer{}
	return sent, received
}

// ResponseMessage finds, in the bytes a connection received (raw), the
// answer to one request of method: msg is raw from its start (interim 1xx
// answers included) to the end of the final answer as its framing gives
// it (RFC 9112 section 6.3, as the proxy reads it: no body for HEAD, 204,
// 304; chunked with its size lines, extensions and trailer section;
// Content-Length; else until the connection ended), and payload is its
// body with the transfer coding removed (a content coding such as gzip
// kept), what a WARC payload digest covers. With limit >= 0, a body
// longer than limit bytes is cut where its limit-th byte ends: msg stops
// there and cut is true. A head that does not end or cannot be read is
// all of raw, with no payload.
func ResponseMessage(raw []byte, method string, limit int64) (msg, payload []byte, cut bool) {
	pos := 0
	var f framing
	var length int64
	for {
		head, err := readHead(bufio.NewReader(bytes.NewReader(raw[pos:])))
		if err != nil {
			return raw, nil, false
		}
		var status int
		status, f, length = responseFraming(head, method)
		pos += len(head)
		if status/100 != 1 || status == http.StatusSwitchingProtocols {
			if status == http.StatusSwitchingProtocols {
				f = noBody
			}
			break
		}
	}
	take := func(data []byte) ([]byte, bool) { // data cut at what limit leaves of payload
		if limit >= 0 && int64(len(payload))+int64(len(data)) > limit {
			return data[:limit-int64(len(payload))], true
		}
		return data, false
	}
	switch f {
	case noBody:
		return raw[:pos], nil, false
	case byLength:
		body := raw[pos:min(int64(len(raw)), int64(pos)+length)]
		body, cut = take(body)
		return raw[:pos+len(body)], body, cut
	case byClose:
		body, cut := take(raw[pos:])
		return raw[:pos+len(body)], body, cut
	}
	payload = []byte{}
	for {
		nl := bytes.IndexByte(raw[pos:], '\n')
		if nl < 0 {
			return raw, payload, false // the stream ended in a size line
		}
		size, ok := chunkSize(raw[pos : pos+nl+1])
		if !ok {
			// Framing that cannot be read: the rest is the body, as the
			// proxy relays it.
			rest, cut := take(raw[pos:])
			payload = append(payload, rest...)
			return raw[:pos+len(rest)], payload, cut
		}
		pos += nl + 1
		if size == 0 {
			break
		}
		data := raw[pos:min(int64(len(raw)), int64(pos)+size)]
		data, cut = take(data)
		payload = append(payload, data...)
		pos += len(data)
		if cut || int64(len(data)) < size {
			return raw[:pos], payload, cut
		}
		if nl := bytes.IndexByte(raw[pos:], '\n'); nl >= 0 { // the line ending after the data
			pos += nl + 1
		} else {
			return raw, payload, false
		}
	}
	for { // the trailer section, up to its empty line
		nl := bytes.IndexByte(raw[pos:], '\n')
		if nl < 0 {
			return raw, payload, false
		}
		line := raw[pos : pos+nl+1]
		pos += nl + 1
		if string(line) == "\r\n" || string(line) == "\n" {
			return raw[:pos], payload, false
		}
	}
}
