package engine

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/pageindex"
	"github.com/archiveflow/archiveflow/internal/procs"
	"github.com/archiveflow/archiveflow/internal/snapindex"
	"github.com/archiveflow/archiveflow/internal/wacz"
)

// writeHook writes an executable hook script.
func writeHook(t *testing.T, path, script string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755))
}

func pageEngine(t testing.TB, plugins string, configure func(*Config)) *Engine {
	t.Helper()
	cfg := Config{PluginDirs: []string{plugins}, ArchiveDir: t.TempDir(),
		Env: []string{"PATH=" + os.Getenv("PATH")}, Timeout: 20 * time.Second, Grace: time.Second, LineCap: 1 << 20,
		Instance: "host-1", MaxResponses: 100, Log: zap.NewNop()}
	if configure != nil {
		configure(&cfg)
	}
	e, err := New(cfg)
	require.NoError(t, err)
	// As a worker does when it stops: crawls still set up are torn down.
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func testCrawl(plugins ...string) activities.Crawl {
	return activities.Crawl{Job: activities.Job{Ident: "crawl1", URL: "http://site.test/", SnapshotID: "crawl1"},
		MaxDepth: -1, PagePlugins: plugins, PageAttempts: 3, MaxLinks: 1000}
}

// readGzip reads a concatenation of gzip members.
func readGzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	b, err := io.ReadAll(zr)
	require.NoError(t, err)
	return string(b)
}

func TestRunPageSetupStepsLinksAndWARC(t *testing.T) {
	plugins := t.TempDir()
	// Crawl setup: a daemon that lives until teardown, then a foreground hook.
	writeHook(t, filepath.Join(plugins, "daemon", "on_CrawlSetup__90_daemon.daemon.bg.sh"), `
echo "$CRAWL_DIR $1" > started
trap 'echo stopped > stopped; exit 0' TERM
echo "daemon up" # ready: the next hooks start
while :; do sleep 0.05; done
`)
	writeHook(t, filepath.Join(plugins, "daemon", "on_CrawlSetup__91_wait.sh"), `
n=$(cat ../setup-runs 2>/dev/null || echo 0); echo $((n+1)) > ../setup-runs
while [ ! -f started ]; do sleep 0.01; done
`)
	writeHook(t, filepath.Join(plugins, "fetch", "on_Snapshot__21_fetch.sh"), `
case "$1" in *bad*) echo '{"type":"Response","url":"http://site.test/bad","status":500,"bytes":3}'; exit 1;; esac
printf '%s' "$1" | gzip > page.warc.gz
echo '{"type":"Response","url":"'"${1#--url=}"'","status":200,"bytes":10}'
echo '{"type":"Response","url":"http://site.test/s.css","status":200,"bytes":5}'
echo "$USER_AGENT" > ua
echo "$EXTRA_CONTEXT" > ctx
echo '{"type":"ArchiveResult","status":"succeeded"}'
`)
	writeHook(t, filepath.Join(plugins, "links", "on_Snapshot__70_links.sh"), `
echo '{"type":"Snapshot","url":"http://site.test/a","depth":9}'
echo '{"type":"Snapshot","url":"http://site.test/b","parent":"http://site.test/"}'
echo '{"type":"Snapshot","depth":1}'
`)
	require.NoError(t, os.WriteFile(filepath.Join(plugins, "links", "config.json"),
		[]byte(`{"properties":{"LINKS_ENABLED":{"type":"boolean","default":false}}}`), 0o644))
	writeHook(t, filepath.Join(plugins, "other", "on_Snapshot__10_other.sh"), "touch ran\n")
	e := pageEngine(t, plugins, func(c *Config) { c.WARCMaxBytes = 60 })
	cr := testCrawl("fetch", "links")
	ctx := context.Background()

	var wg sync.WaitGroup
	outs := make([]activities.PageOutcome, 3)
	for i := range outs {
		wg.Go(func() {
			var err error
			outs[i], err = e.RunPage(ctx, activities.PageRun{Crawl: cr,
				Page:     activities.PageSpec{ID: int64(i + 2), URL: fmt.Sprintf("http://site.test/p%d", i), Depth: 2, Attempt: 1, UA: "rule-ua"},
				Settings: model.Settings{Concurrency: 1, UserAgent: "job-ua"}})
			require.NoError(t, err)
		})
	}
	wg.Wait()
	crawlDir := filepath.Join(e.cfg.ArchiveDir, "crawls", "crawl1", "host-1")
	runs, err := os.ReadFile(filepath.Join(crawlDir, "setup-runs"))
	require.NoError(t, err)
	assert.Equal(t, "1\n", string(runs), "setup runs once per crawl and worker, pages wait for it")
	started, err := os.ReadFile(filepath.Join(crawlDir, "daemon", "started"))
	require.NoError(t, err)
	assert.Equal(t, crawlDir+" --url=http://site.test/\n", string(started), "setup hooks get CRAWL_DIR and --url only")

	for i, out := range outs {
		assert.Equal(t, activities.PageSucceeded, out.Status, out.Note)
		assert.Len(t, out.Responses, 2)
		assert.Equal(t, []activities.Discovered{{URL: "http://site.test/a"}, {URL: "http://site.test/b"}}, out.Links,
			"invalid Snapshot records are dropped")
		dir := e.pageDir("crawl1", int64(i+2))
		ua, err := os.ReadFile(filepath.Join(dir, "fetch", "ua"))
		require.NoError(t, err)
		assert.Equal(t, "rule-ua\n", string(ua), "the rule's user agent wins")
		ctxJSON, err := os.ReadFile(filepath.Join(dir, "fetch", "ctx"))
		require.NoError(t, err)
		assert.Contains(t, string(ctxJSON), `"depth":2`)
		assert.Contains(t, string(ctxJSON), fmt.Sprintf(`"snapshot_id":"crawl1-p%d"`, i+2))
		assert.NoFileExists(t, filepath.Join(dir, "other", "ran"), "only the page plugin set runs")
		assert.NoFileExists(t, filepath.Join(dir, "fetch", "page.warc.gz"), "the page WARC moved into the job's")
	}
	warcs, err := filepath.Glob(filepath.Join(e.cfg.ArchiveDir, "crawls", "crawl1", "warc", "*.warc.gz"))
	require.NoError(t, err)
	sort.Strings(warcs)
	require.Len(t, warcs, 3, "rotated at 60 bytes: one ~45-byte page member per file: %v", warcs)
	assert.Equal(t, "crawl1-host-1-00001.warc.gz", filepath.Base(warcs[0]))
	var all string
	for _, w := range warcs {
		all += readGzip(t, w)
	}
	for i := range outs {
		assert.Contains(t, all, fmt.Sprintf("--url=http://site.test/p%d", i))
	}

	// A transient hook ends the page: later steps do not run, no links.
	out, err := e.RunPage(ctx, activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: 9, URL: "http://site.test/bad", Attempt: 1}})
	require.NoError(t, err)
	assert.Equal(t, activities.PageTransient, out.Status)
	assert.Contains(t, out.Note, "exit 1")
	assert.Empty(t, out.Links)
	require.Len(t, out.Responses, 1, "the failed attempt's responses are counted")
	assert.Equal(t, 500, out.Responses[0].Status)

	require.NoError(t, e.TeardownCrawl(ctx, "crawl1"))
	assert.FileExists(t, filepath.Join(crawlDir, "daemon", "stopped"), "the daemon got SIGTERM at teardown")
	require.NoError(t, e.TeardownCrawl(ctx, "crawl1"), "a second teardown is a no-op")

	// A page plugin that is not installed is a configuration error.
	_, err = e.RunPage(ctx, activities.PageRun{Crawl: testCrawl("fetch", "nosuch"), Page: activities.PageSpec{ID: 1, URL: "http://site.test/", Attempt: 1}})
	require.ErrorIs(t, err, activities.ErrConfig)
	assert.Contains(t, err.Error(), `"nosuch": not found`)
}

