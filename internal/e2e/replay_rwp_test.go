//go:build dev

package e2e

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/builtin/chrome"
	"github.com/archiveflow/archiveflow/internal/cdptest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/internal/wacz"
	"github.com/archiveflow/archiveflow/workflows"
)

// envReplayWebPage names the unpacked npm package replaywebpage (its
// index.html, ui.js, sw.js), as in starter's TestReplayWebPage test.
const envReplayWebPage = "ARCHIVEFLOW_REPLAYWEBPAGE"

// replayFont is the site's web font: a TrueType font of fonts-liberation
// (which Debian's Chromium recommends), else any under /usr/share/fonts
// (fontconfig's fonts-dejavu-core).
func replayFont(t *testing.T) []byte {
	t.Helper()
	font, err := os.ReadFile("/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf")
	if err == nil {
		return font
	}
	var found string
	_ = filepath.WalkDir("/usr/share/fonts", func(path string, d fs.DirEntry, err error) error {
		if err == nil && found == "" && d.Type().IsRegular() && strings.HasSuffix(path, ".ttf") {
			found = path
		}
		return nil
	})
	require.NotEmpty(t, found, "no TrueType font under /usr/share/fonts for the site's web font (apt-get install fonts-liberation)")
	font, err = os.ReadFile(found)
	require.NoError(t, err)
	return font
}

// replaySite is a small site with what a replay must bring back: images,
// a stylesheet with a background image and a web font, a script-built
// element, srcset, a redirect, a query-string link, a non-ASCII path and
// an image from another host. Every page has the same head (stylesheet,
// script) and an h1 #h with its marker.
type replaySite struct {
	site, offsite *httptest.Server
}

// pngOf is a w×h PNG of one colour.
func pngOf(t *testing.T, w, h int, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

// listenLoopback listens on a free port of the first of addrs it can.
func listenLoopback(t *testing.T, addrs ...string) net.Listener {
	t.Helper()
	var err error
	for _, a := range addrs {
		var l net.Listener
		if l, err = net.Listen("tcp", a+":0"); err == nil {
			return l
		}
	}
	require.NoError(t, err)
	return nil
}

// startReplaySite serves the site on 127.0.0.1 and its offsite image on
// 127.0.0.2 (another host; 127.0.0.1 on another port where 127.0.0.2 is
// not there), every answer Cache-Control: no-store, until the test ends.
func startReplaySite(t *testing.T, font []byte) *replaySite {
	t.Helper()
	rs := &replaySite{}
	off := http.NewServeMux()
	offPNG := pngOf(t, 7, 5, color.RGBA{200, 0, 0, 255})
	off.HandleFunc("/o.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(offPNG)
	})
	rs.offsite = httptest.NewUnstartedServer(off)
	rs.offsite.Listener.Close()
	rs.offsite.Listener = listenLoopback(t, "127.0.0.2", "127.0.0.1")
	rs.offsite.Start()
	t.Cleanup(rs.offsite.Close)

	images := map[string][]byte{
		"/img/a.png":                  pngOf(t, 11, 9, color.RGBA{0, 120, 0, 255}),
		"/img/bg.png":                 pngOf(t, 4, 4, color.RGBA{0, 0, 200, 255}),
		"/img/s1.png":                 pngOf(t, 12, 6, color.RGBA{100, 100, 0, 255}),
		"/img/s2.png":                 pngOf(t, 24, 12, color.RGBA{100, 100, 0, 255}),
		"/img/" + "\u00e9t\u00e9.png": pngOf(t, 6, 6, color.RGBA{0, 100, 100, 255}),
	}
	css := `@font-face { font-family: "AFTest"; src: url("/fonts/af.ttf") format("truetype"); }
h1 { font-family: "AFTest", monospace; color: rgb(1, 2, 3); }
.bg { background-image: url("../img/bg.png"); width: 20px; height: 20px; }
`
	js := `(function () {
  var p = document.createElement('p');
  p.id = 'built';
  p.textContent = 'BUILT-BY-SCRIPT';
  document.body.appendChild(p);
})();
`
	page := func(marker, body string) string {
		return `<!doctype html><html><head><meta charset="utf-8"><title>` + marker + `</title>
<link rel="stylesheet" href="/css/site.css"><script src="/js/build.js" defer></script></head>
<body><h1 id="h">` + marker + `</h1><div id="bgbox" class="bg"></div>` + body + `
<p><a href="/">home</a></p></body></html>`
	}
	pages := map[string]string{
		"/": page("AF-HOME", `<img src="/img/a.png" alt="a">
<ul><li><a href="/srcset.html">srcset</a><li><a href="/old">old</a><li><a href="/list?page=2&amp;sort=asc">list</a>
<li><a href="/caf`+"\u00e9"+`/">caf`+"\u00e9"+`</a><li><a href="/offsite.html">offsite</a></ul>`),
		"/srcset.html":  page("AF-SRCSET", `<img srcset="/img/s1.png 1x, /img/s2.png 2x" alt="s">`),
		"/moved.html":   page("AF-MOVED", `<img src="/img/a.png" alt="a">`),
		"/list":         "", // by query
		"/caf\u00e9/":   page("AF-CAF\u00c9", `<img src="/img/`+"\u00e9t\u00e9"+`.png" alt="e">`),
		"/offsite.html": page("AF-OFFSITE", `<img src="`+rs.offsite.URL+`/o.png" alt="o">`),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Nothing live may come back from Chromium's cache in the replay.
		w.Header().Set("Cache-Control", "no-store")
		p := r.URL.Path
		switch {
		case p == "/old":
			http.Redirect(w, r, "/moved.html", http.StatusMovedPermanently)
		case p == "/list":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = fmt.Fprint(w, page("AF-LIST-"+r.URL.Query().Get("page")+"-"+r.URL.Query().Get("sort"), `<img src="/img/a.png" alt="a">`))
		case pages[p] != "":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = fmt.Fprint(w, pages[p])
		case images[p] != nil:
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(images[p])
		case p == "/css/site.css":
			w.Header().Set("Content-Type", "text/css")
			_, _ = fmt.Fprint(w, css)
		case p == "/js/build.js":
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = fmt.Fprint(w, js)
		case p == "/fonts/af.ttf":
			w.Header().Set("Content-Type", "font/ttf")
			_, _ = w.Write(font)
		default:
			http.NotFound(w, r)
		}
	})
	rs.site = httptest.NewServer(mux)
	t.Cleanup(rs.site.Close)
	return rs
}

