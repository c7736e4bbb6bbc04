//go:build dev

package e2e

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/internal/warc"
	"github.com/archiveflow/archiveflow/workflows"
)

// sentinelRule denies the sentinel's whole address, as fetch.deny's
// 169.254.0.0/16 denies a cloud metadata endpoint.
const sentinelRule = "127.0.0.5/32"

// redirectSite is a crawled site an attacker controls: its pages redirect
// (every redirect status, Refresh, <meta http-equiv=refresh>) to a
// sentinel on a denied loopback address, spelled every way a resolver or
// browser reads as that address.
type redirectSite struct {
	*policySite
	sentinel  *egresstest.Guarded
	spellings map[string]string // name → host:port of the sentinel
}

var redirectCodes = []int{301, 302, 303, 307, 308}

// sentinelName resolves to the sentinel through the test's resolver
// (sentinelLookup), which the workers' fetch decisions use.
const sentinelName = "sentinel.test"

func sentinelLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if host == sentinelName {
		return []netip.Addr{netip.MustParseAddr("127.0.0.5")}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func newRedirectSite(t *testing.T) *redirectSite {
	t.Helper()
	g := egresstest.GuardAt(t, "127.0.0.5")
	port := g.Port()
	rs := &redirectSite{sentinel: g, spellings: map[string]string{
		"addr":    g.Addr,
		"mapped":  fmt.Sprintf("[::ffff:127.0.0.5]:%d", port),
		"decimal": fmt.Sprintf("2130706437:%d", port),
		"octal":   fmt.Sprintf("0177.0.0.05:%d", port),
		"hex":     fmt.Sprintf("0x7f.0.0.5:%d", port),
		"name":    fmt.Sprintf("%s:%d", sentinelName, port),
	}}
	rs.policySite = newLoggingSite(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!DOCTYPE html><html><head><title>start</title>
<link rel="stylesheet" href="/r?to=hex&amp;code=307">
<link rel="icon" href="/r?to=octal&amp;code=302">
</head><body><img src="/r?to=mapped&amp;code=302"><img src="/r?to=decimal&amp;code=301">`)
			for _, code := range redirectCodes {
				for name := range rs.spellings {
					fmt.Fprintf(w, "<a href=\"/r?to=%s&amp;code=%d\">%s %d</a>\n", name, code, name, code)
				}
			}
			fmt.Fprint(w, `<a href="/refresh">refresh</a><a href="/meta">meta</a><a href="/requisites">requisites</a></body></html>`)
		case "/requisites":
			// A crawl page (pagefetch) whose requisites redirect there.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!DOCTYPE html><html><head><title>requisites</title></head><body>`)
			for name := range rs.spellings {
				fmt.Fprintf(w, "<img src=\"/r?to=%s&amp;code=302&amp;req=1\">\n", name)
			}
			fmt.Fprint(w, `</body></html>`)
		case "/r":
			code, _ := strconv.Atoi(q.Get("code"))
			to := rs.target(q.Get("to"), code)
			if q.Get("req") != "" {
				to += "-requisite"
			}
			http.Redirect(w, r, to, code)
		case "/refresh":
			w.Header().Set("Refresh", "0; url=http://"+g.Addr+"/refresh-secret")
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!DOCTYPE html><title>refresh</title><p>moving`)
		case "/meta":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>meta</title>
<meta http-equiv="refresh" content="0; url=http://%s/meta-secret"></head><body>moving</body></html>`, g.Addr)
		default:
			http.NotFound(w, r)
		}
	})
	return rs
}

// target is where /r?to=name&code=code redirects.
func (rs *redirectSite) target(name string, code int) string {
	return fmt.Sprintf("http://%s/secret-%s-%d", rs.spellings[name], name, code)
}

// isSentinel reports a URL whose host is any spelling of the sentinel.
func (rs *redirectSite) isSentinel(u string) bool {
	for _, host := range rs.spellings {
		if strings.Contains(u, "//"+host+"/") {
			return true
		}
	}
	return false
}