func TestRunPageBuiltinsInProcess(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/s.css":
			w.Header().Set("Content-Type", "text/css")
			fmt.Fprint(w, "body{}")
		case "/gone":
			http.NotFound(w, r)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<html><head><title>T %s</title><link rel=stylesheet href="/s.css"></head><body><a href="/a">a</a> <a href="mailto:x@y">m</a></body></html>`, r.URL.Path)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	plugins, err := filepath.Abs("../../plugins")
	require.NoError(t, err)
	// No ARCHIVEFLOW_BIN and no archiveflow on PATH: executing a wrapper
	// would fail, so every hook below ran in this process.
	e := pageEngine(t, plugins, func(c *Config) { c.InProcessBuiltins = true })
	cr := testCrawl("pagefetch", "title", "outlinks")
	cr.Job.URL = srv.URL + "/"
	ctx := context.Background()
	for i, path := range []string{"/one", "/two"} {
		out, err := e.RunPage(ctx, activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: int64(i + 2), URL: srv.URL + path, Depth: 1, Attempt: 1}})
		require.NoError(t, err)
		require.Equal(t, activities.PageSucceeded, out.Status, out.Note)
		assert.Equal(t, []activities.Discovered{{URL: srv.URL + "/a"}}, out.Links)
	}
	mu.Lock()
	assert.Equal(t, map[string]int{"/one": 1, "/two": 1, "/s.css": 1}, hits, "each page fetched once, the shared stylesheet once per crawl")
	mu.Unlock()
	// What a page leaves: a line in the crawl's page index (its results
	// and title: `starter pages` and the WACZ's pages read them), no file
	// or directory of its own. The built-ins in the worker keep no runner
	// logs (their records are in the index and the frontier), no page
	// WARC (it joined the job's WARC from memory), and no files only a
	// hook run as a process would read (page.body, pagefetch.json,
	// urls.jsonl, title.txt).
	titles, err := pageindex.Titles(archivedir.PageIndex(e.cfg.ArchiveDir, "crawl1"))
	require.NoError(t, err)
	assert.Equal(t, map[int64]string{2: "T /one", 3: "T /two"}, titles)
	attempts, err := pageindex.Page(archivedir.PageIndex(e.cfg.ArchiveDir, "crawl1"), 2)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Equal(t, model.StateFinished, attempts[0].Snapshot.State)
	var hooks []string
	for _, r := range attempts[0].Results {
		hooks = append(hooks, r.Plugin+" "+string(r.Status))
	}
	assert.Equal(t, []string{"pagefetch succeeded", "title succeeded", "outlinks succeeded"}, hooks)
	assert.NoDirExists(t, filepath.Join(e.cfg.ArchiveDir, "crawls", "crawl1", "pages"), "no page has a directory")
	assert.Empty(t, missingFiles(t, e.pageDir("crawl1", 2), attempts[0].Results), "a record names no file kept in memory")
	assert.Equal(t, "T /one", jsonField(t, attempts[0].Results[1].OutputJSON, "title"), "what the title hook says is in its record")
	out, err := e.RunPage(ctx, activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: 4, URL: srv.URL + "/gone", Attempt: 1}})
	require.NoError(t, err)
	assert.Equal(t, activities.PageFailed, out.Status)
	assert.Contains(t, out.Note, "404")
	require.Len(t, out.Responses, 1)

	warcs, err := filepath.Glob(filepath.Join(e.cfg.ArchiveDir, "crawls", "crawl1", "warc", "*.warc.gz"))
	require.NoError(t, err)
	require.Len(t, warcs, 1)
	all := readGzip(t, warcs[0])
	assert.Equal(t, 1, strings.Count(all, "WARC-Type: warcinfo"), "one per file: the pages' own give way to the job file's")
	assert.Equal(t, 4, strings.Count(all, "WARC-Type: response"), "three pages and the stylesheet")

	// The teardown closes the job WARC and keeps its index beside it; the
	// crawl's seal writes the WACZ from it, naming what another host
	// reported and this one cannot see.
	require.NoError(t, e.TeardownCrawl(ctx, "crawl1"))
	kept, err := os.ReadFile(warcs[0] + wacz.SidecarSuffix)
	require.NoError(t, err, "the index kept at the teardown")
	assert.Equal(t, 5, strings.Count(string(kept), "\n"), "its first line and one per response")
	e.cfg.SealWACZ = true
	rep, err := e.SealCrawl(ctx, activities.SealCrawlInput{Ident: "crawl1", URL: srv.URL + "/one",
		Reported: []activities.WARCFile{{Name: filepath.Base(warcs[0])}, {Name: "crawl1-other-1-00001.warc.gz"}}},
		[]activities.PageRef{{ID: 2, URL: srv.URL + "/one"}, {ID: 3, URL: srv.URL + "/two"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"crawl1-other-1-00001.warc.gz"}, rep.Missing)
	assert.Equal(t, filepath.Join(e.cfg.ArchiveDir, "crawls", "crawl1", "crawl1.wacz"), rep.WACZ)
	vr, err := wacz.Validate(rep.WACZ)
	require.NoError(t, err)
	assert.Equal(t, 2, vr.Pages)
	assert.Equal(t, 4, vr.Entries)

	// Without the option the wrappers are executed (and fail here).
	e2 := pageEngine(t, plugins, nil)
	out, err = e2.RunPage(ctx, activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: 2, URL: srv.URL + "/one", Attempt: 1}})
	require.NoError(t, err)
	assert.Equal(t, activities.PageTransient, out.Status)

	// Under resource limits too: they hold a process, not the worker.
	e3 := pageEngine(t, plugins, func(c *Config) { c.InProcessBuiltins = true; c.Limits = procs.Limits{Memory: 1 << 30} })
	out, err = e3.RunPage(ctx, activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: 2, URL: srv.URL + "/one", Attempt: 1}})
	require.NoError(t, err)
	assert.Equal(t, activities.PageTransient, out.Status, "the limited built-in ran as its process")
	assert.Contains(t, out.Note, "pagefetch")
}

func TestWrapperDetection(t *testing.T) {
	ok := "#!/bin/sh\n# comment\nexec \"${ARCHIVEFLOW_BIN:-archiveflow}\" hook title \"$@\"\n"
	assert.Equal(t, "title", parseWrapper([]byte(ok)))
	for _, bad := range []string{
		"#!/bin/bash\nexec \"${ARCHIVEFLOW_BIN:-archiveflow}\" hook title \"$@\"\n",
		"#!/bin/sh\necho hi\nexec \"${ARCHIVEFLOW_BIN:-archiveflow}\" hook title \"$@\"\n",
		"#!/bin/sh\nexec \"${ARCHIVEFLOW_BIN:-archiveflow}\" hook title \"$@\"\necho after\n",
		"#!/bin/sh\nexec \"${ARCHIVEFLOW_BIN:-archiveflow}\" hook title --fast \"$@\"\n",
	} {
		assert.Empty(t, parseWrapper([]byte(bad)), bad)
	}
}

// TestRunPageProcessHookGoesThroughTheFetchPolicy: a page hook run as a
// process gets the attempt's fetch proxy and the deny list; plain wget
// honouring http_proxy cannot reach a denied port, and the page goes on.
func TestRunPageProcessHookGoesThroughTheFetchPolicy(t *testing.T) {
	if _, err := exec.LookPath("wget"); err != nil {
		t.Skip("wget is not installed")
	}
	guard := egresstest.Guard(t)
	pol, err := netpolicy.Parse([]string{guard.Addr})
	require.NoError(t, err)
	plugins := t.TempDir()
	writeHook(t, filepath.Join(plugins, "fetcher", "on_Snapshot__10_fetcher.sh"), `
echo "$FETCH_DENY" > deny
echo "$http_proxy" > proxy
wget -q -O secret --tries=1 "http://`+guard.Addr+`/secret" 2>wget.err
echo '{"type":"ArchiveResult","status":"succeeded"}'
`)
	e := pageEngine(t, plugins, func(c *Config) { c.Fetch = pol })
	out, err := e.RunPage(context.Background(), activities.PageRun{Crawl: testCrawl("fetcher"),
		Page: activities.PageSpec{ID: 2, URL: "http://site.test/p", Attempt: 1}, Settings: model.Settings{Concurrency: 1}})
	require.NoError(t, err)
	assert.Equal(t, activities.PageSucceeded, out.Status, out.Note)
	assert.Zero(t, guard.Connections(), "the denied port was connected to")
	dir := filepath.Join(e.pageDir("crawl1", 2), "fetcher")
	deny, err := os.ReadFile(filepath.Join(dir, "deny"))
	require.NoError(t, err)
	assert.Equal(t, `["`+guard.Addr+`"]`+"\n", string(deny))
	proxy, err := os.ReadFile(filepath.Join(dir, "proxy"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(proxy), "http://127.0.0.1:"), "http_proxy is the attempt's proxy: %q", proxy)
}

// TestRunPageSaysWhenItDropsLinks: links over crawl.max_links_per_page are
// dropped with a notice for the job's log, and a hook's own notices are
// kept while its other stderr lines are not.
func TestRunPageSaysWhenItDropsLinks(t *testing.T) {
	plugins := t.TempDir()
	writeHook(t, filepath.Join(plugins, "links", "on_Snapshot__70_links.sh"), `
echo "chatter that stays out of the job log" >&2
echo "archiveflow: a notice from the hook" >&2
echo "archiveflow: cut: http://site.test/p: body cut at 1 KiB" >&2
for i in 1 2 3 4 5; do echo '{"type":"Snapshot","url":"http://site.test/l'$i'"}'; done
echo '{"type":"ArchiveResult","status":"succeeded"}'
`)
	e := pageEngine(t, plugins, nil)
	cr := testCrawl("links")
	cr.MaxLinks = 2
	out, err := e.RunPage(context.Background(), activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: 2, URL: "http://site.test/p", Attempt: 1}})
	require.NoError(t, err)
	assert.Equal(t, activities.PageSucceeded, out.Status, out.Note)
	assert.Len(t, out.Links, 2)
	assert.Equal(t, 3, out.LinksDropped)
	assert.Equal(t, []string{
		"archiveflow: a notice from the hook",
		"archiveflow: cut: http://site.test/p: body cut at 1 KiB",
		"archiveflow: cut: page http://site.test/p: 3 of its 5 links dropped: more than crawl.max_links_per_page (2)",
	}, out.Notices)
	assert.Equal(t, 2, out.Cuts, "each loss to a limit is counted")
	assert.Equal(t, "cut: http://site.test/p: body cut at 1 KiB; page http://site.test/p: 3 of its 5 links dropped: more than crawl.max_links_per_page (2)",
		out.Note, "a page archived incompletely says so in its note")
}

// TestRunPageKeepsEveryAttemptsResults: a page whose second hook fails
// transiently and then succeeds keeps one result per hook of each attempt
// (index.json/index.jsonl, as a snapshot's), the first attempt's outputs
// and index under attempts/1, and says which hook kept the others from
// running.
func TestRunPageKeepsEveryAttemptsResults(t *testing.T) {
	plugins := t.TempDir()
	writeHook(t, filepath.Join(plugins, "one", "on_Snapshot__10_one.sh"), `
echo "$EXTRA_CONTEXT" > out.txt
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"one ok"}'
`)
	runs := filepath.Join(t.TempDir(), "two-runs")
	writeHook(t, filepath.Join(plugins, "two", "on_Snapshot__20_two.sh"), `
