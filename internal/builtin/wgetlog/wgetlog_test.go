package wgetlog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A log of GNU Wget 1.21 (LC_ALL=C, --progress=dot:giga, -p -r) with a
// page, a stylesheet, a 404, a redirect, a 500 and a refused connection.
const sampleLog = `Opening WARC file 'warc/archive.warc.gz'.

--2026-11-22 06:25:50--  http://127.0.0.1:18765/
Connecting to 127.0.0.1:18765... connected.
HTTP request sent, awaiting response... 200 OK
Length: 160 [text/html]
Saving to: '127.0.0.1:18765/index.html'

     0K                                                       100% 21.7M=0s

2026-11-22 06:25:50 (21.7 MB/s) - '127.0.0.1:18765/index.html' saved [160/160]

--2026-11-22 06:25:50--  http://127.0.0.1:18765/s.css
Reusing existing connection to 127.0.0.1:18765.
HTTP request sent, awaiting response... 200 OK
Length: 12345 (12K) [text/css]
Saving to: '127.0.0.1:18765/s.css'

2026-11-22 06:25:50 (1.16 MB/s) - '127.0.0.1:18765/s.css' saved [12345/12345]

--2026-11-22 06:25:50--  http://127.0.0.1:18765/missing.png
Connecting to 127.0.0.1:18765... connected.
HTTP request sent, awaiting response... 404 File not found
Length: 19 [text/plain]

     0K                                                       100% 50.9M=0s

2026-11-22 06:25:50 ERROR 404: File not found.

--2026-11-22 06:25:50--  http://127.0.0.1:18765/moved
Reusing existing connection to 127.0.0.1:18765.
HTTP request sent, awaiting response... 302 Found
Location: /p2.html [following]
--2026-11-22 06:25:50--  http://127.0.0.1:18765/p2.html
Reusing existing connection to 127.0.0.1:18765.
HTTP request sent, awaiting response... 200 OK
Length: unspecified [text/html]
Saving to: '127.0.0.1:18765/p2.html'

2026-11-22 06:25:50 (1.92 MB/s) - '127.0.0.1:18765/p2.html' saved [11]

--2026-11-22 06:25:50--  http://127.0.0.1:18765/error
Reusing existing connection to 127.0.0.1:18765.
HTTP request sent, awaiting response... 500 Internal Server Error
2026-11-22 06:25:50 ERROR 500: Internal Server Error.

--2026-11-22 06:25:50--  http://127.0.0.1:1/x
Connecting to 127.0.0.1:1... failed: Connection refused.
--2026-11-22 06:25:51--  (try: 2)  http://127.0.0.1:18765/slow
Connecting to 127.0.0.1:18765... connected.
HTTP request sent, awaiting response... No data received.
Retrying.

FINISHED --2026-11-22 06:25:50--
Total wall clock time: 0.02s
Downloaded: 4 files, 180 in 0s (7.23 MB/s)
`

func TestParserSampleLog(t *testing.T) {
	var got []Fetch
	require.NoError(t, NewParser(func(f Fetch) { got = append(got, f) }).Scan(strings.NewReader(sampleLog)))
	want := []Fetch{
		{URL: "http://127.0.0.1:18765/", Status: 200, Bytes: 160, Saved: "127.0.0.1:18765/index.html", Type: "text/html", Code: CodeFinished},
		{URL: "http://127.0.0.1:18765/s.css", Status: 200, Bytes: 12345, Saved: "127.0.0.1:18765/s.css", Type: "text/css", Code: CodeFinished},
		{URL: "http://127.0.0.1:18765/missing.png", Status: 404, Bytes: 19, Type: "text/plain", Code: CodeFinished},
		{URL: "http://127.0.0.1:18765/moved", Status: 302, Code: CodeFinished},
		{URL: "http://127.0.0.1:18765/p2.html", Status: 200, Bytes: 11, Saved: "127.0.0.1:18765/p2.html", Type: "text/html", Code: CodeFinished},
		{URL: "http://127.0.0.1:18765/error", Status: 500, Code: CodeFinished},
		{URL: "http://127.0.0.1:1/x", Code: CodeNetworkError, Reason: "failed: Connection refused."},
		{URL: "http://127.0.0.1:18765/slow", Code: CodeNetworkError, Reason: "No data received."},
	}
	assert.Equal(t, want, got)
}

