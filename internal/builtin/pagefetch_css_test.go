package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// countingSite serves files by path and counts every request. Any other
// path is an image whose bytes happen to read as CSS referring to
// /never.png: a requisite not taken for a stylesheet is not parsed as one.
type countingSite struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

// file is one answer of a countingSite: a body and its Content-Type, or a
// redirect (location set).
type file struct {
	ctype, body, location string
}

func newCountingSite(t *testing.T, files map[string]file) *countingSite {
	t.Helper()
	s := &countingSite{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		f, ok := files[r.URL.Path]
		switch {
		case !ok:
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "a{b:url(/never.png)}")
		case f.location != "":
			http.Redirect(w, r, f.location, http.StatusFound)
		default:
			w.Header().Set("Content-Type", f.ctype)
			fmt.Fprint(w, f.body)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// requested returns the paths requested since the last call, each with its
// count.
func (s *countingSite) requested() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.hits
	s.hits = map[string]int{}
	return got
}

// pageRun is one pagefetch run: its Response records' URLs, its result,
// stderr and the target URIs of its WARC's response records.
type pageRun struct {
	responses []string // URLs of the Response records of fetches
	// reused are the Response records of requisites fetched for an
	// earlier page ("reused": true), by URL; fetched those of fetches.
	reused, fetched map[string]map[string]any
	result          map[string]any
	stderr          string
	warc            []string
}

// fetchPage runs pagefetch on url in a fresh directory, as a page of the
// crawl crawlDir.
func fetchPage(t *testing.T, url, crawlDir string) pageRun {
	t.Helper()
	t.Chdir(t.TempDir())
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"pagefetch", "--url=" + url},
		env(map[string]string{"PAGEFETCH_ENABLED": "True", egress.EnvDeny: "[]", "CRAWL_DIR": crawlDir}), &out, &errb)
	require.Equal(t, ExitOK, code, errb.String())
	var run pageRun
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	for _, l := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(l, &rec), string(l))
		switch {
		case rec["type"] == "Response" && rec["reused"] == true:
			if run.reused == nil {
				run.reused = map[string]map[string]any{}
			}
			run.reused[fmt.Sprint(rec["url"])] = rec
		case rec["type"] == "Response":
			run.responses = append(run.responses, fmt.Sprint(rec["url"]))
			if run.fetched == nil {
				run.fetched = map[string]map[string]any{}
			}
			run.fetched[fmt.Sprint(rec["url"])] = rec
		default:
			run.result = rec
		}
	}
	run.stderr = errb.String()
	f, err := os.Open(PageFetchWARC)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, warc.Read(f, func(h warc.Header, _ io.Reader) error {
		if h.Type == "response" {
			run.warc = append(run.warc, h.TargetURI)
		}
		return nil
	}))
	return run
}

// paths strips the site's origin off urls and sorts them.
func paths(origin string, urls []string) []string {
	out := make([]string, 0, len(urls))
	for _, u := range urls {
		out = append(out, strings.TrimPrefix(u, origin))
	}
	sort.Strings(out)
	return out
}