n=$(cat '`+runs+`' 2>/dev/null || echo 0); echo $((n+1)) > '`+runs+`'
if [ "$n" = 0 ]; then echo "site hiccup" >&2; exit 1; fi
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"two ok"}'
`)
	writeHook(t, filepath.Join(plugins, "three", "on_Snapshot__30_three.sh"), `
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"three ok"}'
`)
	e := pageEngine(t, plugins, nil)
	cr := testCrawl("one", "two", "three")
	page := activities.PageSpec{ID: 7, URL: "http://site.test/p", Depth: 1, Attempt: 1}
	out, err := e.RunPage(context.Background(), activities.PageRun{Crawl: cr, Page: page})
	require.NoError(t, err)
	require.Equal(t, activities.PageTransient, out.Status, out.Note)
	page.Attempt = 2
	out, err = e.RunPage(context.Background(), activities.PageRun{Crawl: cr, Page: page})
	require.NoError(t, err)
	require.Equal(t, activities.PageSucceeded, out.Status, out.Note)

	dir := e.pageDir(cr.Job.Ident, 7)
	type row struct {
		hook     string
		status   model.Status
		text     string
		attempts int
	}
	rows := func(dir string) (snapindex.Snapshot, []row) {
		snap, results, err := snapindex.Read(dir)
		require.NoError(t, err, dir)
		var rs []row
		for _, r := range results {
			text := r.OutputStr
			if r.Error != "" {
				text = r.Error
			}
			rs = append(rs, row{r.Plugin, r.Status, text, r.Attempts})
		}
		return snap, rs
	}
	snap, first := rows(filepath.Join(dir, AttemptsDir, "1"))
	assert.Equal(t, model.StateFailed, snap.State)
	assert.Equal(t, "http://site.test/p", snap.URL)
	assert.Equal(t, []row{
		{"one", model.StatusSucceeded, "one ok", 1},
		{"two", model.StatusFailed, "transient, the page is tried again: site hiccup (exit 1 without ArchiveResult record)", 1},
		{"three", model.StatusSkipped, "not run: on_Snapshot__20_two.sh failed transiently, the page is tried again", 1},
	}, first)
	assert.FileExists(t, filepath.Join(dir, AttemptsDir, "1", "one", "out.txt"), "the first attempt's outputs are kept")

	snap, second := rows(dir)
	assert.Equal(t, model.StateFinished, snap.State)
	assert.Equal(t, []row{
		{"one", model.StatusSucceeded, "one ok", 2},
		{"two", model.StatusSucceeded, "two ok", 2},
		{"three", model.StatusSucceeded, "three ok", 2},
	}, second)
	assert.FileExists(t, filepath.Join(dir, "index.json"))

	// The crawl's page index has both attempts too: a page whose hooks
	// wrote files keeps its index beside them as well.
	attempts, err := pageindex.Page(archivedir.PageIndex(e.cfg.ArchiveDir, cr.Job.Ident), 7)
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	for i, want := range []model.JobState{model.StateFailed, model.StateFinished} {
		assert.Equal(t, i+1, attempts[i].Number())
		assert.Equal(t, want, attempts[i].Snapshot.State)
		assert.Equal(t, int64(7), attempts[i].Snapshot.Page)
		assert.Len(t, attempts[i].Results, 3)
	}
}

// A background hook is ready before the next hook is launched (abx-dl's
// rule, issue 27): a browser launched at crawl setup and a tab opened by
// a page's step-0 daemon both write their session files before they
// print, after a delay; navigate, launched after them, finds both.
func TestHooksAfterABackgroundHookWaitForItToBeReady(t *testing.T) {
	plugins := t.TempDir()
	writeHook(t, filepath.Join(plugins, "browser", "on_CrawlSetup__90_browser.daemon.bg.sh"), `