// replayMarkers are the h1 markers of the site's pages: each must be seen,
// live and replayed.
var replayMarkers = []string{"AF-HOME", "AF-SRCSET", "AF-MOVED", "AF-LIST-2-asc", "AF-CAF\u00c9", "AF-OFFSITE"}

// pageChecks is what the test asks of a page, live and replayed, as JSON:
// the h1's text, every image loaded, the stylesheet's colour, background
// image (loaded) and web font (loaded), the script-built element. It is
// the body of an async function of doc.
const pageChecks = `
  const win = doc.defaultView;
  const within = (p, ms) => Promise.race([p, new Promise(res => setTimeout(() => res('timeout'), ms))]);
  const r = {href: doc.location.href, ready: doc.readyState};
  const h = doc.getElementById('h');
  r.text = h ? h.textContent : '';
  const imgs = Array.from(doc.images);
  r.images = imgs.length;
  r.broken = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.currentSrc || i.src || i.srcset);
  r.color = h ? win.getComputedStyle(h).color : '';
  const box = doc.getElementById('bgbox');
  r.background = box ? win.getComputedStyle(box).backgroundImage : '';
  const m = /url\("?(.*?)"?\)/.exec(r.background);
  r.backgroundLoaded = false;
  if (m) {
    r.backgroundLoaded = (await within(new Promise(res => {
      const i = new win.Image();
      i.onload = () => res(i.naturalWidth > 0);
      i.onerror = () => res(false);
      i.src = m[1];
    }), 5000)) === true;
  }
  r.built = !!doc.getElementById('built');
  await within(doc.fonts.ready, 5000);
  r.fonts = Array.from(doc.fonts).map(f => f.family + ':' + f.status);
  r.resources = win.performance.getEntriesByType('resource').map(e => e.name);
  r.fontLoaded = Array.from(doc.fonts).some(f => f.family.replace(/"/g, '') === 'AFTest' && f.status === 'loaded');
  return JSON.stringify(r);
`

