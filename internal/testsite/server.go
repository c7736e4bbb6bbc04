package testsite

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSlowDelay is how long a KindSlow page takes when Options.SlowDelay
// is zero.
const DefaultSlowDelay = 150 * time.Millisecond

// Options tune a Server.
type Options struct {
	// SlowDelay is how long KindSlow pages wait before answering; zero means
	// DefaultSlowDelay, negative means no wait.
	SlowDelay time.Duration
}

// Request is one request the server answered.
type Request struct {
	Time      time.Time // when it arrived
	Method    string
	URL       string // absolute: base of the host it arrived on + path and query
	UserAgent string
	Status    int
	Kind      Kind // KindUnknown for URLs that are not part of the site
	Bytes     int  // body bytes written
}

// Server serves a Site on two loopback listeners on free ports: the main
// host (127.0.0.1) and the other host (127.0.0.2, or "localhost" on
// 127.0.0.1 where 127.0.0.2 cannot be bound). It logs every request.
type Server struct {
	site  *Site
	bases [2]string
	srvs  [2]*http.Server
	slow  time.Duration
	done  chan struct{}
	close sync.Once
	wg    sync.WaitGroup
	// served[i] counts the requests of flaky node i since Reset (only the
	// flaky entries are used).
	served []atomic.Uint32

	inflight, maxInflight atomic.Int64

	// broken holds the main-host paths that answer 500 until Repair.
	brokenMu sync.Mutex
	broken   map[string]bool

	mu  sync.Mutex
	log []Request
}

// Start serves site until Close.
func Start(site *Site, opts Options) (*Server, error) {
	s := &Server{site: site, slow: opts.SlowDelay, done: make(chan struct{}), served: make([]atomic.Uint32, len(site.nodes))}
	if s.slow == 0 {
		s.slow = DefaultSlowDelay
	}
	mainLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testsite: listen on the main host: %w", err)
	}
	otherName := "127.0.0.2"
	other, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		otherName = "localhost"
		if other, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
			_ = mainLn.Close()
			return nil, fmt.Errorf("testsite: listen on the other host: %w", err)
		}
	}
	s.bases[hostMain] = "http://" + mainLn.Addr().String()
	s.bases[hostOther] = "http://" + otherName + ":" + strconv.Itoa(other.Addr().(*net.TCPAddr).Port)
	for h, ln := range []net.Listener{mainLn, other} {
		s.srvs[h] = &http.Server{Handler: hostHandler{s: s, host: uint8(h)}, ReadHeaderTimeout: 10 * time.Second}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = s.srvs[h].Serve(ln) // returns http.ErrServerClosed on Close
		}()
	}
	return s, nil
}

// Close stops both listeners, ends slow answers and waits for the servers.
func (s *Server) Close() error {
	var err error
	s.close.Do(func() {
		close(s.done)
		for _, srv := range s.srvs {
			err = errors.Join(err, srv.Close())
		}
		s.wg.Wait()
	})
	return err
}

// Site returns the site the server serves.
func (s *Server) Site() *Site { return s.site }

// StartURL is the start page's URL, a crawl's seed.
func (s *Server) StartURL() string { return s.bases[hostMain] + PathStart }

// MainBase is the main host's base URL (scheme and authority, no slash).
func (s *Server) MainBase() string { return s.bases[hostMain] }

// OtherBase is the other host's base URL.
func (s *Server) OtherBase() string { return s.bases[hostOther] }

// URL returns the absolute URL of a path on the main host.
func (s *Server) URL(path string) string { return s.bases[hostMain] + path }

// OtherURL returns the absolute URL of a path on the other host.
func (s *Server) OtherURL(path string) string { return s.bases[hostOther] + path }

// Reset makes every 500-once page answer 500 to its next request again, so
// a new run sees the site as a first one did. The request log is kept.
func (s *Server) Reset() {
	for _, id := range s.site.flaky {
		s.served[id].Store(0)
	}
}

// Break makes the page at path on the main host answer 500 to every
// request until Repair (a crawl's page that fails for good, then is fixed
// before a retry).
func (s *Server) Break(path string) {
	s.brokenMu.Lock()
	defer s.brokenMu.Unlock()
	if s.broken == nil {
		s.broken = map[string]bool{}
	}
	s.broken[path] = true
}

// Repair makes a broken path answer as the site does again.
func (s *Server) Repair(path string) {
	s.brokenMu.Lock()
	defer s.brokenMu.Unlock()
	delete(s.broken, path)
}

func (s *Server) isBroken(host uint8, path string) bool {
	if host != hostMain {
		return false
	}
	s.brokenMu.Lock()
	defer s.brokenMu.Unlock()
	return s.broken[path]
}

// Requests returns a copy of the request log, in the order the answers
// finished.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// RequestCount is the length of the request log; RequestsSince(n) returns
// what came after.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// RequestsSince returns a copy of the log entries from index n on.
func (s *Server) RequestsSince(n int) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > len(s.log) {
		n = len(s.log)
	}
	return append([]Request(nil), s.log[n:]...)
}