trap 'exit 0' TERM
sleep 0.4
echo ws://127.0.0.1:9222 > session
echo "browser up"
while :; do sleep 0.05; done
`)
	writeHook(t, filepath.Join(plugins, "tab", "on_Snapshot__01_tab.daemon.bg.sh"), `
trap 'exit 0' TERM
sleep 0.4
echo tab-1 > session
echo "tab open"
while :; do sleep 0.05; done
`)
	writeHook(t, filepath.Join(plugins, "navigate", "on_Snapshot__30_navigate.sh"), `
if [ ! -s "$CRAWL_DIR/browser/session" ] || [ ! -s ../tab/session ]; then
  echo '{"type":"ArchiveResult","status":"failed","error":"No Chrome session found"}'
  exit 1
fi
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"navigated"}'
`)
	e := pageEngine(t, plugins, nil)
	out, err := e.RunPage(context.Background(), activities.PageRun{Crawl: testCrawl("tab", "navigate"),
		Page: activities.PageSpec{ID: 2, URL: "http://site.test/p", Attempt: 1}, Settings: model.Settings{Concurrency: 1}})
	require.NoError(t, err)
	assert.Equal(t, activities.PageSucceeded, out.Status, out.Note)
	var navigate *model.ArchiveResult
	for i, r := range out.Results {
		if r.Plugin == "navigate" {
			navigate = &out.Results[i]
		}
	}
	require.NotNil(t, navigate, "%+v", out.Results)
	assert.Equal(t, model.StatusSucceeded, navigate.Status, navigate.Error)
}

// TestRunPageWritesTheBuiltinsFilesForAHookRunAsAProcess: the files a
// crawl page's built-ins in the worker keep back (page.body,
// pagefetch.json) are on disk before a later page hook runs as a process,
// which reads them as the hook contract says.
func TestRunPageWritesTheBuiltinsFilesForAHookRunAsAProcess(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Read</title></head><body>body text</body></html>`)
	}))
	defer srv.Close()
	plugins := t.TempDir()
	for _, f := range []string{"config.json", "on_Snapshot__21_pagefetch.sh"} {
		data, err := os.ReadFile(filepath.Join("../../plugins/pagefetch", f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(plugins, "pagefetch"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(plugins, "pagefetch", f), data, 0o755))
	}
	writeHook(t, filepath.Join(plugins, "reader", "on_Snapshot__60_reader.sh"), `
grep -q '"status": 200' ../pagefetch/pagefetch.json && cp ../pagefetch/page.body copy.html
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"copied"}'
`)
	e := pageEngine(t, plugins, func(c *Config) { c.InProcessBuiltins = true })
	cr := testCrawl("pagefetch", "reader")
	out, err := e.RunPage(context.Background(), activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: 2, URL: srv.URL + "/", Attempt: 1}})
	require.NoError(t, err)
	require.Equal(t, activities.PageSucceeded, out.Status, out.Note)
	dir := e.pageDir("crawl1", 2)
	copied, err := os.ReadFile(filepath.Join(dir, "reader", "copy.html"))
	require.NoError(t, err, "the process hook read pagefetch's files")
	assert.Contains(t, string(copied), "body text")
	attempts, err := pageindex.Page(archivedir.PageIndex(e.cfg.ArchiveDir, "crawl1"), 2)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Empty(t, missingFiles(t, dir, attempts[0].Results))
	logs, err := filepath.Glob(filepath.Join(dir, "pagefetch", "*.log"))
	require.NoError(t, err)
	assert.Empty(t, logs, "the built-in in the worker keeps no runner logs")
	logs, err = filepath.Glob(filepath.Join(dir, "reader", "*.stdout.log"))
	require.NoError(t, err)
	assert.Len(t, logs, 1, "a hook run as a process keeps its own")
}

