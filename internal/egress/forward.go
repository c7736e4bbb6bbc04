package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// How the proxy forwards a plain http:// request (absolute-form) without
// rewriting HTTP, so that what a fetcher records (wget's WARC) is what the
// origin sent:
//
//   - The origin is dialled with Dialer, the policy decision for this one
//     request, and its connection carries this request only. A kept-alive
//     client's next request on the same connection (to this host or
//     another) is read and decided like the first, on a new origin
//     connection; the client's connection is kept where the origin's
//     answer leaves it open (keepsConnection).
//   - The request goes to the origin as the client's bytes with exactly
//     these changes (requestHead): the request-target in origin-form (the
//     client's path and query, bytes as sent, "/" when empty, no
//     fragment); Proxy-Authorization removed (a credential for a proxy is
//     not the site's to see); a Host field added when the client sent
//     none (HTTP/1.0). Every other field (Connection and wget's
//     Proxy-Connection included: the fetcher recorded them as sent), its
//     case, order, duplicates, and the body and its framing are the
//     client's.
//   - The origin's bytes go to the client unchanged: status line, fields,
//     framing (chunk sizes, extensions, trailers) and body. The proxy only
//     reads them (relay) to know where the answer ends: no body for HEAD,
//     1xx, 204 and 304; chunked when the last transfer coding is chunked;
//     Content-Length; otherwise (or when the framing cannot be read) until
//     the origin closes. An interim 1xx is followed by the final answer; a
//     101 turns the connection into a splice.

// maxHead bounds a request or response head and one framing line.
const maxHead = 1 << 20

// errHeadTooLarge is a head longer than maxHead.
var errHeadTooLarge = errors.New("head too large")

// readHead reads one HTTP message head (start line and fields, up to and
// including the empty line) as the bytes that came in. A message that
// ends before its empty line is io.ErrUnexpectedEOF (io.EOF when nothing
// came at all).
func readHead(br *bufio.Reader) ([]byte, error) {
	var head []byte
	for {
		line, err := br.ReadSlice('\n')
		head = append(head, line...)
		if len(head) > maxHead {
			return head, errHeadTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if len(head) > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return head, err
		}
		if len(head) > len(line) && (string(line) == "\r\n" || string(line) == "\n") {
			return head, nil
		}
	}
}

// headLines splits a head into lines, each with its line ending.
func headLines(head []byte) [][]byte {
	var lines [][]byte
	for len(head) > 0 {
		i := bytes.IndexByte(head, '\n')
		if i < 0 {
			i = len(head) - 1
		}
		lines = append(lines, head[:i+1])
		head = head[i+1:]
	}
	return lines
}

// fieldName is the name of a field line, "" for a continuation line
// (obs-fold) or a line without a colon.
func fieldName(line []byte) string {
	if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
		return ""
	}
	name, _, ok := bytes.Cut(line, []byte(":"))
	if !ok {
		return ""
	}
	return string(name)
}

// toProxy are the request fields never forwarded: a credential for a
// proxy. Proxy-Connection is forwarded (wget sends it, and records it in
// its WARC as sent; an origin ignores it).
var toProxy = map[string]bool{"proxy-authorization": true}

// requestHead is the head a forwarded request is sent to its origin with:
// the client's head with the request-target in origin-form,
// Proxy-Authorization removed and a Host field added when there is none
// (authority is the request-target's).
func requestHead(head []byte, authority string) ([]byte, error) {
	lines := headLines(head)
	if len(lines) < 2 {
		return nil, errors.New("no request line")
	}
	method, rest, ok1 := bytes.Cut(lines[0], []byte(" "))
	target, version, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("request line %q", lines[0])
	}
	path, err := originForm(string(target))
	if err != nil {
		return nil, err
	}
	eol := "\r\n"
	if !bytes.HasSuffix(lines[0], []byte("\r\n")) {
		eol = "\n"
	}
	out := make([]byte, 0, len(head)+len(authority)+8)
	out = append(out, method...)
	out = append(out, ' ')
	out = append(out, path...)
	out = append(out, ' ')
	out = append(out, version...)
	dropping, host := false, false
	fields := lines[1 : len(lines)-1]
	for _, line := range fields {
		name := fieldName(line)
		if name == "" && (line[0] == ' ' || line[0] == '\t') {
			if !dropping { // a continuation of the field before
				out = append(out, line...)
			}
			continue
		}
		lower := strings.ToLower(name)
		dropping = toProxy[lower]
		host = host || lower == "host"
		if !dropping {
			out = append(out, line...)
		}
	}
	if !host {
		out = append(out, "Host: "+authority+eol...)
	}
	return append(out, lines[len(lines)-1]...), nil
}

