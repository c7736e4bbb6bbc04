package builtin

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// wireRecords runs pagefetch for u with environment kv in a directory of
// its own and returns its WARC's request and response records by target
// (their path), each once, and the response records' fields.
func wireRecords(t *testing.T, u string, kv map[string]string) (requests, responses map[string][]byte, fields map[string]warc.Header) {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	var out, errb bytes.Buffer
	kv["PAGEFETCH_ENABLED"] = "True"
	code := Run(context.Background(), []string{"pagefetch", "--url=" + u}, env(kv), &out, &errb)
	require.Equal(t, ExitOK, code, errb.String())
	require.Contains(t, out.String(), `"status":"succeeded"`, errb.String())
	data, err := os.ReadFile(filepath.Join(dir, PageFetchWARC))
	require.NoError(t, err)
	requests, responses, fields = map[string][]byte{}, map[string][]byte{}, map[string]warc.Header{}
	ids := map[string]string{}
	require.NoError(t, warc.Read(bytes.NewReader(data), func(h warc.Header, block io.Reader) error {
		if h.Type == "warcinfo" {
			return nil
		}
		b, err := io.ReadAll(block)
		require.NoError(t, err)
		target, err := url.Parse(h.TargetURI)
		require.NoError(t, err)
		switch h.Type {
		case "request":
			assert.NotContains(t, requests, target.Path, "one request record per target")
			requests[target.Path] = b
			ids[target.Path] = h.ID
		case "response":
			assert.NotContains(t, responses, target.Path, "one response record per target")
			responses[target.Path] = b
			fields[target.Path] = h
			assert.Equal(t, []string{ids[target.Path]}, h.ConcurrentTo, target.Path)
		}
		return nil
	}))
	return requests, responses, fields
}

// TestPageFetchRecordsTheWire: pagefetch's WARC records are the bytes on
// the wire (issue 23): against a raw TCP origin (egresstest.NewOrigin)
// sending valid but unusual HTTP (egresstest.UnusualAnswers: HTTP/1.0
// close-delimited with lower-case fields, duplicate fields, chunk
// extensions and a trailer, gzip, 304, 206, 204), each response block is
// the origin's bytes, byte for byte, and each request block what the
// origin received, whether pagefetch dials itself (the policy in the
// process, as inside the worker) or through the attempt's fetch proxy (a
// hook process: a CONNECT tunnel per connection). Inside the worker
// connections are kept alive across fetches and pages; through the proxy
// each fetch has a tunnel of its own (the proxy takes the host's turn per
// connection). The payload digest is
// over the body without its transfer coding; WARC-IP-Address is kept.
// PathChunked has whitespace before a chunk extension's ";" (valid, and
// refused by net/http's own chunked reader): it is read and recorded as
// sent like the rest.
func TestPageFetchRecordsTheWire(t *testing.T) {
	answers := egresstest.UnusualAnswers()
	answers[egresstest.PathChunkExtensions] = egresstest.ChunkExtensions()
	origin := egresstest.NewOrigin(t, answers)
	pol, err := netpolicy.Parse(nil)
	require.NoError(t, err)
	proxy, err := egress.Start(egress.Options{Policy: pol})
	require.NoError(t, err)
	defer proxy.Close()

	var want []string
	for target := range answers {
		want = append(want, target)
	}
	sort.Strings(want)
	for name, kv := range map[string]map[string]string{
		"direct": {egress.EnvDeny: "[]"},
		"tunnel": {egress.EnvDeny: "[]", egress.EnvProxy: proxy.URL()},
	} {
		requests, responses, fields := map[string][]byte{}, map[string][]byte{}, map[string]warc.Header{}
		before, fetches := origin.Connections(), 0
		for _, page := range []string{egresstest.PathHTTP10, egresstest.PathChunkExtensions} {
			req, resp, f := wireRecords(t, origin.URL(page), maps.Clone(kv))
			fetches += len(req)
			for k, v := range req {
				requests[k] = v
			}
			for k, v := range resp {
				responses[k] = v
				fields[k] = f[k]
			}
		}
		var got []string
		for target := range responses {
			got = append(got, target)
		}
		sort.Strings(got)
		require.Equal(t, want, got, "%s: a response record for each answer", name)
		if name == "direct" {
			assert.Less(t, origin.Connections()-before, fetches, "direct: connections kept alive across fetches and pages")
		} else {
			assert.Equal(t, fetches, origin.Connections()-before, "tunnel: one request per tunnel (the proxy's turn per connection)")
		}
		for _, target := range want {
			received := origin.Received(target)
			require.NotEmpty(t, received, target)
			assert.Equal(t, string(received[len(received)-1]), string(requests[target]), "%s %s: the request block is what the origin received", name, target)
			assert.Equal(t, string(answers[target].Bytes), string(responses[target]), "%s %s: the response block is what the origin wrote", name, target)
			_, payload, _ := egress.ResponseMessage(answers[target].Bytes, http.MethodGet, -1)
			h := fields[target]
			assert.Equal(t, warc.Digest(payload), h.Get("WARC-Payload-Digest"), "%s %s", name, target)
			assert.Equal(t, "127.0.0.1", h.Get("WARC-IP-Address"), "%s %s", name, target)
			assert.Empty(t, h.Get("WARC-Truncated"), "%s %s", name, target)
		}
	}
}