// liveProbe runs the checks on the top document.
const liveProbe = `(async () => { const doc = document; ` + pageChecks + ` })()`

// replayProbe finds ReplayWeb.page's replay frame (through shadow roots and
// same-origin frames: the one whose URL has mp_/) and runs the checks in it.
const replayProbe = `(async () => {
  function find(root) {
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) { const d = find(el.shadowRoot); if (d) return d; }
      if (el.tagName !== 'IFRAME') continue;
      try {
        const d = el.contentDocument;
        if (!d) continue;
        if (d.location.href.includes('mp_/') && d.getElementById('h')) return d;
        const dd = find(d);
        if (dd) return dd;
      } catch (e) {}
    }
    return null;
  }
  const doc = find(document);
  if (!doc) return '{}';
` + pageChecks + ` })()`

// pageResult is pageChecks' answer.
type pageResult struct {
	Href             string
	Ready            string
	Text             string
	Images           int
	Broken           []string
	Color            string
	Background       string
	BackgroundLoaded bool
	Built            bool
	Fonts            []string
	FontLoaded       bool
	Resources        []string // every resource the page loaded
}

// problems lists what a page lacks; want is its h1 marker.
func (r pageResult) problems(want string) []string {
	var p []string
	if r.Ready != "complete" {
		p = append(p, "not loaded ("+r.Ready+")")
	}
	if r.Text != want {
		p = append(p, fmt.Sprintf("text %q, want %q", r.Text, want))
	}
	if r.Images == 0 {
		p = append(p, "no image")
	}
	if len(r.Broken) > 0 {
		p = append(p, fmt.Sprintf("images not loaded: %v", r.Broken))
	}
	if r.Color != "rgb(1, 2, 3)" {
		p = append(p, "stylesheet not applied (colour "+r.Color+")")
	}
	if !r.BackgroundLoaded {
		p = append(p, "background image not loaded ("+r.Background+")")
	}
	if !r.Built {
		p = append(p, "script-built element missing")
	}
	if !r.FontLoaded {
		p = append(p, fmt.Sprintf("web font not loaded %v", r.Fonts))
	}
	return p
}

