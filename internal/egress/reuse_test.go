package egress

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
)

// reuseFetch is one fetch of TestRecordingTransportKeepsEachExchangeApart:
// method and target, and how much of the body the fetcher reads (-1: to
// its end; else that many bytes, then it closes the body early).
type reuseFetch struct {
	method, target string
	read           int64
}

// reuseSite is n of each kind of answer, every one with a body (or head)
// of its own, and the fetches that ask for them.
func reuseSite(n int) (map[string]egresstest.Answer, []reuseFetch) {
	answers := map[string]egresstest.Answer{}
	var fetches []reuseFetch
	add := func(target, method string, read int64, a egresstest.Answer) {
		answers[target] = a
		fetches = append(fetches, reuseFetch{method: method, target: target, read: read})
	}
	withLength := func(head string, body []byte) []byte {
		return append([]byte(head+"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"), body...)
	}
	for i := range n {
		// A body of its own, long enough to take several reads.
		own := func(kind string) []byte {
			return []byte(strings.Repeat(fmt.Sprintf("%s %d of %d; ", kind, i, n), 200))
		}
		add(fmt.Sprintf("/length-%d", i), http.MethodGet, -1, egresstest.Answer{
			Bytes: withLength("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n", own("length"))})
		chunks := own("chunked")
		add(fmt.Sprintf("/chunked-%d", i), http.MethodGet, -1, egresstest.Answer{Bytes: fmt.Appendf(nil,
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x;n=%d\r\n%s\r\n%x\r\n%s\r\n0\r\nX-Sum: %d\r\n\r\n",
			100, i, chunks[:100], len(chunks)-100, chunks[100:], i)})
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(own("gzip"))
		_ = zw.Close()
		add(fmt.Sprintf("/gzip-%d", i), http.MethodGet, -1, egresstest.Answer{
			Bytes: withLength("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n", gz.Bytes())})
		add(fmt.Sprintf("/head-%d", i), http.MethodHead, -1, egresstest.Answer{Bytes: fmt.Appendf(nil,
			"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Id: head %d\r\n\r\n", 5000+i, i)})
		add(fmt.Sprintf("/not-modified-%d", i), http.MethodGet, -1, egresstest.Answer{Bytes: fmt.Appendf(nil,
			"HTTP/1.1 304 Not Modified\r\nETag: \"%d\"\r\n\r\n", i)})
		add(fmt.Sprintf("/no-content-%d", i), http.MethodGet, -1, egresstest.Answer{Bytes: fmt.Appendf(nil,
			"HTTP/1.1 204 No Content\r\nX-Id: no content %d\r\n\r\n", i)})
		// A redirect is read to its end and its connection goes on to the
		// next fetch, its target's or another's.
		add(fmt.Sprintf("/redirect-%d", i), http.MethodGet, -1, egresstest.Answer{
			Bytes: withLength(fmt.Sprintf("HTTP/1.1 301 Moved Permanently\r\nLocation: /length-%d\r\n", i), own("moved"))})
		// Closed early: a fetcher's limit.
		add(fmt.Sprintf("/early-%d", i), http.MethodGet, 10, egresstest.Answer{
			Bytes: withLength("HTTP/1.1 200 OK\r\n", own("early"))})
		// The origin closes the connection after its answer without
		// saying so: the pooled connection is dead.
		add(fmt.Sprintf("/closes-%d", i), http.MethodGet, -1, egresstest.Answer{Close: true,
			Bytes: withLength("HTTP/1.1 200 OK\r\n", own("closes"))})
	}
	return answers, fetches
}

