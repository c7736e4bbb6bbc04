package egresstest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Answer is what an Origin writes for one request-target: exactly Bytes,
// then, when Close, it closes the connection (a close-delimited body, or
// an HTTP/1.0 server that never keeps a connection).
type Answer struct {
	Bytes []byte
	Close bool
}

// Origin is an HTTP origin written on raw TCP for byte-level tests: it
// answers each request with the exact bytes a test chose (no HTTP library
// re-serialises them) and keeps the exact bytes of every request it
// received (head, and a Content-Length body). An unknown target gets a
// 404. Connections are kept alive unless the answer closes them.
type Origin struct {
	// Addr is 127.0.0.1:PORT.
	Addr    string
	answers map[string]Answer

	mu       sync.Mutex
	received map[string][][]byte // request-target → each request's bytes, in order
	conns    int
}

// NewOrigin listens on a free loopback port until tb ends. answers maps a
// request-target in origin-form (path and query, as the request line
// spells it) to its answer.
func NewOrigin(tb testing.TB, answers map[string]Answer) *Origin {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("egresstest: origin listen: %v", err)
	}
	o := &Origin{Addr: ln.Addr().String(), answers: answers, received: map[string][][]byte{}}
	var wg sync.WaitGroup
	done := make(chan struct{})
	// The accept loop counts in wg too, so a connection it adds comes
	// before cleanup's Wait can see no one left.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			o.mu.Lock()
			o.conns++
			o.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				o.serve(c, done)
			}()
		}
	}()
	tb.Cleanup(func() {
		close(done)
		_ = ln.Close()
		wg.Wait()
	})
	return o
}

// URL is http://ADDR followed by target.
func (o *Origin) URL(target string) string { return "http://" + o.Addr + target }

// Received returns the bytes of every request for target so far.
func (o *Origin) Received(target string) [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([][]byte(nil), o.received[target]...)
}

// Connections is how many connections the origin accepted so far.
func (o *Origin) Connections() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.conns
}

func (o *Origin) serve(c net.Conn, done <-chan struct{}) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-done:
		case <-stop:
		}
		_ = c.Close()
	}()
	br := bufio.NewReader(c)
	for {
		req, target, err := readRequest(br)
		if err != nil {
			return
		}
		o.mu.Lock()
		o.received[target] = append(o.received[target], req)
		o.mu.Unlock()
		a, ok := o.answers[target]
		if !ok {
			a = Answer{Bytes: []byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")}
		}
		if _, err := c.Write(a.Bytes); err != nil || a.Close {
			return
		}
	}
}

// readRequest reads one request's exact bytes: the head up to its empty
// line and a Content-Length body. target is the request line's
// request-target.
func readRequest(br *bufio.Reader) (raw []byte, target string, err error) {
	var buf bytes.Buffer
	length := int64(0)
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, "", err
		}
		buf.Write(line)
		s := strings.TrimRight(string(line), "\r\n")
		if first {
			parts := strings.Split(s, " ")
			if len(parts) != 3 {
				return nil, "", fmt.Errorf("request line %q", s)
			}
			target = parts[1]
			continue
		}
		if s == "" {
			break
		}
		if name, value, ok := strings.Cut(s, ":"); ok && strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			if length, err = strconv.ParseInt(strings.TrimSpace(value), 10, 64); err != nil {
				return nil, "", fmt.Errorf("content-length %q", value)
			}
		}
	}
	if _, err := io.CopyN(&buf, br, length); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), target, nil
}

// The request-targets of UnusualAnswers.
const (
	PathHTTP10     = "/"             // HTTP/1.0, lower-case names, close-delimited HTML linking the others
	PathDuplicates = "/duplicates"   // two Set-Cookie, odd order and case
	PathChunked    = "/chunked"      // chunked with extensions
	PathTrailer    = "/trailer"      // chunked with a trailer field
	PathGzip       = "/gzip.js"      // Content-Encoding: gzip
	PathNotMod     = "/not-modified" // 304
	PathPartial    = "/partial"      // 206 with Content-Range
	PathNoContent  = "/no-content"   // 204
)