// missingFiles lists the files the results name that are not on disk:
// their output files, and the output_json fields naming files ("file",
// "warc", "*_file", relative to the hook's directory; "source_file",
// relative to the page's, pageDir).
func missingFiles(t *testing.T, pageDir string, results []model.ArchiveResult) []string {
	t.Helper()
	var missing []string
	check := func(path string) {
		if _, err := os.Stat(path); err != nil {
			missing = append(missing, path)
		}
	}
	for _, r := range results {
		hookDir := filepath.Join(pageDir, r.Plugin)
		for _, f := range r.Outputs {
			check(filepath.Join(hookDir, f.Path))
		}
		if len(r.OutputJSON) == 0 {
			continue
		}
		var out map[string]any
		require.NoError(t, json.Unmarshal(r.OutputJSON, &out), "%s output_json", r.Hook)
		for k, v := range out {
			name, ok := v.(string)
			switch {
			case !ok:
			case k == "source_file":
				check(filepath.Join(pageDir, name))
			case k == "file" || k == "warc" || strings.HasSuffix(k, "_file"):
				check(filepath.Join(hookDir, name))
			}
		}
	}
	return missing
}

// jsonField is the string field key of raw, a JSON object.
func jsonField(t *testing.T, raw []byte, key string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	s, _ := m[key].(string)
	return s
}