// TestRecordingTransportKeepsEachExchangeApart: fetches of one host
// through one RecordingTransport, many at once on few kept-alive
// connections, each record exactly their own exchange: the request as
// the origin received it and the answer as the origin wrote it, nothing
// of another fetch's, whatever the answer (a body read to its end or
// closed early, HEAD, 304, 204, chunked with a trailer, gzip, a
// redirect, an origin closing the connection after its answer), dialled
// directly and through the fetch proxy's tunnel. net/http pools a
// connection as soon as an answer's body is read, before the fetcher
// takes its recording: another fetch then starts on it at once.
func TestRecordingTransportKeepsEachExchangeApart(t *testing.T) {
	answers, fetches := reuseSite(25)
	for name, base := range fetchTransports(t) {
		t.Run(name, func(t *testing.T) {
			origin := egresstest.NewOrigin(t, answers)
			// Few connections for many fetchers: a connection an answer
			// leaves goes to a waiting fetch at once.
			base.MaxConnsPerHost = 3
			rt := RecordingTransport(base)
			defer rt.CloseIdleConnections()
			// A redirect is followed as pagefetch does: a fetch of its own.
			c := &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			todo := make(chan reuseFetch)
			var wg sync.WaitGroup
			for range 12 {
				wg.Go(func() {
					for f := range todo {
						checkReuseFetch(t, c, origin, f, answers[f.target].Bytes)
					}
				})
			}
			for _, i := range rand.Perm(len(fetches)) {
				todo <- fetches[i]
			}
			close(todo)
			wg.Wait()
			// Every /early- and /closes- answer ends its connection.
			assert.Less(t, origin.Connections(), len(fetches)/2, "connections are reused")
		})
	}
}

// checkReuseFetch makes fetch f with c and checks what its exchange
// recorded against the origin's request and answer.
func checkReuseFetch(t *testing.T, c *http.Client, origin *egresstest.Origin, f reuseFetch, answer []byte) {
	// GotConn again (a request net/http retries on a new connection when
	// the pooled one was closed) begins the exchange anew.
	var ex *Exchange
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) { ex = StartExchange(ci.Conn) },
	})
	req, err := http.NewRequestWithContext(ctx, f.method, origin.URL(f.target), nil)
	if !assert.NoError(t, err) {
		return
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := c.Do(req)
	if !assert.NoError(t, err, f.target) {
		return
	}
	var body []byte
	if f.read < 0 {
		body, err = io.ReadAll(resp.Body)
	} else {
		body, err = io.ReadAll(io.LimitReader(resp.Body, f.read))
	}
	assert.NoError(t, err, f.target)
	_ = resp.Body.Close()
	if !assert.NotNil(t, ex, f.target) {
		return
	}
	sent, received := ex.Take()
	assert.NotContains(t, string(sent), "\r\nConnection:", "%s: the request as sent", f.target)
	got := origin.Received(f.target)
	if assert.Len(t, got, 1, "%s: asked once", f.target) {
		assert.Equal(t, string(got[0]), string(sent), "%s: the request as the origin received it", f.target)
	}
	msg, payload, _ := ResponseMessage(received, f.method, f.read)
	want := answer
	if f.read >= 0 {
		want = answer[:bytes.Index(answer, []byte("\r\n\r\n"))+4+int(f.read)]
	}
	assert.Equal(t, string(want), string(msg), "%s: the answer as the origin wrote it", f.target)
	assert.True(t, bytes.HasPrefix(received, want), "%s: nothing before the answer", f.target)
	assert.Equal(t, string(body), string(payload), "%s: the payload is the body read", f.target)
}

// BenchmarkRecordingTransport: a recorded fetch of a 10 kB page from a
// loopback origin, each exchange taken as pagefetch takes it, with
// connections kept alive and with one request per connection (the
// withdrawn design's cost: a TCP connection per fetch, both ends in this
// process); cpu-µs/op is the whole process's CPU (fetcher and origin)
// per fetch. docs/benchmarks.md §30.
func BenchmarkRecordingTransport(b *testing.B) {
	body := strings.Repeat("x", 10<<10)
	origin := egresstest.NewOrigin(b, map[string]egresstest.Answer{"/page": {
		Bytes: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)}})
	for _, keepAlive := range []bool{true, false} {
		name := "keep-alive"
		if !keepAlive {
			name = "connection-per-request"
		}
		b.Run(name, func(b *testing.B) {
			rt := RecordingTransport(Transport(nil))
			rt.DisableKeepAlives = !keepAlive
			defer rt.CloseIdleConnections()
			c := &http.Client{Transport: rt}
			cpu := processCPU()
			for b.Loop() {
				var ex *Exchange
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GotConn: func(ci httptrace.GotConnInfo) { ex = StartExchange(ci.Conn) },
				})
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL("/page"), nil)
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				_, received := ex.Take()
				if _, payload, _ := ResponseMessage(received, http.MethodGet, -1); len(payload) != len(body) {
					b.Fatalf("payload of %d bytes", len(payload))
				}
			}
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