// InFlight is the number of requests being answered now.
func (s *Server) InFlight() int { return int(s.inflight.Load()) }

// MaxInFlight is the largest number of requests answered at once since
// Start (a crawl's concurrency, seen from the site).
func (s *Server) MaxInFlight() int { return int(s.maxInflight.Load()) }

// Fetched is what a client requested from the site, by URL, with the status
// of the last answer to each.
type Fetched struct {
	Pages      map[string]int // pages (Kind.IsPage)
	Requisites map[string]int // KindAsset
	Other      map[string]int // URLs that are not part of the site
}

func newFetched() *Fetched {
	return &Fetched{Pages: map[string]int{}, Requisites: map[string]int{}, Other: map[string]int{}}
}

func (f *Fetched) add(kind Kind, url string, status int) {
	switch {
	case kind == KindAsset:
		f.Requisites[url] = status
	case kind.IsPage():
		f.Pages[url] = status
	default:
		f.Other[url] = status
	}
}

// Requested sorts the log entries for which keep returns true (all when
// keep is nil) into pages, requisites and other URLs.
func Requested(log []Request, keep func(Request) bool) *Fetched {
	f := newFetched()
	for _, r := range log {
		if keep == nil || keep(r) {
			f.add(r.Kind, r.URL, r.Status)
		}
	}
	return f
}

// Kind returns what an absolute URL of this server is (KindUnknown for
// anything else).
func (s *Server) Kind(rawURL string) Kind {
	k, ok := s.lookupURL(rawURL)
	if !ok {
		return KindUnknown
	}
	return s.site.kind(k)
}

// lookupURL finds an absolute URL of this server.
func (s *Server) lookupURL(rawURL string) (key, bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.RawQuery != "" || u.Fragment != "" {
		return 0, false
	}
	for h, base := range s.bases {
		if u.Scheme+"://"+u.Host == base {
			return s.site.lookup(uint8(h), u.Path)
		}
	}
	return 0, false
}

// url returns the absolute URL of k.
func (s *Server) url(k key) string {
	if k < 0 {
		return s.bases[hostMain] + calendarPath(k)
	}
	n := &s.site.nodes[k]
	return s.bases[n.host] + n.path
}

// lookup finds a path on a host.
func (s *Site) lookup(host uint8, path string) (key, bool) {
	if id, ok := s.paths[host][path]; ok {
		return key(id), true
	}
	if host == hostMain {
		return parseCalendar(path)
	}
	return 0, false
}

func (s *Site) kind(k key) Kind {
	if k < 0 {
		return KindCalendar
	}
	return s.nodes[k].kind
}

type hostHandler struct {
	s    *Server
	host uint8
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (h hostHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	start := time.Now()
	s.enter()
	status, kind, n := s.serve(h.host, w, r)
	s.inflight.Add(-1)
	u := s.bases[h.host] + r.URL.RequestURI()
	s.mu.Lock()
	s.log = append(s.log, Request{Time: start, Method: r.Method, URL: u, UserAgent: r.UserAgent(), Status: status, Kind: kind, Bytes: n})
	s.mu.Unlock()
	if status == 0 {
		panic(http.ErrAbortHandler) // close the connection without an answer
	}
}

// enter counts a request in flight and keeps the maximum.
func (s *Server) enter() {
	now := s.inflight.Add(1)
	for {
		m := s.maxInflight.Load()
		if now <= m || s.maxInflight.CompareAndSwap(m, now) {
			return
		}
	}
}

// answer is what the server sends for one request.
type answer struct {
	status      int
	kind        Kind
	contentType string
	body        []byte
	location    string
	buf         *bytes.Buffer // from bufPool, returned after the write
}

// serve answers one request and returns its status, kind and the body
// bytes written (0 for HEAD; status 0 when a slow answer was cut off).
func (s *Server) serve(host uint8, w http.ResponseWriter, r *http.Request) (int, Kind, int) {
	a, ok := s.answer(host, r)
	if !ok {
		return 0, a.kind, 0
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Content-Length", strconv.Itoa(len(a.body)))
	if a.location != "" {
		hdr.Set("Location", a.location)
	}
	if a.status == http.StatusMethodNotAllowed {
		hdr.Set("Allow", "GET, HEAD")
	}
	w.WriteHeader(a.status)
	n := 0
	if r.Method != http.MethodHead {
		n, _ = w.Write(a.body)
	}
	if a.buf != nil {
		bufPool.Put(a.buf)
	}
	return a.status, a.kind, n
}

// answer decides the answer to r; ok is false when a slow answer was cut
// off by the client or Close.
func (s *Server) answer(host uint8, r *http.Request) (a answer, ok bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return answer{status: http.StatusMethodNotAllowed, contentType: "text/plain; charset=utf-8", body: notAllowedBody}, true
	}
	k, found := s.site.lookup(host, r.URL.Path)
	if !found || r.URL.RawQuery != "" {
		return answer{status: http.StatusNotFound, contentType: htmlType, body: notFoundBody}, true
	}
	a.kind = s.site.kind(k)
	if s.isBroken(host, r.URL.Path) {
		a.status, a.contentType, a.body = http.StatusInternalServerError, htmlType, errorBody
		return a, true
	}
	switch a.kind {
	case KindMissing:
		a.status, a.contentType, a.body = http.StatusNotFound, htmlType, notFoundBody
		return a, true
	case KindError:
		a.status, a.contentType, a.body = http.StatusInternalServerError, htmlType, errorBody
		return a, true
	case KindFlaky:
		if s.served[k].Add(1) == 1 {
			a.status, a.contentType, a.body = http.StatusInternalServerError, htmlType, errorBody
			return a, true
		}
	case KindSlow:
		if s.slow > 0 {
			t := time.NewTimer(s.slow)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return a, false
			case <-s.done:
				return a, false
			}
		}
	case KindRedirect:
		a.status, a.contentType, a.body = http.StatusMovedPermanently, htmlType, movedBody
		a.location = s.url(key(s.site.nodes[k].target))
		return a, true
	case KindAsset:
		a.status = http.StatusOK
		a.contentType, a.body = assetBody(s.site.nodes[k].path)
		return a, true
	}
	a.buf = bufPool.Get().(*bytes.Buffer)
	a.buf.Reset()
	s.render(a.buf, host, k)
	a.status, a.contentType, a.body = http.StatusOK, htmlType, a.buf.Bytes()
	return a, true
}