// UnusualAnswers are valid HTTP answers a re-serialising proxy alters:
// the page at PathHTTP10 links every other one as a requisite (wget
// --page-requisites fetches them all).
func UnusualAnswers() map[string]Answer {
	page := `<!DOCTYPE html><html><head><title>unusual</title>
<link rel="stylesheet" href="/not-modified">
<script src="/gzip.js"></script>
</head><body><p>an HTTP/1.0 origin
<img src="/duplicates"><img src="/chunked"><img src="/trailer"><img src="/partial"><img src="/no-content">
</body></html>
`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(strings.Repeat("console.log('compressed');\n", 20)))
	_ = zw.Close()
	return map[string]Answer{
		PathHTTP10: {Close: true, Bytes: []byte("HTTP/1.0 200 OK\r\n" +
			"server: SimpleHTTP/0.6 Python/3.11.2\r\n" +
			"date: Mon, 02 Jun 2025 10:00:00 GMT\r\n" +
			"Content-type: text/html\r\n" +
			"x-ZZ-first: 1\r\n" +
			"\r\n" + page)},
		PathDuplicates: {Bytes: []byte("HTTP/1.1 200 OK\r\n" +
			"Set-Cookie: a=1; Path=/\r\n" +
			"zeta: last-alphabetically\r\n" +
			"Set-Cookie: b=2; Path=/\r\n" +
			"content-length: 5\r\n" +
			"X-Dup: one\r\n" +
			"alpha:no-space\r\n" +
			"X-Dup: two\r\n" +
			"Content-Type: image/gif\r\n" +
			"\r\n" + "dupes")},
		PathChunked: {Bytes: []byte("HTTP/1.1 200 OK\r\n" +
			"Content-Type: image/png\r\n" +
			"transfer-encoding: chunked\r\n" +
			"\r\n" +
			"5;ext=1\r\nhello\r\n" +
			"A ; name=\"quoted value\";flag\r\n, chunked!\r\n" +
			"0;last=yes\r\n" +
			"\r\n")},
		PathTrailer: {Bytes: []byte("HTTP/1.1 200 OK\r\n" +
			"Content-Type: image/png\r\n" +
			"Transfer-Encoding: chunked\r\n" +
			"Trailer: X-Checksum\r\n" +
			"\r\n" +
			"3\r\nabc\r\n" +
			"0\r\n" +
			"X-Checksum: 42\r\n" +
			"\r\n")},
		PathGzip: {Bytes: append([]byte("HTTP/1.1 200 OK\r\n"+
			"Content-Type: application/javascript\r\n"+
			"Content-Encoding: gzip\r\n"+
			"Vary: Accept-Encoding\r\n"+
			"Content-Length: "+strconv.Itoa(gz.Len())+"\r\n"+
			"\r\n"), gz.Bytes()...)},
		PathNotMod: {Bytes: []byte("HTTP/1.1 304 Not Modified\r\n" +
			"ETag: \"v1\"\r\n" +
			"cache-control: max-age=60\r\n" +
			"\r\n")},
		PathPartial: {Bytes: []byte("HTTP/1.1 206 Partial Content\r\n" +
			"Content-Range: bytes 0-4/12\r\n" +
			"Content-Length: 5\r\n" +
			"Content-Type: image/gif\r\n" +
			"\r\n" + "GIF89")},
		PathNoContent: {Bytes: []byte("HTTP/1.1 204 No Content\r\n" +
			"x-why: nothing\r\n" +
			"\r\n")},
	}
}

// PathChunkExtensions is ChunkExtensions' request-target (not in
// UnusualAnswers).
const PathChunkExtensions = "/chunk-extensions"

// ChunkExtensions is a chunked answer with chunk extensions (a quoted
// value, a name without a value) and a trailer field, without the
// whitespace before ";" of PathChunked's, which net/http's client does not
// read ("invalid byte in chunk length"): the chunked answer a Go fetcher
// is tested with.
func ChunkExtensions() Answer {
	return Answer{Bytes: []byte("HTTP/1.1 200 OK\r\n" +
		"content-type: text/plain\r\n" +
		"Transfer-Encoding: chunked\r\n" +
		"\r\n" +
		"5;ext=1\r\nhello\r\n" +
		"a;name=\"quoted value\";flag\r\n, chunked!\r\n" +
		"0;last=yes\r\n" +
		"X-Sum: 1\r\n" +
		"\r\n")}
}

// WgetRecords is what GNU Wget (1.21) writes to its WARC as the response
// block of an answer of UnusualAnswers it read whole: the answer itself,
// except where wget's own reading stops short, the same when it fetches
// without a proxy: it writes no response record for a 204, and of a
// trailer section it reads (and records) one line only, never the empty
// line that ends it.
func WgetRecords(target string, answer []byte) (want []byte, recorded bool) {
	switch target {
	case PathNoContent:
		return nil, false
	case PathTrailer:
		return bytes.TrimSuffix(answer, []byte("\r\n")), true
	}
	return answer, true
}

// AsForwarded is a request as a fetcher sent it to the fetch proxy
// (absolute-form, e.g. as wget records it) with its request-target in the
// origin-form the proxy sends the origin at addr.
func AsForwarded(req []byte, addr string) []byte {
	return bytes.Replace(req, []byte(" http://"+addr), []byte(" "), 1)
}
