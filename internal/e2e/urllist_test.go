//go:build dev

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/abbot"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/engine"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/workflows"
)

// listSites are the two hosts of a URL-list job's pages (127.0.0.1 and
// localhost, each its own server) and the list, served by the first.
type listSites struct {
	a, b *policySite
	list string // the list's URL
}

// newListSites serves, on host A, /list.txt (body) and pages /a → /c → /a
// (/a with an image); on host B, /x → /y. Every request is logged.
func newListSites(t *testing.T, list func(a, b string) string) *listSites {
	t.Helper()
	ls := &listSites{}
	page := func(w http.ResponseWriter, title string, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body>%s</body></html>`, title, body)
	}
	ls.b = newLoggingSite(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/x":
			page(w, "x", `<a href="/y">y</a>`)
		case "/y":
			page(w, "y", `<p>y</p>`)
		default:
			http.NotFound(w, r)
		}
	})
	ls.a = newLoggingSite(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/list.txt":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, list(ls.a.URL, strings.Replace(ls.b.URL, "127.0.0.1", "localhost", 1)))
		case "/a":
			page(w, "a", `<img src="/a.png"><a href="/c">c</a>`)
		case "/a.png":
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "\x89PNG\r\n\x1a\n")
		case "/c":
			page(w, "c", `<a href="/a">a</a>`)
		default:
			http.NotFound(w, r)
		}
	})
	ls.list = ls.a.URL + "/list.txt"
	return ls
}

// servedPaths are the paths a site served, in order.
func (s *policySite) servedPaths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...)
}

// TestArchiveBotURLListJobs is issue 13's URL-list acceptance: `!a <` and
// `!ao <` jobs queued as ArchiveBot's bot does, whose list (served by a
// local site) names pages on two hosts, a blank line, a comment, a bad line
// and a URL the fetch policy denies. The recursive job crawls from every
// listed URL on both hosts; the shallow one fetches each listed URL once
// with its requisites. The bad line and the denied URL are ignore packets,
// the denied address is never connected to, the counters are ArchiveBot's,
// the list is kept with the job, and both end with ArchiveBot's finished
// keys. A list that cannot be had fails its job, naming the list.
func TestArchiveBotURLListJobs(t *testing.T) {
	g := egresstest.Guard(t)
	denied := "http://" + g.Addr + "/secret"
	list := func(a, b string) string {
		return "# pages for the test\n" + a + "/a\n\n   \n" + b + "/x\nthis is not a url\n" + denied + "\nftp://example.org/f\n"
	}
	rec, ao := newListSites(t, list), newListSites(t, list)
	empty := newLoggingSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/empty.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "# nothing here\n\n")
	})
	s := NewStack(t, server, builtinPlugins(t, "pagefetch", "title", "outlinks"), func(c *config.Config) {
		archiveBotPool("lists", 4)(c)
		crawlConfig(c)
		c.Fetch.Deny = append(c.Fetch.Deny, g.Addr)
	})
	s.StartPools(t, builtinEnv(t))
	ctx := context.Background()
	bot := abbot.Bot{Redis: s.Redis}
	recJob, err := bot.Queue(ctx, rec.list, abbot.Options{URLFile: true})
	require.NoError(t, err)
	aoJob, err := bot.Queue(ctx, ao.list, abbot.Options{URLFile: true, Shallow: true})
	require.NoError(t, err)
	missing, err := bot.Queue(ctx, empty.URL+"/missing.txt", abbot.Options{URLFile: true})
	require.NoError(t, err)
	emptyJob, err := bot.Queue(ctx, empty.URL+"/empty.txt", abbot.Options{URLFile: true, Shallow: true})
	require.NoError(t, err)
	startPipeline(t, s, "lists1", nil)

	state := func(ident string) string { return s.Redis.HGet(ctx, ident, "state").Val() }
	for _, id := range []string{recJob.Ident, aoJob.Ident, missing.Ident, emptyJob.Ident} {
		require.Eventually(t, func() bool { st := state(id); return st == "finished" || st == "failed" },
			3*time.Minute, 100*time.Millisecond, "job %s ends", id)
	}

	// `!a <`: recursive from every listed URL, both hosts in scope.
	assert.Equal(t, "finished", state(recJob.Ident))
	assert.ElementsMatch(t, []string{"/list.txt", "/a", "/a.png", "/c"}, rec.a.servedPaths(), "host A: the list once, its pages once each")
	assert.ElementsMatch(t, []string{"/x", "/y"}, rec.b.servedPaths(), "host B is a start host: /y is followed")
	// `!ao <`: each listed URL once with its requisites, nothing followed.
	assert.Equal(t, "finished", state(aoJob.Ident))
	assert.ElementsMatch(t, []string{"/list.txt", "/a", "/a.png"}, ao.a.servedPaths())
	assert.ElementsMatch(t, []string{"/x"}, ao.b.servedPaths())
	assert.Zero(t, g.Connections(), "the denied URL was connected to")

	for _, c := range []struct {
		ident string
	}{{recJob.Ident}, {aoJob.Ident}} {
		h := assertJobFields(t, s, c.ident, map[string]string{"r4xx": "0", "r5xx": "0",
			"runk": "0", "error_count": "0", "url_file": map[string]string{recJob.Ident: rec.list, aoJob.Ident: ao.list}[c.ident]})
		assert.NotEmpty(t, h["finished_at"])
		assert.Equal(t, h["items_downloaded"], h["items_queued"], "!status: nothing queued at the end")
		assert.Equal(t, h["items_downloaded"], h["r2xx"], "every download was 2xx")
		assert.Equal(t, h["url"], h["url_file"], "url holds the list's URL, as ArchiveBot's bot writes it")

		entries, err := s.Store.ReadLog(ctx, c.ident, 0, 1000)
		require.NoError(t, err)
		var ignores []string
		downloads := 0
		for _, e := range entries {
			switch e.Packet.Type {
			case rkeys.PacketIgnore:
				ignores = append(ignores, e.Packet.URL+" | "+e.Packet.Pattern+" | "+e.Packet.Source)
			case rkeys.PacketDownload:
				downloads++
			}
		}
		assert.ElementsMatch(t, []string{
			"this is not a url | line 6: must be one URL (no spaces inside) | url_list",
			denied + " | " + g.Addr + " | fetch.deny",
			"ftp://example.org/f | line 8: must be an http(s) URL | url_list",
		}, ignores, "the bad lines and the denied URL are reported, nothing silently lost")
		assert.Equal(t, h["items_downloaded"], fmt.Sprint(downloads), "one download packet per item downloaded")

		kept, err := filepath.Glob(filepath.Join(s.Config.ArchiveDir, "crawls", c.ident, "*", engine.URLListFile))
		require.NoError(t, err)
		require.Len(t, kept, 1, "the list is kept in the job's crawl directory")
		b, err := os.ReadFile(kept[0])
		require.NoError(t, err)
		assert.Contains(t, string(b), "this is not a url")
	}

	// Lists that cannot be had fail their job, naming the list and the
	// rule, with ArchiveBot's failed-job keys.
	for _, c := range []struct{ ident, url, rule string }{
		{missing.Ident, empty.URL + "/missing.txt", "HTTP status 404"},
		{emptyJob.Ident, empty.URL + "/empty.txt", "names no URL to crawl"},
	} {
		assert.Equal(t, "failed", state(c.ident))
		h := assertJobFields(t, s, c.ident, map[string]string{"state": "failed"})
		assert.NotEmpty(t, h["finished_at"])
		entries, err := s.Store.ReadLog(ctx, c.ident, 0, 1000)
		require.NoError(t, err)
		var text []string
		for _, e := range entries {
			text = append(text, e.Packet.Message)
		}
		joined := strings.Join(text, "\n")
		assert.Contains(t, joined, c.url, "the job's log names the list")
		assert.Contains(t, joined, c.rule)
		working, err := s.Redis.LRange(ctx, "working", 0, -1).Result()
		require.NoError(t, err)
		assert.NotContains(t, working, c.ident)
	}
	assert.Equal(t, 2, jobsCounter(t, s, "jobs_completed"))
	assert.Equal(t, 2, jobsCounter(t, s, "jobs_failed"))
	assert.ElementsMatch(t, []string{"/missing.txt", "/empty.txt"}, empty.servedPaths(), "a refused list is not fetched again")
}

// TestURLListCrawlRetryDoesNotFetchTheListAgain: a URL-list crawl whose
// first listed URL (page 1) answered 500 ends finished with that page
// failed. Once the page is repaired and the list is gone (404), `starter
// retry IDENT --wait` (the binary) runs page 1 again from the frontier and
// crawls the link it now has, one level below it; the list is never asked
// for again, so its loss does not fail the retry.
func TestURLListCrawlRetryDoesNotFetchTheListAgain(t *testing.T) {
	var broken, gone atomic.Bool
	broken.Store(true)
	site := newLoggingSite(t, func(w http.ResponseWriter, r *http.Request) {
		base := "http://" + r.Host
		body := ""
		switch {
		case r.URL.Path == "/list.txt" && !gone.Load():
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, base+"/a\n"+base+"/b\n")
			return
		case r.URL.Path == "/a" && broken.Load():
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		case r.URL.Path == "/a":
			body = `<a href="/c">c</a>`
		case r.URL.Path == "/b" || r.URL.Path == "/c":
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>%s</title></head><body>%s</body></html>`, r.URL.Path, body)
	})
	s := NewStack(t, server, builtinPlugins(t, "pagefetch", "title", "outlinks"), func(c *config.Config) {
		crawlConfig(c)
		c.Crawl.PageAttempts = 1
	})
	s.StartPools(t, builtinEnv(t))
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	list := site.URL + "/list.txt"
	job := s.SubmitCrawl(t, list, -1, func(r *submit.Request) { r.URLList = list })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	require.Equal(t, model.StateFinished, st.State, st.Error)
	a, ok := pageByURL(crawlPages(t, s, job.Ident), site.URL+"/a")
	require.True(t, ok)
	require.Equal(t, int64(1), a.ID, "the list's first URL is page 1")
	require.Equal(t, frontier.StatusFailed, a.Status, a.Note)

	broken.Store(false)
	gone.Store(true)
	mark := len(site.servedPaths())
	res := runStarter(t, bin, s, "retry", job.Ident, "--wait")
	require.Equal(t, 0, res.code, "starter retry --wait: %s%s", res.stdout, res.stderr)
	require.NoError(t, s.Client.GetWorkflow(ctx, job.Ident, "").Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Zero(t, st.Counts.Failed)
	served := site.servedPaths()[mark:]
	assert.Contains(t, served, "/a")
	assert.Contains(t, served, "/c", "page 1's link is crawled")
	assert.NotContains(t, served, "/list.txt", "the retry does not fetch the list again")
	assert.NotContains(t, served, "/b", "a page the first run fetched is not fetched again")
	c, ok := pageByURL(crawlPages(t, s, job.Ident), site.URL+"/c")
	require.True(t, ok)
	assert.Equal(t, 1, c.Depth)
	assert.Equal(t, frontier.StatusSucceeded, c.Status, c.Note)
}