// A log of wget through an HTTP proxy (the fetch policy's): http:// says
// "Proxy request sent", a refused CONNECT "Proxy tunneling failed".
const proxyLog = `--2026-11-22 15:34:28--  http://127.0.0.1:32965/
Connecting to 127.0.0.1:36713... connected.
Proxy request sent, awaiting response... 200 OK
Length: 2 [text/plain]
Saving to: '127.0.0.1:32965/index.html'

     0K                                                       100%  245K=0s

2026-11-22 15:34:28 (245 KB/s) - '127.0.0.1:32965/index.html' saved [2/2]

--2026-11-22 15:34:28--  http://169.254.169.254/latest/meta-data/
Connecting to 127.0.0.1:36713... connected.
Proxy request sent, awaiting response... 403 Forbidden
2026-11-22 15:34:28 ERROR 403: Forbidden.

--2026-11-22 15:34:28--  https://127.0.0.1:1/x
Connecting to 127.0.0.1:36713... connected.
Proxy tunneling failed: ForbiddenUnable to establish SSL connection.
`

func TestParserProxyLog(t *testing.T) {
	var got []Fetch
	require.NoError(t, NewParser(func(f Fetch) { got = append(got, f) }).Scan(strings.NewReader(proxyLog)))
	assert.Equal(t, []Fetch{
		{URL: "http://127.0.0.1:32965/", Status: 200, Bytes: 2, Saved: "127.0.0.1:32965/index.html", Type: "text/plain", Code: CodeFinished},
		{URL: "http://169.254.169.254/latest/meta-data/", Status: 403, Code: CodeFinished},
		{URL: "https://127.0.0.1:1/x", Code: CodeNetworkError, Reason: "Proxy tunneling failed: ForbiddenUnable to establish SSL connection."},
	}, got)
}

func TestParserStreamsAndFlushesAtClose(t *testing.T) {
	var got []Fetch
	p := NewParser(func(f Fetch) { got = append(got, f) })
	p.Line("--2026-11-22 06:25:50--  http://h/a")
	p.Line("HTTP request sent, awaiting response... 200 OK")
	assert.Empty(t, got, "not complete before its saved line")
	p.Line("--2026-11-22 06:25:50--  http://h/b")
	require.Len(t, got, 1, "a new request completes the previous one")
	assert.Equal(t, 200, got[0].Status)
	p.Close()
	require.Len(t, got, 2, "Close reports the request in progress")
	assert.Equal(t, Fetch{URL: "http://h/b", Code: CodeNetworkError, Reason: "no response"}, got[1])
}

func TestParserIgnoresNoise(t *testing.T) {
	var got []Fetch
	p := NewParser(func(f Fetch) { got = append(got, f) })
	for _, l := range []string{"", "Opening WARC file 'x'.", "HTTP request sent, awaiting response... 200 OK", "Length: 5 [text/html]", "     0K   100%"} {
		p.Line(l)
	}
	p.Close()
	assert.Empty(t, got, "lines outside a request are ignored")
}

// BenchmarkParser measures parsing throughput of a realistic log (the
// sample repeated); wget's log must never be the bottleneck of a crawl.
func BenchmarkParser(b *testing.B) {
	log := strings.Repeat(sampleLog, 100)
	b.SetBytes(int64(len(log)))
	n := 0
	for b.Loop() {
		p := NewParser(func(Fetch) { n++ })
		if err := p.Scan(strings.NewReader(log)); err != nil {
			b.Fatal(err)
		}
	}
}