// logPacket is one IDENT_log entry, as ArchiveBot's readers see it.
type logPacket struct {
	Type         string `json:"type"`
	Message      string `json:"message"`
	URL          string `json:"url"`
	ResponseCode int    `json:"response_code"`
}

func logPackets(t *testing.T, s *Stack, ident string) []logPacket {
	t.Helper()
	var out []logPacket
	for _, l := range strings.Split(jobLog(t, s, ident), "\n") {
		if l == "" {
			continue
		}
		var p logPacket
		require.NoError(t, json.Unmarshal([]byte(l), &p), l)
		out = append(out, p)
	}
	return out
}

// checkNoSentinelInLogOrWARCs: no download packet (so no counted
// response, 4xx/5xx or other) and no WARC record is for the sentinel.
func (rs *redirectSite) checkNoSentinelInLogOrWARCs(t *testing.T, packets []logPacket, warcGlob string) {
	t.Helper()
	for _, p := range packets {
		if p.Type == "download" {
			assert.False(t, rs.isSentinel(p.URL), "a refused fetch was logged as a response: %+v", p)
		}
	}
	records := 0
	eachWARCRecord(t, warcGlob, func(h warc.Header) {
		records++
		assert.False(t, rs.isSentinel(h.TargetURI), "a %s record for %s", h.Type, h.TargetURI)
	})
	assert.NotZero(t, records, "the WARCs hold what was allowed")
}

// refusal is the job log's line for a refused fetch of target.
func refusal(target string) string {
	return fmt.Sprintf("archiveflow: fetch of %s denied by fetch.deny rule %q", target, sentinelRule)
}

func hasMessage(packets []logPacket, sub string) bool {
	for _, p := range packets {
		if p.Type == "stdout" && strings.Contains(p.Message, sub) {
			return true
		}
	}
	return false
}