// TestPageFetchGetsEveryRequisiteKindOnce: pagefetch fetches what a page
// needs from its HTML (link relations, srcset and picture sources, poster,
// media, inline <style> and style attributes) and from its stylesheets
// (@import recursively, url() backgrounds, @font-face fonts, resolved
// against each sheet's URL; a sheet redirected, one served as text/plain
// but linked as a stylesheet, one found by its text/css type), each
// exactly once — an @import cycle included — with a Response record and a
// response record in page.warc.gz. A second page of the same crawl sharing
// the stylesheet fetches only what is new to it, and still counts the
// sheet's own requisites as its (already fetched).
func TestPageFetchGetsEveryRequisiteKindOnce(t *testing.T) {
	html, css := "text/html; charset=utf-8", "text/css"
	site := newCountingSite(t, map[string]file{
		"/": {ctype: html, body: `<!DOCTYPE html><html><head>
<link rel="stylesheet" href="/css/main.css"><link rel="icon" href="/favicon.ico">
<link rel="preload" as="font" href="/fonts/pre.woff2" crossorigin><link rel="modulepreload" href="/js/mod.js">
<link rel="stylesheet" href="/css/old.css"><link rel="stylesheet" href="/css/sheet.txt">
<link rel="preload" as="fetch" href="/data/typed.css">
<style>@import url("/css/inline-import.css"); .hero{background:url(/img/hero.png)} /* url(/not-this.png) */</style>
</head><body style="background-image:url('/img/body-bg.png')">
<img src="/img/a.png" srcset="/img/a-1x.png 1x, /img/a,2x.png 2x">
<picture><source srcset="/img/p.avif 1x, /img/p2.avif 2x" type="image/avif"><img src="/img/p.png"></picture>
<video poster="/img/poster.jpg"><source src="/media/v.webm"><track src="/media/subs.vtt"></video>
<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw="><img src="/moved.png"><img src="/img/a.png">
</body></html>`},
		"/css/main.css": {ctype: css, body: `@import "base.css" screen; @import url(print.css) print;
@font-face{font-family:F;src:url(../fonts/f.woff2) format("woff2"),url('../fonts/f.woff') format("woff")}
.a{background:url(img/a-bg.png)} .b{background:url(data:image/png;base64,AAAA)} /* url(/not-this.png) */
.c{background:url("/img/hero.png")}`},
		"/css/base.css":          {ctype: css, body: `@import url(main.css); .x{background-image:url("img/es\63 aped.png")}`},
		"/css/print.css":         {ctype: css, body: `.p{background:url(/img/print.png)}`},
		"/css/inline-import.css": {ctype: css, body: `.i{background:url(i.png)}`},
		"/css/sheet.txt":         {ctype: "text/plain", body: `.t{background:url(t.png)}`},
		"/css/old.css":           {location: "/css/new.css"},
		"/css/new.css":           {ctype: css, body: `.n{background:url(new-bg.png)}`},
		"/data/typed.css":        {ctype: "text/css; charset=utf-8", body: `.y{background:url(/img/typed.png)}`},
		"/moved.png":             {location: "/img/moved-target.png"},
		"/two.html": {ctype: html, body: `<link rel="stylesheet" href="/css/main.css">
<img src="/img/a.png"><img src="/img/two.png">`},
	})
	crawl := t.TempDir()
	t.Cleanup(func() { ForgetCrawl(crawl) })

	first := fetchPage(t, site.URL+"/", crawl)
	want := []string{"/",
		// the HTML's
		"/css/main.css", "/favicon.ico", "/fonts/pre.woff2", "/js/mod.js", "/css/old.css", "/css/sheet.txt", "/data/typed.css",
		"/css/inline-import.css", "/img/hero.png", "/img/body-bg.png", "/img/a.png", "/img/a-1x.png", "/img/a,2x.png",
		"/img/p.avif", "/img/p2.avif", "/img/p.png", "/img/poster.jpg", "/media/v.webm", "/media/subs.vtt", "/moved.png",
		// the stylesheets' and the redirects'
		"/css/base.css", "/css/print.css", "/fonts/f.woff2", "/fonts/f.woff", "/css/img/a-bg.png", "/css/img/escaped.png",
		"/img/print.png", "/css/i.png", "/css/t.png", "/css/new.css", "/css/new-bg.png", "/img/typed.png", "/img/moved-target.png",
	}
	sort.Strings(want)
	hits := site.requested()
	assert.Equal(t, want, slices.Sorted(maps.Keys(hits)), "requested")
	for p, n := range hits {
		assert.Equal(t, 1, n, "%s requested more than once", p)
	}
	assert.Equal(t, want, paths(site.URL, first.responses), "one Response record per fetch")
	assert.Equal(t, want, paths(site.URL, first.warc), "one WARC response record per fetch")
	assert.Equal(t, "succeeded", first.result["status"], first.stderr)
	assert.Equal(t, fmt.Sprintf("HTTP 200, %d requisites (0 already fetched), ", len(want)-1),
		strings.SplitAfter(fmt.Sprint(first.result["output_str"]), "fetched), ")[0])
	assert.NotContains(t, first.stderr, "cut:")

	// The second page shares main.css: only its own new image is fetched;
	// main.css and all it leads to (base.css, print.css, two fonts, three
	// images) and /img/a.png are counted as already fetched.
	second := fetchPage(t, site.URL+"/two.html", crawl)
	assert.Equal(t, map[string]int{"/two.html": 1, "/img/two.png": 1}, site.requested())
	assert.Equal(t, []string{"/img/two.png", "/two.html"}, paths(site.URL, second.warc))
	assert.Contains(t, second.result["output_str"], "HTTP 200, 1 requisites (10 already fetched)")
	// Each of the 10 is printed again, marked reused, with the first
	// fetch's answer: the crawl counts it even if the first page's attempt
	// was never recorded.
	reused := []string{"/css/base.css", "/css/img/a-bg.png", "/css/img/escaped.png", "/css/main.css", "/css/print.css",
		"/fonts/f.woff", "/fonts/f.woff2", "/img/a.png", "/img/hero.png", "/img/print.png"}
	assert.Equal(t, reused, paths(site.URL, slices.Collect(maps.Keys(second.reused))))
	for u, rec := range second.reused {
		want := maps.Clone(first.fetched[u])
		want["reused"] = true
		assert.Equal(t, want, rec, "%s: the first fetch's record, marked reused", u)
	}

	// Another crawl starts afresh.
	other := t.TempDir()
	t.Cleanup(func() { ForgetCrawl(other) })
	fetchPage(t, site.URL+"/two.html", other)
	assert.Len(t, site.requested(), 12, "the page, main.css and its 9, two.png")
}