// ForwardedHead is the head the proxy sends the origin for a request a
// fetcher sent it with head (absolute-form): what a fetcher's own record
// of the request (wget's WARC request record) holds once it is what the
// origin received.
func ForwardedHead(head []byte) ([]byte, error) {
	line, _, _ := bytes.Cut(head, []byte("\n"))
	_, rest, _ := bytes.Cut(line, []byte(" "))
	target, _, _ := bytes.Cut(rest, []byte(" "))
	u, err := url.Parse(string(target))
	if err != nil || !strings.EqualFold(u.Scheme, "http") || u.Host == "" {
		return nil, fmt.Errorf("request-target %q is not an absolute http URL", truncateBytes(target, 200))
	}
	return requestHead(head, u.Host)
}

// truncateBytes is b cut to at most n bytes.
func truncateBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// originForm is the origin-form of an absolute-form request-target: its
// path and query as the client wrote them ("/" when there is no path), no
// fragment.
func originForm(target string) (string, error) {
	scheme, rest, ok := strings.Cut(target, "://")
	if !ok || !strings.EqualFold(scheme, "http") {
		return "", fmt.Errorf("request-target %q is not an absolute http URL", target)
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[i:]
	} else {
		rest = ""
	}
	rest, _, _ = strings.Cut(rest, "#")
	switch {
	case rest == "":
		return "/", nil
	case rest[0] == '?':
		return "/" + rest, nil
	}
	return rest, nil
}

// framing is how a message's body is delimited.
type framing int

const (
	noBody framing = iota
	byLength
	chunked
	byClose // until the sender closes the connection
)

