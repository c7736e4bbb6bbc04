//go:build dev

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// robotsSite serves a small site with a robots.txt disallowing /private/,
// a sitemap index naming a gzip sitemap (a page linked from nowhere, and
// a disallowed one) and a malformed sitemap, and logs every request.
func robotsSite(t *testing.T) *policySite {
	t.Helper()
	var site *policySite
	page := func(w http.ResponseWriter, title string, links ...string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		var b strings.Builder
		for _, l := range links {
			fmt.Fprintf(&b, `<a href="%s">%s</a> `, l, l)
		}
		fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body>%s</body></html>`, title, b.String())
	}
	site = newLoggingSite(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			w.Header().Set("Content-Type", "text/plain")
			// A relative Sitemap line, as sites write them: resolved
			// against the robots.txt URL.
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\nCrawl-delay: 1\n\nSitemap: /sitemap-index.xml\n")
		case "/":
			page(w, "start", "/a", "/private/secret", "/private/other?x=1")
		case "/a":
			page(w, "a", "/")
		case "/private/secret", "/private/other", "/private/from-sitemap":
			page(w, "private")
		case "/only-in-sitemap":
			page(w, "only in the sitemap", "/a")
		case "/sitemap-index.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>%[1]s/sitemap-pages.xml.gz</loc></sitemap><sitemap><loc>sitemap-broken.xml</loc></sitemap></sitemapindex>`, site.URL)
		case "/sitemap-pages.xml.gz":
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			fmt.Fprintf(zw, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>%[1]s/only-in-sitemap</loc></url><url><loc>%[1]s/private/from-sitemap</loc></url><url><loc>%[1]s/a</loc></url></urlset>`, site.URL)
			_ = zw.Close()
			w.Header().Set("Content-Type", "application/gzip")
			_, _ = w.Write(b.Bytes())
		case "/sitemap-broken.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<urlset><url><loc>`+site.URL+`/never</loc>`)
		default:
			http.NotFound(w, r)
		}
	})
	return site
}

func (s *policySite) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.paths {
		if p == path {
			n++
		}
	}
	return n
}

// ignorePacket is an ignore entry of IDENT_log.
type ignorePacket struct{ Type, URL, Pattern, Source, Message string }

func ignorePackets(t *testing.T, s *Stack, ident string) (ignores []ignorePacket, messages []string) {
	t.Helper()
	for _, l := range strings.Split(jobLog(t, s, ident), "\n") {
		if l == "" {
			continue
		}
		var p ignorePacket
		require.NoError(t, json.Unmarshal([]byte(l), &p), l)
		switch p.Type {
		case "ignore":
			ignores = append(ignores, p)
		case "stdout":
			messages = append(messages, p.Message)
		}
	}
	return ignores, messages
}

// warcTargets counts the response records of the job's WARCs by target
// URI.
func warcTargets(t *testing.T, s *Stack, ident string) map[string]int {
	t.Helper()
	out := map[string]int{}
	eachWARCRecord(t, filepath.Join(s.Config.ArchiveDir, "crawls", ident, "warc", "*.warc.gz"), func(h warc.Header) {
		if h.Type == "response" {
			out[h.TargetURI]++
		}
	})
	return out
}

// eachWARCRecord calls fn with the header of every record of the WARC
// files glob matches (there must be one).
func eachWARCRecord(t *testing.T, glob string, fn func(warc.Header)) {
	t.Helper()
	files, err := filepath.Glob(glob)
	require.NoError(t, err)
	require.NotEmpty(t, files, "no WARC at %s", glob)
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		zr, err := gzip.NewReader(fh)
		require.NoError(t, err, f)
		err = warc.Read(zr, func(h warc.Header, _ io.Reader) error {
			fn(h)
			return nil
		})
		_ = fh.Close()
		require.NoError(t, err, f)
	}
}

