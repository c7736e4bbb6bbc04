package plugins_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// served is one request the test site answered.
type served struct {
	Path     string // URL path
	RawQuery string
	Status   int
	Bytes    int64
	UA       string
}

// site is a small multi-page web site: pages, CSS, images, a redirect, a
// 404, a 500 and non-ASCII text. It records every request it answers.
type site struct {
	*httptest.Server
	mu      sync.Mutex
	log     []served
	hold    chan struct{} // /slow.css blocks until it is closed, once held is set
	held    atomic.Bool   // set by a test before the request it holds
	waiting atomic.Int32  // requests blocked on hold
}

// holding reports whether a request is blocked on hold.
func (s *site) holding() bool { return s.waiting.Load() > 0 }

const (
	siteTitle = "Archiveflow Test Site — Ünïcödé"
	siteText  = "Größe: 日本語のテキスト"
)

// a 1×1 PNG
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

var indexHTML = `<!DOCTYPE html>
<html><head><meta charset="utf-8">
<title>` + siteTitle + `</title>
<link rel="stylesheet" href="/style.css">
<link rel="icon" href="/icons/fav.png">
</head><body>
<h1>Welcome</h1>
<p>` + siteText + `</p>
<script>document.write("scripted text must not be extracted")</script>
<img src="/img/logo.png" alt="logo">
<img src="/missing.png" alt="gone">
<script src="/error.js"></script>
<ul>
<li><a href="/page2.html">Page two</a></li>
<li><a href="redirect#frag">Moved page</a></li>
<li><a href="/missing">Missing</a></li>
<li><a href="/error">Broken</a></li>
<li><a href="/ignored.html">Ignored</a></li>
<li><a href="https://example.org/elsewhere?x=1">Elsewhere</a></li>
<li><a href="mailto:someone@example.org">Mail</a></li>
</ul>
</body></html>
`

var page2HTML = `<!DOCTYPE html><html><head><meta charset="utf-8"><title>Page two</title></head>
<body><p>Second page</p><a href="/">home</a></body></html>
`

func newSite(t *testing.T) *site {
	s := &site{hold: make(chan struct{})}
	mux := http.NewServeMux()
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(body))
		}
	}
	mux.HandleFunc("/{$}", page(indexHTML))
	mux.HandleFunc("/page2.html", page(page2HTML))
	mux.HandleFunc("/ignored.html", page("<html><body>ignored</body></html>"))
	mux.HandleFunc("/data", page("<html><head><title>data</title></head><body>data</body></html>"))
	mux.HandleFunc("/style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		_, _ = w.Write([]byte("body{background:url(/img/bg.png)}\n"))
	})
	img := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(pngBytes)
	}
	mux.HandleFunc("/img/logo.png", img)
	mux.HandleFunc("/img/bg.png", img)
	mux.HandleFunc("/icons/fav.png", img)
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/page2.html", http.StatusFound)
	})
	mux.HandleFunc("/error", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests", http.StatusTooManyRequests)
	})
	mux.HandleFunc("/report.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/zip")
		_, _ = w.Write([]byte("PK\x03\x04"))
	})
	mux.HandleFunc("/error.js", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<html><head><title>slow</title><link rel="stylesheet" href="/slow.css"></head><body>slow</body></html>`))
	})
	mux.HandleFunc("/slow.css", func(w http.ResponseWriter, r *http.Request) {
		if s.held.Load() {
			s.waiting.Add(1)
			select {
			case <-s.hold:
			case <-r.Context().Done():
			}
			s.waiting.Add(-1)
		}
		_, _ = w.Write([]byte("body{}"))
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		mux.ServeHTTP(rec, r)
		s.mu.Lock()
		s.log = append(s.log, served{Path: r.URL.Path, RawQuery: r.URL.RawQuery, Status: rec.status, Bytes: rec.bytes, UA: r.UserAgent()})
		s.mu.Unlock()
	}))
	t.Cleanup(func() {
		select {
		case <-s.hold:
		default:
			close(s.hold)
		}
		s.Close()
	})
	return s
}

// requests returns the requests made with user agent ua.
func (s *site) requests(ua string) []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []served
	for _, r := range s.log {
		if r.UA == ua {
			out = append(out, r)
		}
	}
	return out
}

// paths returns "STATUS PATH" of each request made with user agent ua.
func (s *site) paths(ua string) []string {
	var out []string
	for _, r := range s.requests(ua) {
		out = append(out, fmt.Sprintf("%d %s", r.Status, r.Path))
	}
	return out
}

func (s *site) has(ua, path string) bool {
	for _, r := range s.requests(ua) {
		if r.Path == path {
			return true
		}
	}
	return false
}

type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// userAgent is a per-test user agent, so the site can tell which hook asked.
func userAgent(t *testing.T, hook string) string {
	return "archiveflow-test/" + strings.ReplaceAll(t.Name(), "/", "-") + "/" + hook
}