// TestPageFetchCapCountsCSSRequisites: the 200-per-page limit counts what
// a page's stylesheets refer to. A page with a stylesheet and 150 images,
// the sheet referring to 100 more, fetches 200 and says in one cut notice
// that 51 of its 251 were not; a second page of the crawl with the same
// requisites, all already fetched, is cut the same way (its list does not
// depend on who fetched the sheet) and fetches nothing but itself.
func TestPageFetchCapCountsCSSRequisites(t *testing.T) {
	var page, sheet strings.Builder
	page.WriteString(`<link rel="stylesheet" href="/big.css">`)
	for i := range 150 {
		fmt.Fprintf(&page, `<img src="/i/%d.png">`, i)
	}
	for i := range 100 {
		fmt.Fprintf(&sheet, ".c%d{background:url(/c/%d.png)}\n", i, i)
	}
	site := newCountingSite(t, map[string]file{
		"/":        {ctype: "text/html", body: page.String()},
		"/again":   {ctype: "text/html", body: page.String()},
		"/big.css": {ctype: "text/css", body: sheet.String()},
	})
	crawl := t.TempDir()
	t.Cleanup(func() { ForgetCrawl(crawl) })

	run := fetchPage(t, site.URL+"/", crawl)
	hits := site.requested()
	assert.Len(t, hits, 1+200)
	assert.Equal(t, 1, hits["/c/48.png"], "the sheet's first 49 are within the limit")
	assert.Zero(t, hits["/c/49.png"])
	assert.Len(t, run.warc, 1+200)
	cut := fmt.Sprintf("archiveflow: cut: %s/: 51 of its 251 requisites not fetched: more than pagefetch's limit of 200 per page\n", site.URL)
	assert.Equal(t, 1, strings.Count(run.stderr, cut), run.stderr)

	again := fetchPage(t, site.URL+"/again", crawl)
	assert.Equal(t, map[string]int{"/again": 1}, site.requested())
	assert.Contains(t, again.result["output_str"], "0 requisites (200 already fetched)")
	assert.Contains(t, again.stderr, strings.Replace(cut, site.URL+"/:", site.URL+"/again:", 1))
}

// TestPageFetchImportChainIsBounded: a chain of @import is followed down
// to maxImportDepth imports below the page's own sheets (the last one
// fetched, what it refers to not), and a sheet importing itself is
// fetched once.
func TestPageFetchImportChainIsBounded(t *testing.T) {
	files := map[string]file{"/": {ctype: "text/html", body: `<style>@import "/s/1.css";</style><link rel=stylesheet href="/self.css">`},
		"/self.css": {ctype: "text/css", body: `@import "self.css"; @import url(/self.css#again);`}}
	for i := 1; i <= 2*maxImportDepth; i++ {
		files[fmt.Sprintf("/s/%d.css", i)] = file{ctype: "text/css", body: fmt.Sprintf(`@import "%d.css";`, i+1)}
	}
	site := newCountingSite(t, files)
	crawl := t.TempDir()
	t.Cleanup(func() { ForgetCrawl(crawl) })
	fetchPage(t, site.URL+"/", crawl)
	hits := site.requested()
	want := map[string]int{"/": 1, "/self.css": 1}
	// 1.css, imported by the page's <style>, is one of the page's own
	// sheets (depth 0, as a linked one): n.css is at depth n-1.
	for i := 1; i <= maxImportDepth+1; i++ {
		want[fmt.Sprintf("/s/%d.css", i)] = 1
	}
	assert.Equal(t, want, hits)
}