// responseFraming reads a response head: its status code and how its body
// ends (RFC 9112 section 6.3). A head it cannot read is byClose: the
// client gets every byte the origin sends until it closes.
func responseFraming(head []byte, method string) (status int, f framing, length int64) {
	lines := headLines(head)
	proto, rest, _ := bytes.Cut(bytes.TrimRight(lines[0], "\r\n"), []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	status, err := strconv.Atoi(string(code))
	if err != nil || len(code) != 3 || !bytes.HasPrefix(proto, []byte("HTTP/")) {
		return 0, byClose, 0
	}
	if method == http.MethodHead || status/100 == 1 || status == http.StatusNoContent || status == http.StatusNotModified {
		return status, noBody, 0
	}
	f, length = bodyFraming(lines[1:len(lines)-1], string(proto) != "HTTP/1.0")
	if f == noBody { // a response without framing ends when the origin closes
		f = byClose
	}
	return status, f, length
}

// bodyFraming is the framing the fields of a message give: chunked when
// the last transfer coding is chunked (and allowed, an HTTP/1.1 message),
// byClose for any other transfer coding, byLength for one valid
// Content-Length (repeated values must agree), noBody without either.
// Conflicting or invalid lengths are byClose.
func bodyFraming(fields [][]byte, te bool) (framing, int64) {
	var codings []string
	var lengths []string
	for _, line := range fields {
		name := fieldName(line)
		_, value, _ := bytes.Cut(line, []byte(":"))
		switch strings.ToLower(name) {
		case "transfer-encoding":
			for _, c := range strings.Split(string(value), ",") {
				if c = strings.TrimSpace(c); c != "" {
					codings = append(codings, strings.ToLower(c))
				}
			}
		case "content-length":
			for _, v := range strings.Split(string(value), ",") {
				lengths = append(lengths, strings.TrimSpace(v))
			}
		}
	}
	switch {
	case len(codings) > 0 && te && codings[len(codings)-1] == "chunked":
		return chunked, 0
	case len(codings) > 0:
		return byClose, 0
	case len(lengths) == 0:
		return noBody, 0
	}
	n, err := strconv.ParseInt(lengths[0], 10, 64)
	if err != nil || n < 0 || lengths[0][0] == '+' {
		return byClose, 0
	}
	for _, v := range lengths[1:] {
		if v != lengths[0] {
			return byClose, 0
		}
	}
	return byLength, n
}

// relay copies one message body from src to dst as its bytes came in,
// reading only to find its end.
type relay struct {
	src *bufio.Reader
	dst *bufio.Writer
}

// line copies one line (a chunk size line, a trailer field), flushing
// what dst holds before src must wait for the network.
func (r relay) line() ([]byte, error) {
	if r.src.Buffered() == 0 {
		if err := r.dst.Flush(); err != nil {
			return nil, err
		}
	}
	var line []byte
	for {
		part, err := r.src.ReadSlice('\n')
		line = append(line, part...)
		if _, werr := r.dst.Write(part); werr != nil {
			return line, werr
		}
		if errors.Is(err, bufio.ErrBufferFull) && len(line) <= maxHead {
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return line, errHeadTooLarge
		}
		return line, err
	}
}

// n copies exactly n bytes.
func (r relay) n(n int64) error {
	if err := r.dst.Flush(); err != nil {
		return err
	}
	got, err := io.CopyN(r.dst, r.src, n)
	if err == nil {
		err = r.dst.Flush()
	}
	if got < n && err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// rest copies everything until src ends; its end is the message's end.
func (r relay) rest() error {
	if err := r.dst.Flush(); err != nil {
		return err
	}
	_, err := io.Copy(r.dst, r.src)
	if ferr := r.dst.Flush(); err == nil {
		err = ferr
	}
	return err
}

// chunks copies a chunked body: size lines (extensions and all), data,
// the last chunk and the trailer section. A size line it cannot read
// makes the rest of the stream the body (rest).
func (r relay) chunks() error {
	for {
		line, err := r.line()
		if err != nil {
			if errors.Is(err, errHeadTooLarge) {
				return r.rest()
			}
			return err
		}
		size, ok := chunkSize(line)
		if !ok {
			return r.rest()
		}
		if size == 0 {
			return r.trailers()
		}
		if err := r.n(size); err != nil {
			return err
		}
		if _, err := r.line(); err != nil { // the CRLF after the data
			return err
		}
	}
}

// trailers copies the trailer section up to its empty line.
func (r relay) trailers() error {
	for {
		line, err := r.line()
		if err != nil {
			return err
		}
		if string(line) == "\r\n" || string(line) == "\n" {
			return r.dst.Flush()
		}
	}
}

// chunkSize reads a chunk size line: hex digits, then optional
// whitespace and extensions.
func chunkSize(line []byte) (int64, bool) {
	s := strings.TrimRight(string(line), "\r\n")
	if i := strings.IndexAny(s, "; \t"); i >= 0 {
		s = s[:i]
	}
	if s == "" || len(s) > 15 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 16, 64)
	return n, err == nil && n >= 0
}

// body copies one body of framing f.
func (r relay) body(f framing, length int64) error {
	switch f {
	case byLength:
		return r.n(length)
	case chunked:
		return r.chunks()
	case byClose:
		return r.rest()
	}
	return r.dst.Flush()
}

// forward relays one absolute-form http:// request (head and parsed req,
// the rest of its bytes in br) to its origin, on a connection of its own
// dialled under the policy, and the origin's answer back to client, byte
// for byte; the origin's connection is then closed. It reports whether
// the client's connection may carry another request (keepClient). A
// request the policy refuses, or whose origin cannot be reached, gets no
// answer: the client's connection is closed (an HTTP status from the
// proxy would be recorded as the site's).
func (p *Proxy) forward(client net.Conn, br *bufio.Reader, head []byte, req *http.Request) (keep bool) {
	target := redactedURL(req.URL)
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	out, err := requestHead(head, req.URL.Host)
	if err != nil {
		p.answer(client, http.StatusBadRequest, nil, "archiveflow fetch proxy: "+err.Error())
		return false
	}
	end, err := p.turn(req.URL.String())
	if err != nil {
		return false // the caller closes the client's connection: no answer
	}
	defer end()
	origin, err := p.dial(p.ctx, "tcp", net.JoinHostPort(req.URL.Hostname(), port))
	if err != nil {
		var unreachable *UnreachableError
		switch denied, ok := DeniedBy(err); {
		case ok:
			p.report(target, denied.Decision, false)
		case errors.As(err, &unreachable):
			p.unreached(target, err)
		case errors.Is(err, context.Canceled):
		default:
			p.log.Debug("forwarded request failed", zap.String("target", target), zap.Error(err))
		}
		return false // the caller closes the client's connection: no answer
	}
	if !p.track(origin) {
		return false
	}
	// Client → origin: the head, then the body as framed by the request.
	// bodyDone says the client's request ended where its framing said, so
	// its connection is at the start of its next request.
	var wg sync.WaitGroup
	var bodyDone bool
	defer func() {
		p.untrack(origin)
		if keep {
			// End the goroutine's wait for more of the client's bytes.
			_ = client.SetReadDeadline(time.Now())
		} else {
			_ = client.Close()
		}
		wg.Wait()
		_ = client.SetReadDeadline(time.Time{})
		keep = keep && bodyDone
	}()
	toOrigin := bufio.NewWriterSize(origin, 16<<10)
	if _, err := toOrigin.Write(out); err != nil {
		return false
	}
	if err := toOrigin.Flush(); err != nil {
		return false
	}
	reqFraming, reqLength := noBody, int64(0)
	switch {
	case len(req.TransferEncoding) > 0:
		reqFraming = chunked
	case req.ContentLength > 0:
		reqFraming, reqLength = byLength, req.ContentLength
	}
	upgraded := make(chan struct{}) // closed on a 101: the client's bytes go on to the origin
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := (relay{src: br, dst: toOrigin}).body(reqFraming, reqLength); err != nil {
			_ = origin.Close()
			return
		}
		bodyDone = true
		// The client closing its connection (it gave up) ends the wait
		// for the answer. A request it pipelines waits for this answer.
		if _, err := br.Peek(1); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				_ = origin.Close()
			}
			return
		}
		select {
		case <-upgraded:
			bodyDone = false
			_, _ = io.Copy(origin, br)
			_ = origin.Close()
		default:
		}
	}()

	fromOrigin := bufio.NewReaderSize(origin, 32<<10)
	toClient := bufio.NewWriterSize(client, 32<<10)
	rel := relay{src: fromOrigin, dst: toClient}
	for answered := false; ; {
		rhead, err := readHead(fromOrigin)
		if len(rhead) > 0 && !answered {
			answered = true
			p.answered(target)
		}
		if _, werr := toClient.Write(rhead); werr != nil {
			return false
		}
		if err != nil {
			if len(rhead) > 0 {
				_ = rel.rest() // not a head that ends: the origin's bytes as they come
			} else {
				p.log.Debug("forwarded request got no answer", zap.String("target", target), zap.Error(err))
			}
			return false
		}
		status, f, length := responseFraming(rhead, req.Method)
		if status == http.StatusSwitchingProtocols {
			// Another protocol on the connection the policy allowed: a
			// splice until either side ends.
			close(upgraded)
			_ = rel.rest()
			return false
		}
		if err := rel.body(f, length); err != nil {
			return false
		}
		if status/100 != 1 {
			return f != byClose && keepsConnection(head, rhead, status)
		}
	}
}