// TestReplayWebPageReplaysACrawl is issue 23's acceptance: a crawl of a
// small site (images, CSS with a background image and a web font, a
// script-built element, srcset, a redirect, a query-string link, a
// non-ASCII path, an offsite image) with the real page plugins is sealed
// into its WACZ (the one `starter status` names), and every page of the WACZ is opened in
// ReplayWeb.page (served by `starter replay --viewer`, loopback only) in
// headless Chromium after the site is shut down; each has its text, its
// images loaded, its stylesheet applied (colour, background image), its
// script-built element and its web font loaded. The same checks on the
// live site, before, are the control. It needs ARCHIVEFLOW_REPLAYWEBPAGE
// and Chromium; it is skipped without them.
func TestReplayWebPageReplaysACrawl(t *testing.T) {
	viewer := os.Getenv(envReplayWebPage)
	if viewer == "" {
		t.Skip(envReplayWebPage + " (an unpacked npm package replaywebpage) not set")
	}
	browser, err := chrome.Find("")
	if err != nil {
		t.Skip(err)
	}
	rs := startReplaySite(t, replayFont(t))
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, crawlConfig)
	s.StartPools(t, env)
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	job := s.SubmitCrawl(t, rs.site.URL+"/", 2, func(r *submit.Request) { r.Settings.UserAgent = crawlUA })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)

	// The WACZ the crawl's seal wrote, as status names it.
	file := sealedWACZ(t, bin, s, job.Ident)
	_, err = wacz.Validate(file)
	require.NoError(t, err)
	pages := waczPages(t, file)
	t.Logf("WACZ pages: %v", pages)
	require.NotEmpty(t, pages)

	b := cdptest.Start(t, browser)

	// The control: every page live.
	live := map[string]string{} // page URL → marker
	for _, p := range pages {
		r := poll(t, b, p.URL, liveProbe, func(r pageResult) bool { return r.Ready == "complete" && len(r.problems(r.Text)) == 0 })
		assert.Empty(t, r.problems(r.Text), "live %s: %+v", p.URL, r)
		live[p.URL] = r.Text
	}
	for _, m := range replayMarkers {
		assert.Contains(t, mapValues(live), m, "a page of the site not in the WACZ's pages (or not live)")
	}

	// The replay, with the site gone: nothing can come from it.
	rs.site.Close()
	rs.offsite.Close()
	base := serveViewer(t, bin, file, viewer)
	source := base + "/wacz/" + filepath.Base(file)
	for _, p := range pages {
		target := base + "/?source=" + url.QueryEscape(source) + "#view=pages&url=" + url.QueryEscape(p.URL) + "&ts=" + p.TS
		want := live[p.URL]
		r := poll(t, b, target, replayProbe, func(r pageResult) bool { return len(r.problems(want)) == 0 })
		assert.Empty(t, r.problems(want), "replayed %s: %+v", p.URL, r)
		assert.Contains(t, r.Href, "mp_/", "the replay frame")
		assert.GreaterOrEqual(t, len(r.Resources), 4, "the replayed page's stylesheet, script, image(s), font: %v", r.Resources)
		for _, u := range r.Resources {
			assert.True(t, strings.HasPrefix(u, base+"/"), "%s: a resource not from the replay: %s", p.URL, u)
		}
		t.Logf("replayed %s as %s: %d image(s), fonts %v", p.URL, r.Href, r.Images, r.Fonts)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// waczPage is a page of a WACZ's pages.jsonl, TS as ReplayWeb.page's ts.
type waczPage struct{ URL, TS string }

func waczPages(t *testing.T, file string) []waczPage {
	t.Helper()
	zr, err := zip.OpenReader(file)
	require.NoError(t, err)
	defer zr.Close()
	rc, err := zr.Open(wacz.PagesPath)
	require.NoError(t, err)
	defer rc.Close()
	var out []waczPage
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		var p struct{ URL, TS string }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &p))
		if p.URL == "" {
			continue // the header
		}
		ts, err := time.Parse(time.RFC3339Nano, p.TS)
		require.NoError(t, err, p.TS)
		out = append(out, waczPage{URL: p.URL, TS: ts.UTC().Format("20060102150405")})
	}
	require.NoError(t, sc.Err())
	return out
}

// serveViewer runs `starter replay FILE --viewer DIR` on a free loopback
// port until the test ends and returns its base URL.
func serveViewer(t *testing.T, bin, file, viewer string) string {
	t.Helper()
	cmd := exec.Command(bin, "replay", file, "--viewer", viewer, "--listen", "127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			assert.NoError(t, err, "starter replay: %s", stderr.String())
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Error("starter replay did not stop on an interrupt")
		}
	})
	serving := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+)/wacz/`)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("starter replay ended: %s", stderr.String())
			}
			if m := serving.FindStringSubmatch(l); m != nil {
				return m[1]
			}
		case <-deadline:
			t.Fatal("starter replay named no address")
		}
	}
}

// poll opens target (after about:blank, so that only a changed fragment
// still loads the page anew) and evaluates probe until done accepts its
// result or 45 seconds pass; it returns the last result.
func poll(t *testing.T, b *cdptest.Page, target, probe string, done func(pageResult) bool) pageResult {
	t.Helper()
	for _, u := range []string{"about:blank", target} {
		_, err := b.Call("Page.navigate", map[string]any{"url": u})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last pageResult
	var lastErr error
	for {
		raw, err := b.Call("Runtime.evaluate", map[string]any{"expression": probe, "returnByValue": true, "awaitPromise": true})
		if err == nil {
			var res struct {
				Result           struct{ Value string }
				ExceptionDetails json.RawMessage
			}
			err = json.Unmarshal(raw, &res)
			if err == nil && len(res.ExceptionDetails) > 0 {
				err = errors.New(string(res.ExceptionDetails))
			}
			if err == nil && res.Result.Value != "" {
				var r pageResult
				if err = json.Unmarshal([]byte(res.Result.Value), &r); err == nil {
					last = r
					if done(r) {
						return r
					}
				}
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			t.Logf("%s: gave up, last evaluation error %v", target, lastErr)
			return last
		case <-tick.C:
		}
	}
}
