package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/builtin/hookio"
	"github.com/archiveflow/archiveflow/internal/builtin/htmldoc"
	"github.com/archiveflow/archiveflow/internal/builtin/wgetlog"
	"github.com/archiveflow/archiveflow/internal/bytesize"
	"github.com/archiveflow/archiveflow/internal/cssurl"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/hostbudget"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// Files of the pagefetch hook (in SNAP_DIR/pagefetch/).
const (
	pageFetchSummaryFile = "pagefetch.json"
	pageFetchBodyFile    = "page.body"
	// PageFetchWARC is the page's WARC (the page, its redirects and its
	// requisites); a crawl appends it to the job's WARC of the host.
	PageFetchWARC = "page.warc.gz"
)

// maxBytesKey is the config key of the page body's limit: at most
// maxPageBytes, what the parsing hooks read.
const maxBytesKey = "PAGEFETCH_MAX_BYTES"

// Limits of one page fetch.
const (
	// maxRequisites bounds the requisites of one page, those its CSS and
	// requisite redirects lead to included (fetched or already fetched).
	maxRequisites      = 200
	maxRequisiteBytes  = 64 << 20
	requisiteCacheSize = 100_000
	// maxImportDepth bounds a chain of @import: a sheet this many imports
	// below one of the page's own (linked, or imported by its <style>) is
	// fetched, what it refers to is not.
	maxImportDepth = 8
)