// keepsConnection reports whether, after an answer whose end its framing
// showed, the client's connection may carry its next request: as with the
// origin itself, unless either side said close (HTTP/1.0 without
// keep-alive, Connection: close). After a 304 it is closed: fetchers that
// read a 304 without Content-Length to the connection's end (GNU Wget)
// stop waiting at once, and those that know it has no body open a new
// connection (or retry on one that closed, as curl, browsers and Go do).
func keepsConnection(reqHead, respHead []byte, status int) bool {
	if status == http.StatusNotModified {
		return false
	}
	for _, head := range [][]byte{reqHead, respHead} {
		lines := headLines(head)
		// HTTP/1.0 in a request line ends it, in a status line starts it.
		http10 := bytes.Contains(lines[0], []byte("HTTP/1.0"))
		keepAlive, closes := false, false
		for _, line := range lines[1 : len(lines)-1] {
			if !strings.EqualFold(fieldName(line), "Connection") && !strings.EqualFold(fieldName(line), "Proxy-Connection") {
				continue
			}
			_, value, _ := bytes.Cut(line, []byte(":"))
			for _, opt := range strings.Split(string(value), ",") {
				switch strings.ToLower(strings.TrimSpace(opt)) {
				case "close":
					closes = true
				case "keep-alive":
					keepAlive = true
				}
			}
		}
		if closes || (http10 && !keepAlive) {
			return false
		}
	}
	return true
}