// TestCrawlPageInTheWorkerSharesItsPageInMemory: a crawl page's built-ins
// run inside the worker (RunIn, WithCrawlPage) keep pagefetch's WARC in
// memory (handed over, no page.warc.gz), read the page pagefetch parsed,
// not its files, and write the files only a process reads (page.body,
// pagefetch.json, urls.jsonl, title.txt) only once WriteCrawlPageFiles asks: the
// engine's call before a page hook runs as a process. Outside a crawl page
// they read the files (and find none).
func TestCrawlPageInTheWorkerSharesItsPageInMemory(t *testing.T) {
	site := newCountingSite(t, map[string]file{
		"/p":     {ctype: "text/html", body: `<title>Shared</title><link rel=stylesheet href="/s.css"><a href="/next">n</a>`},
		"/s.css": {ctype: "text/css", body: "a{}"},
	})
	snap := t.TempDir()
	kept := map[string][]byte{}
	ctx := WithCrawlPage(egress.WithPolicy(context.Background(), nil), func(path string, data []byte) { kept[path] = data })
	run := func(ctx context.Context, hook string) (int, string) {
		dir := snap + "/" + hook // not created: a built-in in the worker makes it when it writes an output
		var out, errb bytes.Buffer
		code := RunIn(ctx, dir, []string{hook, "--url=" + site.URL + "/p"},
			env(map[string]string{strings.ToUpper(hook) + "_ENABLED": "True", egress.EnvDeny: "[]", "SNAP_DIR": snap}), &out, &errb)
		return code, out.String() + errb.String()
	}
	code, out := run(ctx, "pagefetch")
	require.Equal(t, ExitOK, code, out)
	assert.NoFileExists(t, snap+"/pagefetch/"+PageFetchWARC, "the WARC stays in memory")
	data := kept[snap+"/pagefetch/"+PageFetchWARC]
	var uris, types []string
	require.NoError(t, warc.Read(bytes.NewReader(data), func(h warc.Header, _ io.Reader) error {
		types = append(types, h.Type)
		if h.Type == "response" {
			uris = append(uris, h.TargetURI)
		}
		return nil
	}))
	assert.Equal(t, []string{site.URL + "/p", site.URL + "/s.css"}, uris)
	assert.NotContains(t, types, "warcinfo", "the job WARC's own warcinfo replaces a page's: none in memory")
	assert.NoDirExists(t, snap+"/pagefetch", "its files wait for a hook run as a process: none yet")

	code, out = run(ctx, "title")
	require.Equal(t, ExitOK, code, out)
	assert.Contains(t, out, `"output_str":"Shared"`)
	assert.Contains(t, out, `{"type":"Snapshot","title":"Shared"}`, "the title's record: the page's index keeps it")
	assert.NoDirExists(t, snap+"/title", "title.txt waits for a hook run as a process")
	code, out = run(ctx, "outlinks")
	require.Equal(t, ExitOK, code, out)
	assert.Contains(t, out, `"url":"`+site.URL+`/next"`)
	assert.NotContains(t, out, "INFO", "a built-in in the worker does not log its result a second time")
	assert.NoDirExists(t, snap+"/outlinks")

	// Before a page hook runs as a process, the kept files are written
	// (and a later built-in's at once) for it to read.
	require.NoError(t, WriteCrawlPageFiles(ctx))
	for _, f := range []string{"pagefetch/" + pageFetchBodyFile, "pagefetch/" + pageFetchSummaryFile, "outlinks/" + outlinksFile, "title/" + titleFile} {
		assert.FileExists(t, snap+"/"+f)
	}
	sum, err := readPageFetchJSON(snap)
	require.NoError(t, err)
	assert.Equal(t, 200, sum.Status)
	require.NoError(t, os.RemoveAll(snap+"/outlinks"))
	code, out = run(ctx, "outlinks")
	require.Equal(t, ExitOK, code, out)
	assert.FileExists(t, snap+"/outlinks/"+outlinksFile)

	assert.Equal(t, map[string]int{"/p": 1, "/s.css": 1}, site.requested(), "the page was fetched once")

	require.NoError(t, os.RemoveAll(snap+"/pagefetch"))
	code, out = run(egress.WithPolicy(context.Background(), nil), "title")
	require.Equal(t, ExitOK, code, out)
	assert.Contains(t, out, `"source":"fetch"`, "without the crawl page, title looks for page.body, then fetches the page")
}