// TestPageFetchCutsTheWireRecordAtTheLimit: a body over the limit is
// recorded as the origin's bytes up to the limit-th byte of the body,
// chunk framing included, WARC-Truncated: length, the payload digest over
// the bytes kept.
func TestPageFetchCutsTheWireRecordAtTheLimit(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunk := strings.Repeat("x", 1000)
	var b strings.Builder
	b.WriteString(head)
	for range 3 {
		b.WriteString("3e8;n=v\r\n" + chunk + "\r\n")
	}
	b.WriteString("0\r\n\r\n")
	origin := egresstest.NewOrigin(t, map[string]egresstest.Answer{"/big": {Bytes: []byte(b.String())}})
	_, responses, fields := wireRecords(t, origin.URL("/big"), map[string]string{egress.EnvDeny: "[]", maxBytesKey: "1500"})
	want := head + "3e8;n=v\r\n" + chunk + "\r\n3e8;n=v\r\n" + chunk[:500]
	assert.Equal(t, want, string(responses["/big"]))
	assert.Equal(t, "length", fields["/big"].Get("WARC-Truncated"))
	assert.Equal(t, warc.Digest([]byte(strings.Repeat("x", 1500))), fields["/big"].Get("WARC-Payload-Digest"))
}

// TestRecordedFetchersShareConnectionsAndKeepTheirOwnRecords: many
// RecordedFetcher.Get at once on one host through one recording transport
// (as a worker's pages share its cached transport), on few kept-alive
// connections: each fetch's WARC holds exactly its own request, as the
// origin received it, and its own answer, as the origin wrote it (each
// body is its URL's own). With the recording per connection, a fetch
// whose connection went back to the pool at its answer's end lost its
// bytes to the next fetch there (a page missing from its crawl's WARC).
func TestRecordedFetchersShareConnectionsAndKeepTheirOwnRecords(t *testing.T) {
	answers := map[string]egresstest.Answer{}
	var targets []string
	for i := range 60 {
		body := strings.Repeat("page "+strconv.Itoa(i)+" ", 300)
		target := "/p" + strconv.Itoa(i)
		a := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		if i%2 == 1 {
			a = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
		}
		answers[target] = egresstest.Answer{Bytes: []byte(a)}
		targets = append(targets, target)
	}
	origin := egresstest.NewOrigin(t, answers)
	pol, err := netpolicy.Parse(nil)
	require.NoError(t, err)
	base := egress.Transport(pol)
	base.MaxConnsPerHost = 2
	transport := egress.RecordingTransport(base)
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	var wg sync.WaitGroup
	for _, target := range targets {
		wg.Go(func() {
			var file bytes.Buffer
			rf := RecordedFetcher{Client: client, WARC: warc.NewWriter(&file), Log: zap.NewNop()}
			_, err := rf.Get(context.Background(), origin.URL(target), 1<<20)
			if !assert.NoError(t, err, target) {
				return
			}
			got := map[string]string{}
			assert.NoError(t, warc.Read(&file, func(h warc.Header, block io.Reader) error {
				b, err := io.ReadAll(block)
				got[h.Type] = string(b)
				assert.Equal(t, origin.URL(target), h.TargetURI)
				return err
			}))
			if received := origin.Received(target); assert.Len(t, received, 1, target) {
				assert.Equal(t, string(received[0]), got["request"], "%s: the request as the origin received it", target)
			}
			assert.Equal(t, string(answers[target].Bytes), got["response"], "%s: the answer as the origin wrote it", target)
		})
	}
	wg.Wait()
	assert.Less(t, origin.Connections(), len(targets)/4, "connections are reused")
}