const htmlType = "text/html; charset=utf-8"

var (
	notAllowedBody = []byte("method not allowed\n")
	notFoundBody   = []byte("<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>\n")
	errorBody      = []byte("<!DOCTYPE html>\n<html><head><title>500 Internal Server Error</title></head><body><h1>Internal Server Error</h1></body></html>\n")
	movedBody      = []byte("<!DOCTYPE html>\n<html><head><title>301 Moved Permanently</title></head><body><h1>Moved Permanently</h1></body></html>\n")
	cssBody        = []byte("body { font-family: sans-serif; margin: 2em; }\nli { line-height: 1.4; }\n")
	// a 1×1 transparent PNG
	pngBody = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")
	filler  = "<p>This page is part of archiveflow's generated test site. Its links, requisites and answers follow the site's graph, so a crawl of it can be checked page by page against what a correct crawler must fetch.</p>\n"
)

func assetBody(path string) (string, []byte) {
	if len(path) > 4 && path[len(path)-4:] == ".css" {
		return "text/css; charset=utf-8", cssBody
	}
	return "image/png", pngBody
}

// render writes the HTML of page k served on host: requisites in the head
// (stylesheets) and body (images), then the links in document order.
func (s *Server) render(b *bytes.Buffer, host uint8, k key) {
	path, links, reqs := s.site.path(k), s.site.links(k), s.site.reqs(k)
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>testsite ")
	b.WriteString(path)
	b.WriteString("</title>\n")
	for _, r := range reqs {
		if p := s.site.nodes[r].path; p[len(p)-4:] == ".css" {
			b.WriteString("<link rel=\"stylesheet\" href=\"")
			s.href(b, host, key(r))
			b.WriteString("\">\n")
		}
	}
	b.WriteString("</head><body><h1>")
	b.WriteString(path)
	b.WriteString("</h1>\n")
	for _, r := range reqs {
		if p := s.site.nodes[r].path; p[len(p)-4:] != ".css" {
			b.WriteString("<img src=\"")
			s.href(b, host, key(r))
			b.WriteString("\" alt=\"\">\n")
		}
	}
	b.WriteString("<ul>\n")
	for _, l := range links {
		b.WriteString("<li><a href=\"")
		s.href(b, host, l)
		b.WriteString("\">")
		b.WriteString(s.site.path(l))
		b.WriteString("</a></li>\n")
	}
	b.WriteString("</ul>\n")
	b.WriteString(filler)
	b.WriteString("</body></html>\n")
}

// href writes a link to k from a page on host: a path on the same host, an
// absolute URL across hosts.
func (s *Server) href(b *bytes.Buffer, host uint8, k key) {
	if s.site.host(k) != host {
		b.WriteString(s.bases[s.site.host(k)])
	}
	b.WriteString(s.site.path(k))
}

func (s *Site) host(k key) uint8 {
	if k < 0 {
		return hostMain
	}
	return s.nodes[k].host
}

func (s *Site) path(k key) string {
	if k < 0 {
		return calendarPath(k)
	}
	return s.nodes[k].path
}

// links returns the links of page k in document order.
func (s *Site) links(k key) []key {
	if k < 0 {
		return calendarLinks(k, s.home)
	}
	return s.nodes[k].links
}

// reqs returns the requisites of page k in document order.
func (s *Site) reqs(k key) []int32 {
	if k < 0 {
		return s.calendarReqs
	}
	return s.nodes[k].reqs
}