// TestCrawlRobotsAndSitemaps is issue 28's robots.txt and sitemap
// acceptance. With --robots obey --sitemaps: the disallowed paths are
// never requested (the site's own request log), each is reported as an
// ignore packet naming the robots.txt rule; robots.txt is requested once
// and is in the job's WARC; the page only the (gzip, indexed) sitemap
// names is archived at depth 1; the malformed sitemap is reported in the
// job's log and the crawl still finishes. With --robots ignore on the
// same site: the disallowed pages are fetched, robots.txt is not asked.
// Both crawls are submitted with the starter binary's flags.
func TestCrawlRobotsAndSitemaps(t *testing.T) {
	bin := buildDevStarter(t)
	s := NewStack(t, server, builtinPlugins(t, "pagefetch", "title", "outlinks"), crawlConfig)
	s.StartPools(t, builtinEnv(t))

	obey := robotsSite(t)
	res := runStarter(t, bin, s, "submit", obey.URL+"/", "--depth", "2", "--robots", "obey", "--sitemaps", "--wait", "--wait-timeout", "3m")
	require.Equal(t, 0, res.code, "the crawl finishes: %s\n%s", res.stdout, res.stderr)
	id, _, err := ident.FromURL(obey.URL + "/")
	require.NoError(t, err)
	job := Job{Ident: id}

	for _, p := range []string{"/private/secret", "/private/other", "/private/from-sitemap"} {
		assert.Zero(t, obey.count(p), "%s is disallowed by robots.txt but was requested", p)
	}
	assert.Equal(t, 1, obey.count("/robots.txt"), "robots.txt is fetched once per crawl and host")
	assert.Equal(t, 1, obey.count("/only-in-sitemap"), "the page only the sitemap names is fetched")
	assert.Equal(t, 1, obey.count("/sitemap-pages.xml.gz"))
	assert.Equal(t, 1, obey.count("/sitemap-broken.xml"))
	assert.Equal(t, 1, obey.count("/sitemap.xml"), "the default sitemap location is asked too")

	byURL := map[string]frontier.Page{}
	for _, p := range crawlPages(t, s, job.Ident) {
		byURL[p.URL] = p
	}
	if p, ok := byURL[obey.URL+"/only-in-sitemap"]; assert.True(t, ok, "the sitemap's page is in the frontier") {
		assert.Equal(t, 1, p.Depth, "sitemap pages are seeded at depth 1")
		assert.Equal(t, frontier.StatusSucceeded, p.Status, p.Note)
	}
	for u := range byURL {
		assert.NotContains(t, u, "/private/", "a disallowed URL is in the frontier")
	}

	ignores, messages := ignorePackets(t, s, job.Ident)
	reported := map[string]string{}
	for _, p := range ignores {
		if p.Source == "robots.txt" {
			reported[p.URL] = p.Pattern
		}
	}
	rule := obey.URL + "/robots.txt: User-agent *, Disallow: /private/ "
	assert.Equal(t, rule+"(/private/secret)", reported[obey.URL+"/private/secret"], "ignores: %+v", ignores)
	assert.Equal(t, rule+"(/private/other?x=1)", reported[obey.URL+"/private/other?x=1"], "ignores: %+v", ignores)
	assert.Equal(t, rule+"(/private/from-sitemap)", reported[obey.URL+"/private/from-sitemap"], "ignores: %+v", ignores)
	log := strings.Join(messages, "\n")
	assert.Contains(t, log, "sitemap "+obey.URL+"/sitemap-broken.xml not read: xml:", "the malformed sitemap is reported")
	assert.Contains(t, log, "robots.txt "+obey.URL+"/robots.txt: HTTP 200", "the robots.txt fetch is in the job's log")

	inWARC := warcTargets(t, s, job.Ident)
	assert.Equal(t, 1, inWARC[obey.URL+"/robots.txt"], "robots.txt is recorded in the job's WARC once")
	assert.Equal(t, 1, inWARC[obey.URL+"/sitemap-index.xml"], "the sitemap index is recorded in the job's WARC")
	assert.Equal(t, 1, inWARC[obey.URL+"/only-in-sitemap"])

	ignoring := robotsSite(t)
	res = runStarter(t, bin, s, "submit", ignoring.URL+"/", "--depth", "2", "--robots", "ignore", "--wait", "--wait-timeout", "3m")
	require.Equal(t, 0, res.code, "the crawl finishes: %s\n%s", res.stdout, res.stderr)
	assert.Equal(t, 1, ignoring.count("/private/secret"), "robots ignore fetches what robots.txt disallows")
	assert.Equal(t, 1, ignoring.count("/private/other"))
	assert.Zero(t, ignoring.count("/robots.txt"), "robots ignore without sitemaps never asks for robots.txt")
	assert.Zero(t, ignoring.count("/only-in-sitemap"), "no sitemaps without --sitemaps")
}