// pageFetchSummary is pagefetch.json: what the parsing hooks read.
type pageFetchSummary struct {
	URL         string `json:"url"`
	FinalURL    string `json:"final_url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	BodyFile    string `json:"body_file,omitempty"` // relative to the pagefetch dir
	Truncated   bool   `json:"truncated,omitempty"`
	Redirects   int    `json:"redirects"`
	Requisites  int    `json:"requisites"`
	Reused      int    `json:"requisites_reused"`
	Responses   int    `json:"responses"`
	Bytes       int64  `json:"bytes"`
	// WARC is the page's WARC file; none on a crawl page inside the
	// worker, whose WARC joins the job's from memory (WithCrawlPage).
	WARC string `json:"warc,omitempty"`
	// Denied is the refusal of the page (or a redirect hop of it) by the
	// fetch policy: later hooks read no page and fetch none.
	Denied string `json:"denied,omitempty"`
}

func readPageFetchJSON(snapDir string) (*pageFetchSummary, error) {
	var s pageFetchSummary
	if err := readJSON(snapDir, "pagefetch/"+pageFetchSummaryFile, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// requisiteCache remembers, per crawl (CRAWL_DIR), the requisites already
// fetched into that crawl's WARC on this host, so the stylesheet every page
// shares is fetched once, as a crawler's URL table does. With each it keeps
// what the fetch led to (a stylesheet's references, a redirect's target),
// so a page reusing a stylesheet still lists, and fetches if need be, what
// the sheet needs: a page's requisites are the same whether its sheets were
// fetched for it or before. It keeps the fetch's Response record too: a
// page reusing the requisite prints it again, marked reused, so the crawl
// counts the requisite even when the page attempt that fetched it was
// never recorded (cancelled while Temporal restarted, say) and no later
// page fetches it again. It lives as long as the process: a crawl running
// the hook in-process shares it across its pages; a hook run as its own
// process starts empty and fetches them all.
var requisiteCache = struct {
	sync.Mutex
	crawls map[string]map[string]fetchedRequisite
}{crawls: map[string]map[string]fetchedRequisite{}}

// fetchedRequisite is what the requisite memory keeps of one fetch.
type fetchedRequisite struct {
	next []requisite    // what it led to (leadsTo)
	resp model.Response // its Response record
}

// requisiteSeen says whether the crawl fetched u already, and what that
// fetch answered and led to.
func requisiteSeen(crawl, u string) (fetchedRequisite, bool) {
	if crawl == "" {
		return fetchedRequisite{}, false
	}
	requisiteCache.Lock()
	defer requisiteCache.Unlock()
	f, ok := requisiteCache.crawls[crawl][u]
	return f, ok
}

func rememberRequisite(crawl, u string, f fetchedRequisite) {
	if crawl == "" {
		return
	}
	requisiteCache.Lock()
	defer requisiteCache.Unlock()
	m := requisiteCache.crawls[crawl]
	if m == nil {
		m = map[string]fetchedRequisite{}
		requisiteCache.crawls[crawl] = m
	}
	if len(m) < requisiteCacheSize {
		m[u] = f
	}
}

// ForgetCrawl drops a crawl's requisite memory (its crawl ended on this
// host).
func ForgetCrawl(crawlDir string) {
	requisiteCache.Lock()
	defer requisiteCache.Unlock()
	delete(requisiteCache.crawls, crawlDir)
}

type crawlPageKey struct{}

// crawlPage is what a crawl page's built-ins run inside the worker share
// in memory (WithCrawlPage).
type crawlPage struct {
	keep func(path string, data []byte)
	mu   sync.Mutex
	page *page // pagefetch's page, parsed as doc: the parsing hooks' pagefetch source
	doc  *htmldoc.Doc
	// files are the outputs only a hook run as a process would read
	// (pagefetch.json, page.body, urls.jsonl, title.txt), by path, not yet written:
	// WriteCrawlPageFiles writes them.
	files   map[string]pendingFile
	written bool // WriteCrawlPageFiles ran: later files are written at once
	// sum and body are what pagefetch.json and page.body say (done: set),
	// for the parsing hooks when the page was not parsed (not HTML, an
	// error answer).
	sum  pageFetchSummary
	body []byte
	done bool
}

// setFetched keeps pagefetch's summary and page body (nil: none).
func (cp *crawlPage) setFetched(sum pageFetchSummary, body []byte) {
	if cp == nil {
		return
	}
	cp.mu.Lock()
	cp.sum, cp.body, cp.done = sum, body, true
	cp.mu.Unlock()
}

// fetched is pagefetch's summary and page body, if it ran in memory.
func (cp *crawlPage) fetched() (pageFetchSummary, []byte, bool) {
	if cp == nil {
		return pageFetchSummary{}, nil, false
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.sum, cp.body, cp.done
}

type pendingFile struct {
	data   []byte
	atomic bool
}

// WithCrawlPage marks ctx as one crawl page's run inside the worker
// (RunIn): pagefetch hands its page WARC to keep (the path it would have
// written, and the file's bytes) when it returns, instead of creating the
// file, and the page it parsed for its requisites is the one the parsing
// hooks after it (title, outlinks, htmltotext) read as their pagefetch
// source, without reading its files back or parsing it again. The files
// only a hook run as a process reads (pagefetch's pagefetch.json and
// page.body, outlinks' urls.jsonl, title's title.txt: the same page and
// records the engine has in memory, the title in the page's index) are kept until WriteCrawlPageFiles writes them, which the
// engine calls before it starts a page hook as a process; a page whose
// hooks all run inside the worker never writes them. keep may be called
// from another goroutine, and late (a hook abandoned after its timeout).
func WithCrawlPage(ctx context.Context, keep func(path string, data []byte)) context.Context {
	return context.WithValue(ctx, crawlPageKey{}, &crawlPage{keep: keep})
}

// WriteCrawlPageFiles writes the files the crawl page of ctx
// (WithCrawlPage) kept back so far, and from now on those of later hooks
// as they come: a hook about to run as a process may read them. Without a
// crawl page it does nothing.
func WriteCrawlPageFiles(ctx context.Context) error {
	cp, _ := ctx.Value(crawlPageKey{}).(*crawlPage)
	if cp == nil {
		return nil
	}
	cp.mu.Lock()
	files := cp.files
	cp.files, cp.written = nil, true
	cp.mu.Unlock()
	var errs []error
	for _, path := range slices.Sorted(maps.Keys(files)) {
		errs = append(errs, writeFile(path, files[path]))
	}
	return errors.Join(errs...)
}

// writeFile writes an output file of a hook, or keeps it back for
// WriteCrawlPageFiles on a crawl page inside the worker (cp non-nil).
func (cp *crawlPage) writeFile(path string, data []byte, atomic bool) error {
	f := pendingFile{data: data, atomic: atomic}
	if cp != nil {
		cp.mu.Lock()
		if !cp.written {
			if cp.files == nil {
				cp.files = map[string]pendingFile{}
			}
			cp.files[path] = f
			cp.mu.Unlock()
			return nil
		}
		cp.mu.Unlock()
	}
	return writeFile(path, f)
}

func writeFile(path string, f pendingFile) error {
	if f.atomic {
		return writeFileAtomic(path, f.data)
	}
	if err := writeOutput(path, f.data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// nameFile sets out[key] to name, the file at path, unless path is one
// kept back in memory (writeFile before WriteCrawlPageFiles): a hook's
// output_json names only files on disk. Without a crawl page (nil) every
// file is written at once.
func (cp *crawlPage) nameFile(out map[string]any, key, path, name string) {
	if cp != nil {
		cp.mu.Lock()
		_, kept := cp.files[path]
		cp.mu.Unlock()
		if kept {
			return
		}
	}
	out[key] = name
}

// crawlPageOf is the crawl page h runs for inside the worker, or nil.
func crawlPageOf(ctx context.Context, h *Hook) *crawlPage {
	if cp, ok := ctx.Value(crawlPageKey{}).(*crawlPage); ok && h.inWorker {
		return cp
	}
	return nil
}

func (cp *crawlPage) setPage(p *page, doc *htmldoc.Doc) {
	if cp == nil {
		return
	}
	cp.mu.Lock()
	cp.page, cp.doc = p, doc
	cp.mu.Unlock()
}

// parsed is pagefetch's page and its parse (nil, nil: none).
func (cp *crawlPage) parsed() (*page, *htmldoc.Doc) {
	if cp == nil {
		return nil, nil
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.page, cp.doc
}

// pageFetcher fetches one page into a WARC.
type pageFetcher struct {
	h      *Hook
	client *http.Client
	w      *warc.Writer
	sum    pageFetchSummary
	crawl  string
	last   model.Response // the Response record get printed last
	body   []byte         // the page's body, saved as page.body
	// maxBytes bounds the page's body (PAGEFETCH_MAX_BYTES).
	maxBytes int64
}

// runPageFetch fetches the page (following redirects, each one recorded)
// and its requisites from any host into page.warc.gz, saves the page body
// and pagefetch.json, and prints one Response record per fetch. The page
// answered 2xx → succeeded; 4xx → failed (a final answer); 5xx, 408, 429
// (model.TransientStatus), a network error or a redirect loop → transient
// (the runner retries it).
func runPageFetch(ctx context.Context, h *Hook) (hookio.Result, error) {
	var out io.Writer
	path := filepath.Join(h.Dir, PageFetchWARC)
	if cp := crawlPageOf(ctx, h); cp != nil {
		buf := &bytes.Buffer{}
		out = buf
		defer func() { cp.keep(path, buf.Bytes()) }()
	} else {
		f, err := os.Create(path)
		if errors.Is(err, fs.ErrNotExist) {
			if err = procs.EnsureDir(h.Dir); err == nil {
				f, err = os.Create(path)
			}
		}
		if err != nil {
			return hookio.Result{}, fmt.Errorf("pagefetch: create warc: %w", err)
		}
		defer f.Close()
		out = f
	}
	// Each fetch on a connection of its own whose bytes are kept: its
	// WARC records are what went over the wire.
	transport, err := h.recordingTransport()
	if err != nil {
		return hookio.Result{}, fmt.Errorf("pagefetch: %w", err)
	}
	maxBytes, err := h.Inv.Int(maxBytesKey, maxPageBytes, 1)
	if err != nil {
		return hookio.Result{}, fmt.Errorf("pagefetch: %w", err)
	}
	pf := &pageFetcher{
		h:        h,
		maxBytes: int64(min(maxBytes, maxPageBytes)),
		w:        warc.NewWriter(out),
		crawl:    h.Inv.String("CRAWL_DIR", ""),
		client: &http.Client{Transport: transport, Timeout: h.Inv.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		sum: pageFetchSummary{URL: h.Inv.URL},
	}
	cp := crawlPageOf(ctx, h)
	if cp == nil {
		pf.sum.WARC = PageFetchWARC // else it joins the job's WARC from memory: no file
	}
	// A page WARC kept in memory joins the job's WARC, whose own warcinfo
	// replaces the page's (warc.Append drops archiveflow's): it gets none.
	if cp == nil {
		if _, err := pf.w.Info(PageFetchWARC, map[string]string{"software": warc.Software() + " (pagefetch)", "format": "WARC File Format 1.1",
			"robots": "ignore"}); err != nil {
			return hookio.Result{}, err
		}
	}
	res, err := pf.fetchPage(ctx)
	cp.setFetched(pf.sum, pf.body)
	sum, werr := json.MarshalIndent(pf.sum, "", "  ")
	if werr == nil {
		// Atomic: other hooks may read it while this one runs.
		werr = cp.writeFile(filepath.Join(h.Dir, pageFetchSummaryFile), append(sum, '\n'), true)
	}
	if werr != nil {
		h.Log.Warn("cannot write pagefetch summary", zap.Error(werr))
	}
	// The files its output_json names: those on disk.
	if out, ok := res.OutputJSON.(map[string]any); ok {
		if werr == nil {
			cp.nameFile(out, "file", filepath.Join(h.Dir, pageFetchSummaryFile), pageFetchSummaryFile)
		}
		if pf.sum.WARC != "" {
			out["warc"] = pf.sum.WARC
		}
	}
	return res, err
}

func (pf *pageFetcher) fetchPage(ctx context.Context) (hookio.Result, error) {
	u := pf.h.Inv.URL
	for hops := 0; ; hops++ {
		if hops > maxRedirects {
			return hookio.Result{}, fmt.Errorf("pagefetch: %w", &redirectLoopError{url: pf.h.Inv.URL})
		}
		resp, body, truncated, err := pf.get(ctx, u, pf.maxBytes, false)
		var denied *deniedError
		if errors.As(err, &denied) {
			// Final: the policy will deny it again.
			pf.sum.Denied = denied.Error()
			return hookio.Result{Status: model.StatusFailed, OutputStr: denied.Error(), Error: denied.Error()}, nil
		}
		if err != nil {
			return hookio.Result{}, err
		}
		loc := resp.Header.Get("Location")
		if resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
			next, err := resp.Request.URL.Parse(loc)
			if err != nil || (next.Scheme != "http" && next.Scheme != "https") {
				return pf.final(ctx, u, resp, body, truncated)
			}
			pf.sum.Redirects++
			u = next.String()
			continue
		}
		return pf.final(ctx, u, resp, body, truncated)
	}
}

// final records the page's last answer and fetches its requisites.
func (pf *pageFetcher) final(ctx context.Context, u string, resp *http.Response, body []byte, truncated bool) (hookio.Result, error) {
	s := &pf.sum
	s.FinalURL, s.Status, s.ContentType, s.Truncated = u, resp.StatusCode, resp.Header.Get("Content-Type"), truncated
	pf.body = body
	if err := crawlPageOf(ctx, pf.h).writeFile(filepath.Join(pf.h.Dir, pageFetchBodyFile), body, false); err != nil {
		return hookio.Result{}, fmt.Errorf("pagefetch: save body: %w", err)
	}
	s.BodyFile = pageFetchBodyFile
	out := map[string]any{"status": s.Status, "final_url": u} // the files it names: runPageFetch
	switch {
	case model.TransientStatus(s.Status):
		return hookio.Result{}, fmt.Errorf("pagefetch: %s answered HTTP %d", u, s.Status)
	case s.Status >= 400:
		return hookio.Result{Status: model.StatusFailed, OutputStr: fmt.Sprintf("HTTP %d", s.Status), OutputJSON: out,
			Error: fmt.Sprintf("%s answered HTTP %d", u, s.Status)}, nil
	case s.Status >= 300:
		return hookio.Result{Status: model.StatusFailed, OutputStr: fmt.Sprintf("HTTP %d", s.Status), OutputJSON: out,
			Error: fmt.Sprintf("%s answered HTTP %d without a usable Location", u, s.Status)}, nil
	}
	switch mt := mediaType(s.ContentType); {
	case strings.Contains(mt, "html"):
		if doc, err := htmldoc.Parse(body, s.ContentType, u); err == nil {
			crawlPageOf(ctx, pf.h).setPage(&page{Source: sourcePageFetch, Path: "pagefetch/" + pageFetchBodyFile, URL: u,
				ContentType: s.ContentType, Body: body}, doc)
			var found []requisite
			for _, r := range doc.Requisites() {
				found = append(found, requisite{url: r.URL, sheet: r.Stylesheet})
			}
			pf.requisites(ctx, found)
		} else {
			pf.h.Log.Info("page not parsed for requisites", zap.Error(err))
		}
	case mt == "text/css":
		// A stylesheet crawled as a page: what it refers to are its requisites.
		pf.requisites(ctx, cssRequisites(u, body, s.ContentType, 0))
	}
	out["requisites"], out["responses"], out["bytes"] = s.Requisites, s.Responses, s.Bytes
	return hookio.Result{Status: model.StatusSucceeded, OutputJSON: out,
		OutputStr: fmt.Sprintf("HTTP %d, %d requisites (%d already fetched), %d bytes", s.Status, s.Requisites, s.Reused, s.Bytes)}, nil
}

// requisite is one URL a page needs.
type requisite struct {
	url string
	// sheet: read as CSS once fetched (a link rel=stylesheet, an @import),
	// whatever its Content-Type; any text/css answer is read too.
	sheet bool
	// depth is the @import nesting below the page: 0 for the page's own
	// requisites, n+1 for what a sheet at n refers to.
	depth int
}

// requisites fetches the page's requisites, and what they lead to, each
// once per crawl on this host: the references of a fetched stylesheet
// (cssurl, resolved against the sheet's URL; @import recursively, down to
// maxImportDepth) and the target of a requisite's redirect join the
// page's list. Each URL is taken once per page, so an @import cycle or a
// redirect loop ends. At most maxRequisites per page, counting those
// already fetched; the rest is cut with a notice. A failed requisite does
// not fail the page.
func (pf *pageFetcher) requisites(ctx context.Context, found []requisite) {
	var list []requisite
	listed := map[string]bool{}
	add := func(rs []requisite, depth int) {
		for _, r := range rs {
			if !listed[r.url] {
				listed[r.url] = true
				r.depth += depth
				list = append(list, r)
			}
		}
	}
	add(found, 0)
	for i := 0; i < len(list); i++ {
		if i >= maxRequisites {
			pf.h.cut("%s: %d of its %d requisites not fetched: more than pagefetch's limit of %d per page", pf.h.Inv.URL, len(list)-i, len(list), maxRequisites)
			return
		}
		r := list[i]
		seen, ok := requisiteSeen(pf.crawl, r.url)
		next := seen.next
		if ok {
			pf.sum.Reused++
			reused := seen.resp
			reused.Reused = true
			pf.h.emitResponse(reused)
		} else {
			pf.sum.Requisites++
			resp, body, _, err := pf.get(ctx, r.url, maxRequisiteBytes, true)
			if errors.Is(err, hostbudget.ErrPostponed) {
				return // the page is postponed: it fetches them on its next attempt
			}
			if errors.Is(err, hostbudget.ErrGivenUp) {
				pf.h.cut("%s: requisite %s not fetched: %v", pf.h.Inv.URL, r.url, err)
				continue
			}
			if err != nil {
				pf.h.Log.Info("requisite not fetched", zap.String("requisite", r.url), zap.Error(err))
				continue
			}
			if model.TransientStatus(resp.StatusCode) || hostbudget.PageFrom(ctx).RateLimited(resp.StatusCode, resp.Header.Get("Retry-After"), body) {
				continue // not remembered: a later page asks again
			}
			next = leadsTo(r, resp, body)
			rememberRequisite(pf.crawl, r.url, fetchedRequisite{next: next, resp: pf.last})
		}
		if r.depth < maxImportDepth {
			add(next, r.depth)
		}
	}
}

// leadsTo is what a fetched requisite needs in turn, its depth relative
// to it: a redirect's target (the same kind of requisite, at the same
// depth), or a stylesheet's references.
func leadsTo(r requisite, resp *http.Response, body []byte) []requisite {
	code := resp.StatusCode
	if loc := resp.Header.Get("Location"); code >= 300 && code < 400 && loc != "" {
		if base, err := url.Parse(r.url); err == nil {
			if u := htmldoc.ResolveAgainst(base, loc); u != "" {
				return []requisite{{url: u, sheet: r.sheet}}
			}
		}
		return nil
	}
	ctype := resp.Header.Get("Content-Type")
	mt := mediaType(ctype)
	if code < 200 || code > 299 || !(mt == "text/css" || r.sheet && !strings.Contains(mt, "html")) {
		return nil
	}
	return cssRequisites(r.url, body, ctype, 1)
}

// cssRequisites are the references of the stylesheet at sheetURL,
// resolved against it, deduplicated (an @import kept as a sheet), at most
// maxRequisites (no page fetches more), each at depth.
func cssRequisites(sheetURL string, body []byte, contentType string, depth int) []requisite {
	base, err := url.Parse(sheetURL)
	if err != nil {
		return nil
	}
	var out []requisite
	at := map[string]int{}
	for _, ref := range cssurl.Refs(cssurl.Decode(body, contentType)) {
		u := htmldoc.ResolveAgainst(base, ref.URL)
		if u == "" {
			continue
		}
		if i, ok := at[u]; ok {
			out[i].sheet = out[i].sheet || ref.Import
			continue
		}
		if len(out) == maxRequisites {
			break
		}
		at[u] = len(out)
		out = append(out, requisite{url: u, sheet: ref.Import, depth: depth})
	}
	return out
}

// mediaType is a Content-Type's media type, lower case, without
// parameters.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// get fetches one URL (no redirect followed), writes the request and
// response records and prints the Response record (marked when the URL is
// a requisite). A network error is returned after a status-0 Response
// record.
func (pf *pageFetcher) get(ctx context.Context, u string, limit int64, requisite bool) (*http.Response, []byte, bool, error) {
	respond := func(status int, bytes int64, code string) {
		pf.last = model.Response{URL: u, Status: status, Bytes: bytes, WgetCode: code, Requisite: requisite}
		pf.h.emitResponse(pf.last)
	}
	// The host's turn in the fleet-wide host budget (none outside a crawl
	// page run in the worker).
	turn, err := hostbudget.PageFrom(ctx).Start(ctx, u, requisite)
	if err != nil {
		return nil, nil, false, fmt.Errorf("pagefetch: %s: %w", u, err)
	}
	defer turn.End()
	rf := RecordedFetcher{Client: pf.client, WARC: pf.w, Log: pf.h.Log, UserAgent: pf.h.Inv.UserAgent}
	f, err := rf.Get(ctx, u, limit)
	if f.Resp != nil {
		turn.Answer(ctx, f.Resp, f.Body)
	}
	if f.Resp == nil {
		if denied := pf.h.denied(u, err); denied != nil {
			// No Response record and no WARC record: nothing was fetched.
			return nil, nil, false, denied
		}
		var bad *badRequestError
		if errors.As(err, &bad) {
			return nil, nil, false, fmt.Errorf("pagefetch: %w", err)
		}
		respond(0, 0, wgetlog.CodeNetworkError)
		pf.sum.Responses++
		return nil, nil, false, fmt.Errorf("pagefetch: %w", err)
	}
	if err != nil {
		respond(f.Resp.StatusCode, int64(len(f.Body)), wgetlog.CodeNetworkError)
		pf.sum.Responses++
		return nil, nil, false, fmt.Errorf("pagefetch: %w", err)
	}
	if f.Truncated {
		pf.h.cut("%s: body cut at %s (pagefetch's limit); its WARC record is marked WARC-Truncated: length", u, bytesize.Format(limit))
	}
	pf.sum.Responses++
	pf.sum.Bytes += int64(len(f.Body))
	respond(f.Resp.StatusCode, int64(len(f.Body)), wgetlog.CodeFinished)
	return f.Resp, f.Body, f.Truncated, nil
}

// RecordedFetcher fetches single URLs into a WARC as they were on the
// wire: pagefetch's pages and requisites, and a crawl's robots.txt and
// sitemaps (internal/engine). Client's transport must be an
// egress.RecordingTransport (each exchange's bytes kept) under the fetch
// policy, and must not follow redirects.
type RecordedFetcher struct {
	Client    *http.Client
	WARC      *warc.Writer
	Log       *zap.Logger
	UserAgent string
}

// Fetched is one answer: its response (body read and closed), the body
// (at most the limit) and whether it was cut there.
type Fetched struct {
	Resp      *http.Response
	Body      []byte
	Truncated bool
}

// badRequestError: the URL makes no request (nothing was fetched).
type badRequestError struct{ err error }

func (e *badRequestError) Error() string { return e.err.Error() }
func (e *badRequestError) Unwrap() error { return e.err }

// Get fetches u (no redirect followed) and writes its request and
// response records (record). No answer: Fetched.Resp is nil and err says
// why (a policy refusal is egress.DeniedBy's). An answer whose body could
// not be read: Resp and what was read, with err, and no records.
func (rf RecordedFetcher) Get(ctx context.Context, u string, limit int64) (Fetched, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Fetched{}, &badRequestError{fmt.Errorf("request for %q: %w", u, err)}
	}
	if rf.UserAgent != "" {
		req.Header.Set("User-Agent", rf.UserAgent)
	}
	req.Header.Set("Accept-Encoding", "identity")
	// The address the fetch reached, for WARC-IP-Address: the origin's,
	// whether this process dials it (the worker's policy) or the attempt's
	// fetch proxy does and names it (a tunnel); and the exchange, the
	// bytes this request and its answer carried on a connection that
	// others may use before and after it (egress.StartExchange; a request
	// net/http retries on a new connection gets GotConn again).
	var origin netip.AddrPort
	var ex *egress.Exchange
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) {
			ex = egress.StartExchange(ci.Conn)
			origin, _ = egress.OriginAddr(ci.Conn)
		},
	}))
	started := time.Now()
	resp, err := rf.Client.Do(req)
	if err != nil {
		return Fetched{}, getError(u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil && !errors.Is(err, io.EOF) {
		return Fetched{Resp: resp, Body: body}, fmt.Errorf("read body of %s: %w", u, err)
	}
	truncated := int64(len(body)) > limit
	if truncated {
		body = body[:limit]
	}
	rf.record(req, ex, limit, truncated, started, ipAddress(req, origin))
	return Fetched{Resp: resp, Body: body, Truncated: truncated}, nil
}

// record writes the request and response records: the request block is
// the bytes the fetch's exchange wrote, the response block the bytes the
// origin sent up to the end of its answer (egress.Exchange.Take,
// egress.ResponseMessage): status line, field names in their case, order
// and duplicates, transfer coding and chunk framing, a content coding
// such as gzip, as they were on the wire. A body over limit is cut at
// limit (WARC-Truncated: length). The payload digest is over the body
// without its transfer coding. An exchange that kept no bytes gets no
// records: net/http's re-serialised exchange is not what the origin sent,
// and an archive is evidence.
func (rf RecordedFetcher) record(req *http.Request, ex *egress.Exchange, limit int64, truncated bool, at time.Time, ip string) {
	reqBlock, block, payload, ok := wireRecord(ex, limit)
	if !ok {
		rf.Log.Warn("warc: the fetch's exchange kept no bytes: no WARC record for it", zap.String("url", req.URL.String()))
		return
	}
	var reqHeaders map[string]string
	if ip != "" {
		reqHeaders = map[string]string{"WARC-IP-Address": ip}
	}
	reqID, err := rf.WARC.Write(warc.Record{Type: "request", Date: at, TargetURI: req.URL.String(),
		ContentType: "application/http;msgtype=request", Headers: reqHeaders, Block: reqBlock})
	if err != nil {
		rf.Log.Warn("warc: write request", zap.Error(err))
		return
	}
	headers := map[string]string{"WARC-Concurrent-To": reqID, "WARC-Payload-Digest": warc.Digest(payload)}
	if truncated {
		headers["WARC-Truncated"] = "length"
	}
	if ip != "" {
		headers["WARC-IP-Address"] = ip
	}
	if _, err := rf.WARC.Write(warc.Record{Type: "response", Date: at, TargetURI: req.URL.String(),
		ContentType: "application/http;msgtype=response", Headers: headers, Block: block}); err != nil {
		rf.Log.Warn("warc: write response", zap.Error(err))
	}
}

// wireRecord is what ex (one GET on a connection of
// egress.RecordingTransport) sent and received: the request's bytes, and
// the answer's, cut at its end or where its body passes limit, with its
// payload.
func wireRecord(ex *egress.Exchange, limit int64) (request, response, payload []byte, ok bool) {
	sent, received := ex.Take()
	if len(sent) == 0 || len(received) == 0 {
		return nil, nil, nil, false
	}
	response, payload, _ = egress.ResponseMessage(received, http.MethodGet, limit)
	return sent, response, payload, true
}

// ipAddress is the IP address a fetch reached: the origin's when its
// connection knows it, else the URL's host when it is an IP address, else
// "".
func ipAddress(req *http.Request, origin netip.AddrPort) string {
	if origin.IsValid() {
		return origin.Addr().Unmap().String()
	}
	if ip := net.ParseIP(req.URL.Hostname()); ip != nil {
		return ip.String()
	}
	return ""
}

// pageFetchSource is the page pagefetch saved, for the parsing hooks.
func (h *Hook) pageFetchSource(ctx context.Context) (*page, error) {
	cp := crawlPageOf(ctx, h)
	if p, _ := cp.parsed(); p != nil {
		return p, nil
	}
	sum, body, ok := cp.fetched()
	if !ok {
		read, err := readPageFetchJSON(h.SnapDir)
		if err != nil {
			return nil, err
		}
		sum = *read
	}
	if sum.Denied != "" {
		return nil, fmt.Errorf("pagefetch: %s: %w", sum.Denied, errNoPage)
	}
	if sum.BodyFile == "" {
		// pagefetch ended without a page (a redirect loop, a Location it
		// could not follow): what it said is its own result.
		return nil, fmt.Errorf("pagefetch saved no page for %s: %w", sum.URL, errNoPage)
	}
	if sum.Status < 200 || sum.Status > 299 {
		return nil, fmt.Errorf("pagefetch got HTTP %d for %s: %w", sum.Status, sum.FinalURL, errNoPage)
	}
	if !ok {
		return h.readPage(sourcePageFetch, "pagefetch/"+sum.BodyFile, sum.FinalURL, sum.ContentType)
	}
	if len(body) == 0 {
		return nil, fmt.Errorf("pagefetch/%s is empty", sum.BodyFile)
	}
	return &page{Source: sourcePageFetch, Path: "pagefetch/" + sum.BodyFile, URL: sum.FinalURL, ContentType: sum.ContentType, Body: body}, nil
}