// TestNoRedirectReachesADeniedAddress is issue 29's acceptance: a crawl
// (pagefetch, title, outlinks) and single-page jobs with every built-in
// hook (headers, wget, favicon, title, outlinks, htmltotext, and dom when
// Chromium is installed) of pages that redirect to a denied sentinel,
// spelled as its address, IPv4-mapped IPv6, decimal, octal and hex, by
// every redirect status, Refresh and <meta http-equiv=refresh>, and of a
// page whose requisites do, and a URL list that does: the sentinel sees
// no connection, each refusal
// is in the job log with its rule, no WARC holds a record for it, and no
// response is counted for it.
func TestNoRedirectReachesADeniedAddress(t *testing.T) {
	if _, err := exec.LookPath("wget"); err != nil {
		t.Skip("wget is not installed")
	}
	site := newRedirectSite(t)
	plugins := []string{"headers", "wget", "favicon", "title", "outlinks", "htmltotext", "pagefetch"}
	chromium := hasChromium()
	if chromium {
		plugins = append(plugins, "dom")
	}
	s := NewStack(t, server, builtinPlugins(t, plugins...), func(c *config.Config) {
		c.Fetch.Deny = append(c.Fetch.Deny, sentinelRule)
		c.Hooks.Timeout = time.Minute
		c.Crawl.AttrInterval = 500 * time.Millisecond
		c.Job.Concurrency = 8
		// Nine jobs with Chromium hooks at once on 2 cores: heartbeats may
		// reach the server later than the drills' 3 s (NewStack). This
		// test is about the fetch policy, not failover.
		c.Hooks.HeartbeatTimeout, c.Job.HostTimeout = 15*time.Second, 15*time.Second
	})
	s.Lookup = sentinelLookup
	s.StartPools(t, builtinEnv(t))

	// Single-page jobs (pagefetch is a crawl's page plugin: off here).
	seeds := map[string]string{"/": ""}
	for i, name := range []string{"addr", "mapped", "decimal", "octal", "hex", "name"} {
		code := redirectCodes[i%len(redirectCodes)]
		seeds[fmt.Sprintf("/r?to=%s&code=%d", name, code)] = site.target(name, code)
	}
	if chromium {
		seeds["/refresh"], seeds["/meta"] = "", ""
	}
	jobs := map[string]Job{}
	for path := range seeds {
		jobs[path] = s.Submit(t, site.URL+path, nil)
	}
	for path, job := range jobs {
		require.NoError(t, s.Wait(t, job, 3*time.Minute), path)
		var st workflows.Status
		require.NoError(t, job.Run.Get(context.Background(), &st))
		packets := logPackets(t, s, job.Ident)
		site.checkNoSentinelInLogOrWARCs(t, packets, filepath.Join(s.SnapDir(job), "wget", "warc", "*.warc.gz"))
		target := seeds[path]
		if target == "" {
			continue
		}
		res := resultsByHook(st)
		final := []string{"headers", "wget"}
		if chromium {
			final = append(final, "dom") // reads headers' refusal: no capture of an error page
		}
		for _, hook := range final {
			assert.Equal(t, model.StatusFailed, res[hook].Status, "%s %s: %s", path, hook, res[hook].OutputStr)
			assert.Contains(t, res[hook].Error, fmt.Sprintf("fetch of %s denied by fetch.deny rule %q", target, sentinelRule), "%s %s", path, hook)
			assert.Equal(t, 1, res[hook].Attempts, "%s %s: a refusal is final", path, hook)
		}
		for _, hook := range []string{"title", "outlinks", "htmltotext"} {
			assert.Equal(t, model.StatusNoResults, res[hook].Status, "%s %s reads the refused page, fetches nothing: %s", path, hook, res[hook].OutputStr)
		}
		assert.True(t, hasMessage(packets, "[headers/on_Snapshot__20_headers.sh] "+refusal(target)), "%s: headers' refusal in the job log", path)
		assert.True(t, hasMessage(packets, "[wget/on_Snapshot__60_wget.bg.sh] "+refusal(target)), "%s: wget's refusal (the proxy's) in the job log", path)
	}
	start := logPackets(t, s, jobs["/"].Ident)
	for _, target := range []string{site.target("hex", 307), site.target("mapped", 302), site.target("decimal", 301)} {
		assert.True(t, hasMessage(start, "[wget/on_Snapshot__60_wget.bg.sh] "+refusal(target)), "wget's refused requisite %s in the job log", target)
	}
	assert.True(t, hasMessage(start, "[favicon/on_Snapshot__61_favicon.sh] "+refusal(site.target("octal", 302))), "favicon's refused icon in the job log")
	assert.Zero(t, site.sentinel.Connections(), "the denied sentinel was connected to by a single-page job")

	// A crawl of every redirect: pages run pagefetch, title and outlinks
	// in the worker's process.
	crawl := s.SubmitCrawl(t, site.URL+"/", -1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var cst workflows.CrawlStatus
	require.NoError(t, crawl.Run.Get(ctx, &cst))
	assert.Equal(t, model.StateFinished, cst.State, cst.Error)
	packets := logPackets(t, s, crawl.Ident)
	site.checkNoSentinelInLogOrWARCs(t, packets, filepath.Join(s.Config.ArchiveDir, "crawls", crawl.Ident, "warc", "*.warc.gz"))
	pages := crawlPages(t, s, crawl.Ident)
	for _, code := range redirectCodes {
		for name := range site.spellings {
			u := fmt.Sprintf("%s/r?to=%s&code=%d", site.URL, name, code)
			p, ok := pageByURL(pages, u)
			if !assert.True(t, ok, "page %s crawled", u) {
				continue
			}
			target := site.target(name, code)
			assert.Equal(t, frontier.StatusFailed, p.Status, "%s: a refusal is final", u)
			assert.Contains(t, p.Note, fmt.Sprintf("fetch of %s denied by fetch.deny rule %q", target, sentinelRule), u)
			assert.True(t, hasMessage(packets, "[page] "+refusal(target)), "%s: the refusal is in the job log", u)
		}
	}
	for _, p := range pages {
		assert.False(t, site.isSentinel(p.URL), "the sentinel became a page: %s", p.URL)
	}
	// A crawl page whose requisites redirect to the sentinel: archived
	// with the redirects the site sent (pagefetch records a requisite's
	// answer and does not follow it), the sentinel never asked.
	req, ok := pageByURL(pages, site.URL+"/requisites")
	if assert.True(t, ok, "the requisites page is crawled") {
		assert.Equal(t, frontier.StatusSucceeded, req.Status, req.Note)
	}
	redirects := map[string]int{}
	for _, p := range packets {
		if p.Type == "download" && strings.Contains(p.URL, "req=1") {
			redirects[p.URL] = p.ResponseCode
		}
	}
	for name := range site.spellings {
		u := fmt.Sprintf("%s/r?to=%s&code=302&req=1", site.URL, name)
		assert.Equal(t, 302, redirects[u], "the requisite %s: its redirect is what was archived", u)
	}

	// A URL-list crawl whose list redirects to the sentinel by name: the
	// crawl fails naming the rule.
	listURL := site.URL + "/r?to=name&code=302"
	list := s.SubmitCrawl(t, site.URL+"/", -1, func(r *submit.Request) { r.URLList = listURL })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel2()
	var lst workflows.CrawlStatus
	err := list.Run.Get(ctx2, &lst)
	msg := lst.Error
	if err != nil {
		msg = err.Error()
	}
	assert.Contains(t, msg, fmt.Sprintf("fetch of %s denied by fetch.deny rule %q (%s resolves to 127.0.0.5)",
		site.target("name", 302), sentinelRule, sentinelName), "the URL list's refusal")
	assert.Zero(t, site.sentinel.Connections(), "the denied sentinel was connected to")
}

// TestUnreachableSiteIsNotArchivedAsAResponse: a snapshot of a URL
// whose port refuses connections (issue 23's example) records nothing the
// site did not send: no response in wget's WARC (the proxy closes the
// connection instead of answering 502 with its own text, and the request
// that never reached the site is dropped), no 502 counted, and no hook
// reads the proxy's error text as the page.
func TestUnreachableSiteIsNotArchivedAsAResponse(t *testing.T) {
	if _, err := exec.LookPath("wget"); err != nil {
		t.Skip("wget is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	s := NewStack(t, server, builtinPlugins(t, "headers", "wget", "htmltotext"), func(c *config.Config) {
		c.Hooks.Timeout = time.Minute
	})
	require.NotEmpty(t, s.Config.Fetch.Deny, "the default policy: every fetch goes through the proxy")
	s.StartPools(t, builtinEnv(t))
	target := "http://" + closed + "/nothing-here"
	job := s.Submit(t, target, nil)
	_ = s.Wait(t, job, 3*time.Minute)

	packets := logPackets(t, s, job.Ident)
	for _, p := range packets {
		if p.Type == "download" {
			assert.NotEqual(t, 502, p.ResponseCode, "the proxy's status was counted: %+v", p)
		}
		assert.NotContains(t, p.Message, "HTTP 502", "a hook took the proxy's answer for the site's")
	}
	files, err := filepath.Glob(filepath.Join(s.SnapDir(job), "wget", "warc", "*.warc.gz"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "wget wrote its WARC (warcinfo, its log)")
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		zr, err := gzip.NewReader(fh)
		require.NoError(t, err)
		require.NoError(t, warc.Read(zr, func(h warc.Header, _ io.Reader) error {
			assert.NotEqual(t, target, h.TargetURI, "%s holds a %s record for a request that never reached the site", f, h.Type)
			return nil
		}))
		_ = fh.Close()
	}
	text, err := os.ReadFile(filepath.Join(s.SnapDir(job), "htmltotext", "htmltotext.txt"))
	if err == nil {
		assert.NotContains(t, string(text), "archiveflow fetch proxy", "the proxy's error text archived as the page's text")
	}
}