// writeSeedAttempt writes what one attempt of the start page's snapshot
// leaves in snapDir: the fetch hook's stdout log (a Response, a link) by
// attempt id, and its WARC file holding body.
func writeSeedAttempt(t *testing.T, snapDir, attemptID, url, body string) {
	t.Helper()
	dir := filepath.Join(snapDir, "fetch")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	log := `{"type":"Response","url":"` + url + `","status":503,"bytes":4}` + "\n" +
		`{"type":"Snapshot","url":"http://site.test/` + body + `"}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "on_Snapshot__10_fetch."+attemptID+".stdout.log"), []byte(log), 0o644))
	f, err := os.Create(filepath.Join(dir, "page.warc.gz"))
	require.NoError(t, err)
	zw := gzip.NewWriter(f)
	_, err = zw.Write([]byte(body))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())
}

// seedEngine is an engine with a crawl (crawl1) whose start page's
// snapshot ran once: writeSeedAttempt's "first" in its snapDir.
func seedEngine(t *testing.T) (*Engine, activities.Crawl, string) {
	t.Helper()
	e := pageEngine(t, t.TempDir(), nil)
	cr := testCrawl("fetch")
	snapDir, err := e.snapDir(cr.Job.SnapshotID)
	require.NoError(t, err)
	writeSeedAttempt(t, snapDir, strings.Repeat("a", 32), "http://site.test/", "first")
	return e, cr, snapDir
}

// closedJobWARCs closes e and returns the text of crawl ident's job WARCs.
func closedJobWARCs(t *testing.T, e *Engine, ident string) string {
	t.Helper()
	e.Close(context.Background())
	warcs, err := filepath.Glob(filepath.Join(e.cfg.ArchiveDir, "crawls", ident, "warc", "*.warc.gz"))
	require.NoError(t, err)
	var all string
	for _, w := range warcs {
		all += readGzip(t, w)
	}
	return all
}

// TestSeedRecordsAppendTheStartPagesWARCOnce: a retried CompleteSeedPage
// (the activity run again after the start page's records were appended,
// e.g. a Redis error recording its outcome) appends nothing again: the
// job's WARC holds each record once. A later run of the start page
// (starter retry) that writes its WARC anew is appended.
func TestSeedRecordsAppendTheStartPagesWARCOnce(t *testing.T) {
	e, cr, snapDir := seedEngine(t)
	ctx := context.Background()
	in := activities.SeedPageInput{Crawl: cr, Page: activities.PageSpec{ID: 1, URL: "http://site.test/", Attempt: 1},
		Succeeded: true, Hooks: []string{"fetch/on_Snapshot__10_fetch.sh"}}
	for range 3 {
		recs, err := e.SeedRecords(ctx, in)
		require.NoError(t, err)
		require.Len(t, recs.Links, 1, "every repeat reads the records")
	}
	assert.FileExists(t, filepath.Join(snapDir, "fetch", "page.warc.gz"), "the snapshot keeps its WARC")
	assert.FileExists(t, filepath.Join(snapDir, AppendedFile))

	// starter retry: the start page runs again and writes its WARC anew.
	writeSeedAttempt(t, snapDir, strings.Repeat("b", 32), "http://site.test/", "second run")
	in.Page.Attempt = 2
	for range 2 {
		_, err := e.SeedRecords(ctx, in)
		require.NoError(t, err)
	}

	all := closedJobWARCs(t, e, "crawl1")
	assert.Equal(t, 1, strings.Count(all, "first"), "the first run's WARC once, however often completed")
	assert.Equal(t, 1, strings.Count(all, "second run"), "the retry's new WARC appended, once")
}

// TestSeedWARCsReachTheDiskBeforeTheirListEntry: the start page's WARC
// file is listed in AppendedFile only once the job's WARC holding its
// records was fsynced, and the list itself is fsynced (the new list, then
// its rename): after a host crash the list names no file whose records
// the job's WARC lacks, and at most the last file is appended again.
func TestSeedWARCsReachTheDiskBeforeTheirListEntry(t *testing.T) {
	e, cr, snapDir := seedEngine(t)
	var synced []string
	listedAtWARCSync := true
	orig := syncFile
	syncFile = func(f *os.File) error {
		name := f.Name()
		if strings.HasSuffix(name, ".warc.gz") {
			name = "job warc"
			_, err := os.Stat(filepath.Join(snapDir, AppendedFile))
			listedAtWARCSync = err == nil
		}
		synced = append(synced, strings.TrimPrefix(name, snapDir+string(filepath.Separator)))
		return orig(f)
	}
	t.Cleanup(func() { syncFile = orig })
	in := activities.SeedPageInput{Crawl: cr, Page: activities.PageSpec{ID: 1, URL: "http://site.test/", Attempt: 1},
		Succeeded: true, Hooks: []string{"fetch/on_Snapshot__10_fetch.sh"}}
	_, err := e.SeedRecords(context.Background(), in)
	require.NoError(t, err)
	assert.Equal(t, []string{"job warc", AppendedFile + ".tmp", snapDir}, synced)
	assert.False(t, listedAtWARCSync, "the list names the file only after the job's WARC is on disk")
	assert.FileExists(t, filepath.Join(snapDir, AppendedFile))
	assert.NoFileExists(t, filepath.Join(snapDir, AppendedFile+".tmp"))
	assert.Equal(t, 1, strings.Count(closedJobWARCs(t, e, "crawl1"), "first"))
}

// TestSeedRecordsKeepATransientAttemptAside: the start page's attempt
// that waits for a later retry (SeedPageInput.Transient) moves to
// attempts/N before it is read (a repeat reads the same records), its
// WARC files into the job's WARC, once; the next attempt's records are
// its own: each response counted, each WARC file appended, once.
func TestSeedRecordsKeepATransientAttemptAside(t *testing.T) {
	e, cr, snapDir := seedEngine(t)
	ctx := context.Background()

	in := activities.SeedPageInput{Crawl: cr, Page: activities.PageSpec{ID: 1, URL: "http://site.test/", Attempt: 1}, Transient: true}
	recs, err := e.SeedRecords(ctx, in)
	require.NoError(t, err)
	require.Len(t, recs.Responses, 1)
	assert.Empty(t, recs.Links, "a transient attempt's links do not count")
	kept := filepath.Join(snapDir, AttemptsDir, "1", "fetch", "on_Snapshot__10_fetch."+strings.Repeat("a", 32)+".stdout.log")
	assert.FileExists(t, kept)
	assert.NoFileExists(t, filepath.Join(snapDir, AttemptsDir, "1", "fetch", "page.warc.gz"), "its WARC is in the job's")
	again, err := e.SeedRecords(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, recs.Responses, again.Responses, "a repeated activity reads the same attempt")

	writeSeedAttempt(t, snapDir, strings.Repeat("b", 32), "http://site.test/", "second")
	in.Page.Attempt, in.Transient, in.Succeeded, in.Hooks = 2, false, true, []string{"fetch/on_Snapshot__10_fetch.sh"}
	recs, err = e.SeedRecords(ctx, in)
	require.NoError(t, err)
	require.Len(t, recs.Responses, 1, "the earlier attempt's response is not read again")
	require.Len(t, recs.Links, 1)
	assert.Equal(t, "http://site.test/second", recs.Links[0].URL)
	assert.FileExists(t, kept, "the earlier attempt stays kept")

	all := closedJobWARCs(t, e, "crawl1")
	assert.Equal(t, 1, strings.Count(all, "first"), "the kept attempt's WARC once, repeat or not")
	assert.Equal(t, 1, strings.Count(all, "second"), "the last attempt's WARC once")
}

// TestSeedRecordsSayWhenTheyDropLinks: the start page's links over
// crawl.max_links_per_page are dropped with a cut notice, as any page's
// are (TestRunPageSaysWhenItDropsLinks), never silently.
func TestSeedRecordsSayWhenTheyDropLinks(t *testing.T) {
	e, cr, snapDir := seedEngine(t)
	more := `{"type":"Snapshot","url":"http://site.test/b"}` + "\n" + `{"type":"Snapshot","url":"http://site.test/c"}` + "\n"
	f, err := os.OpenFile(filepath.Join(snapDir, "fetch", "on_Snapshot__10_fetch."+strings.Repeat("a", 32)+".stdout.log"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(more)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	cr.MaxLinks = 1
	in := activities.SeedPageInput{Crawl: cr, Page: activities.PageSpec{ID: 1, URL: "http://site.test/", Attempt: 1},
		Succeeded: true, Hooks: []string{"fetch/on_Snapshot__10_fetch.sh"}}
	recs, err := e.SeedRecords(context.Background(), in)
	require.NoError(t, err)
	assert.Equal(t, []activities.Discovered{{URL: "http://site.test/first"}}, recs.Links)
	assert.Equal(t, 2, recs.LinksDropped)
	assert.Equal(t, []string{"archiveflow: cut: page http://site.test/: 2 of its 3 links dropped: more than crawl.max_links_per_page (1)"}, recs.Notices)

	cr.MaxLinks = 3
	in.Crawl = cr
	recs, err = e.SeedRecords(context.Background(), in)
	require.NoError(t, err)
	assert.Len(t, recs.Links, 3)
	assert.Empty(t, recs.Notices, "no cut, no notice")
}

// The worker environment a hook's spec derives from is kept between
// attempts, and follows the worker's environment when that changes.
func TestWorkerEnvFollowsTheWorkersEnvironment(t *testing.T) {
	e := pageEngine(t, t.TempDir(), func(c *Config) {
		c.Env = []string{"PATH=/bin", "LC_ALL=C", "NOT_PASSED=1"}
	})
	vars, hook := e.workerEnv()
	assert.Equal(t, map[string]string{"PATH": "/bin", "LC_ALL": "C", "NOT_PASSED": "1"}, vars)
	assert.Equal(t, []string{"PATH=/bin", "LC_ALL=C"}, hook, "hookenv's allowlist")
	e.cfg.Env = []string{"PATH=/usr/bin"}
	vars, hook = e.workerEnv()
	assert.Equal(t, map[string]string{"PATH": "/usr/bin"}, vars)
	assert.Equal(t, []string{"PATH=/usr/bin"}, hook)
}
