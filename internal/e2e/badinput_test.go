//go:build dev

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/testsite"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestBadSettingsNeverKillAJob is issue 30's items 1 and 2, run as the
// user does (the starter binary against the stack): a concurrency out of
// range and an over-long URL are refused with exit 2 naming the rule
// before anything starts; a running crawl asked for concurrency 999999
// refuses it (exit 2), keeps its settings and finishes every page.
func TestBadSettingsNeverKillAJob(t *testing.T) {
	srv := crawlSite(t, testsite.MinPages)
	s := NewStack(t, server, builtinPlugins(t, "pagefetch", "title", "outlinks"), crawlConfig)
	s.StartPools(t, builtinEnv(t))
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	seed := srv.URL("/")

	refused := []struct {
		name string
		args []string
		want []string
	}{
		{"concurrency over the range", []string{"submit", seed, "--depth", "inf", "--concurrency", "999999"},
			[]string{"--concurrency 999999: must be 0..1000 (0 pauses the job)"}},
		{"concurrency just over", []string{"submit", seed, "--concurrency", "1001"}, []string{"--concurrency 1001: must be 0..1000"}},
		{"a 10,000-character URL", []string{"submit", seed + "?" + strings.Repeat("q", 10000)},
			[]string{"a job's URL must be at most 2048 bytes", "ArchiveflowURL"}},
	}
	for _, tc := range refused {
		res := runStarter(t, bin, s, tc.args...)
		assert.Equal(t, 2, res.code, "%s: %s %s", tc.name, res.stdout, res.stderr)
		for _, w := range tc.want {
			assert.Contains(t, res.stderr, w, tc.name)
		}
	}
	id, _, err := ident.FromURL(seed)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := s.Redis.Exists(ctx, id).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a refused submission leaves no job")

	// A crawl queued paused, asked for too much, then resumed.
	res := runStarter(t, bin, s, "submit", seed, "--depth", "1", "--concurrency", "0")
	require.Equal(t, 0, res.code, res.stderr)
	res = runStarter(t, bin, s, "status", id)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "(crawl), paused: concurrency 0 runs nothing (starter set "+id+" concurrency=N resumes it)\n", "status says the job is paused")
	res = runStarter(t, bin, s, "status", id, "--json")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, `"paused": true`)
	res = runStarter(t, bin, s, "set", id, "concurrency=999999")
	assert.Equal(t, 2, res.code, res.stderr)
	assert.Contains(t, res.stderr, "concurrency=999999: must be an integer 0..1000 (0 pauses the job)")
	res = runStarter(t, bin, s, "set", id, "concurrency=4")
	require.Equal(t, 0, res.code, res.stderr)
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer wcancel()
	var st workflows.CrawlStatus
	require.NoError(t, s.Client.GetWorkflow(wctx, id, "").Get(wctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	assert.Equal(t, 4, st.Settings.Concurrency)
	res = runStarter(t, bin, s, "status", id)
	require.Equal(t, 0, res.code, res.stderr)
	assert.NotContains(t, res.stdout, "paused", "resumed, then finished")
	assert.Positive(t, st.Counts.Done)
	assert.Zero(t, st.Counts.Queued(), "every page ended")
}

// TestCrawlLossesAreNeverSilent is issue 30's item 3, run as the user
// does: a hostile site's over-long link, a page over pagefetch's body
// limit (PAGEFETCH_MAX_BYTES), and a page and the start page over
// crawl.max_links_per_page. Each loss is in the page's note (starter
// pages), the job's log (starter logs) and counted in status (cut_count),
// and the crawl still finishes.
func TestCrawlLossesAreNeverSilent(t *testing.T) {
	const maxLinks = 5
	longLink := "/long-" + strings.Repeat("x", 100_000)
	mux := http.NewServeMux()
	html := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><html><head><title>t</title></head><body>"+body+"</body></html>")
	}
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		// Seven links: the last two are over the cap (the start page's
		// links come from its snapshot's hooks, in the page's order).
		html(w, `<a href="/long">long</a> <a href="/big">big</a> <a href="/many">many</a>`+
			`<a href="/f/0">0</a> <a href="/f/1">1</a> <a href="/f/2">2</a> <a href="/f/3">3</a>`)
	})
	mux.HandleFunc("/f/", func(w http.ResponseWriter, r *http.Request) { html(w, "filler") })
	mux.HandleFunc("/long", func(w http.ResponseWriter, r *http.Request) {
		html(w, `<a href="`+longLink+`">a 100 KB link</a>`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		// 3 MB: over the body limit set below (the default is 32 MiB).
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><html><head><title>big</title></head><body><p>")
		chunk := []byte(strings.Repeat("lorem ipsum ", 1<<16))
		for n := 0; n < 3_000_000; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/many", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		for i := range maxLinks + 3 {
			fmt.Fprintf(&b, `<a href="/m%d">m%d</a> `, i, i)
		}
		html(w, b.String())
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	s := NewStack(t, server, builtinPlugins(t, "pagefetch", "title", "outlinks"), func(c *config.Config) {
		crawlConfig(c)
		c.Plugins.Values["PAGEFETCH_MAX_BYTES"] = 1 << 20
	})
	// The link cap is the submitter's: the job carries it.
	t.Setenv("ARCHIVEFLOW_CRAWL_MAX_LINKS_PER_PAGE", strconv.Itoa(maxLinks))
	s.StartPools(t, builtinEnv(t))
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	seed := srv.URL + "/"
	id, _, err := ident.FromURL(seed)
	require.NoError(t, err)

	res := runStarter(t, bin, s, "submit", seed, "--depth", "1", "--wait")
	require.Equal(t, 0, res.code, "%s\n%s", res.stdout, res.stderr)

	res = runStarter(t, bin, s, "status", id)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "cuts:     4 lost to a limit", "status counts each loss")

	res = runStarter(t, bin, s, "pages", id)
	require.Equal(t, 0, res.code, res.stderr)
	notes := map[string]string{
		"/long": "note: cut: 1 of its links refused by the frontier",
		"/big":  "note: cut: " + srv.URL + "/big: body cut at 1 MiB (pagefetch's limit)",
		"/many": fmt.Sprintf("note: cut: page %s/many: 3 of its %d links dropped: more than crawl.max_links_per_page (%d)", srv.URL, maxLinks+3, maxLinks),
		"/":     fmt.Sprintf("note: cut: page %s: 2 of its %d links dropped: more than crawl.max_links_per_page (%d)", seed, maxLinks+2, maxLinks),
	}
	for page, note := range notes {
		assert.Contains(t, res.stdout, note, "the note of %s", page)
	}

	res = runStarter(t, bin, s, "logs", id)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "ignored "+srv.URL+"/long-xxx", "the refused link's ignore packet")
	assert.Contains(t, res.stdout, "longer than 8192 bytes (100028 bytes)", "names the rule")
	assert.Contains(t, res.stdout, "body cut at 1 MiB")
	assert.Contains(t, res.stdout, fmt.Sprintf("page %s/many: 3 of its", srv.URL))
	assert.Contains(t, res.stdout, fmt.Sprintf("page %s: 2 of its", seed), "the start page's cut is logged too")
}

// TestMessagesSayWhatHappened is issue 30's item 7, run as the user does:
// one message for a bad --depth; status of a --depth 1 crawl names its
// depth limit; a redirect loop's page note says it is a redirect loop;
// a page that keeps failing is logged "will be retried" only while it
// will be, and its last attempt says the page failed.
func TestMessagesSayWhatHappened(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>m</title><a href="/loop">loop</a> <a href="/broken">broken</a>`)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s := NewStack(t, server, builtinPlugins(t, "pagefetch", "title", "outlinks"), crawlConfig)
	s.StartPools(t, builtinEnv(t))
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	seed := srv.URL + "/"
	id, _, err := ident.FromURL(seed)
	require.NoError(t, err)

	for _, tc := range []struct {
		depth string
		want  string
	}{
		{"-1", `--depth "-1": must be shallow (one URL), inf (crawl the site) or a number of links 0..1000000`},
		{"deep", `--depth "deep": must be shallow (one URL), inf (crawl the site) or a number of links 0..1000000`},
	} {
		res := runStarter(t, bin, s, "submit", seed, "--depth", tc.depth)
		assert.Equal(t, 2, res.code, res.stderr)
		assert.Contains(t, res.stderr, tc.want)
		assert.Equal(t, 1, strings.Count(res.stderr, "--depth"), "one message: %s", res.stderr)
	}

	res := runStarter(t, bin, s, "submit", seed, "--depth", "1", "--wait")
	assert.Equal(t, 0, res.code, "%s\n%s", res.stdout, res.stderr)
	res = runStarter(t, bin, s, "status", id)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "depth:    at most 1 link(s) from the start page (--depth 1)")
	assert.NotContains(t, res.stdout, "depth inf")

	res = runStarter(t, bin, s, "pages", id)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, srv.URL+"/loop: more than 20 redirects (a redirect loop)", "the loop's note")
	assert.Contains(t, res.stdout, "note: on_Snapshot__21_pagefetch.sh: pagefetch: "+srv.URL+"/broken answered HTTP 503 (exit 1 without ArchiveResult record)",
		"a transient failure's note has the hook's own error")

	res = runStarter(t, bin, s, "logs", id)
	require.Equal(t, 0, res.code, res.stderr)
	broken := srv.URL + "/broken"
	assert.Contains(t, res.stdout, "page "+broken+" attempt 1 failed, will be retried")
	assert.Contains(t, res.stdout, "page "+broken+" attempt 3 failed, its last attempt (crawl.page_attempts 3): the page failed")
	assert.NotContains(t, res.stdout, "page "+broken+" attempt 3 failed, will be retried")

	// Each attempt's hook results stay with the page (issue 22: crawl
	// pages are snapshots in the records).
	res = runStarter(t, bin, s, "pages", id, "--url", broken)
	require.Equal(t, 0, res.code, res.stderr)
	for n := 1; n <= 3; n++ {
		assert.Contains(t, res.stdout, fmt.Sprintf("attempt %d: failed", n))
	}
	assert.Regexp(t, `(?m)^  2     pagefetch\s+failed\s+1\s+\S+\s+transient, the page is tried again: pagefetch: `+regexp.QuoteMeta(broken)+` answered HTTP 503`, res.stdout)
	assert.Regexp(t, `(?m)^  5     title\s+skipped\s+3\s+\S*\s*not run: on_Snapshot__21_pagefetch\.sh failed transiently`, res.stdout)
	res = runStarter(t, bin, s, "pages", id, "--url", seed, "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var start struct {
		Results []struct {
			Attempt int
			State   string
			Hooks   []struct{ Plugin, Status string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &start), res.stdout)
	require.Len(t, start.Results, 1, res.stdout)
	assert.Equal(t, "finished", start.Results[0].State)
	assert.Len(t, start.Results[0].Hooks, 3)
	res = runStarter(t, bin, s, "pages", id, "--url", srv.URL+"/nowhere")
	assert.Equal(t, 3, res.code)
	assert.Contains(t, res.stderr, "has no page "+srv.URL+"/nowhere")

	// A page hook's final result is an event, as a snapshot hook's is; an
	// attempt that ended transiently has none.
	ctx := context.Background()
	keys, err := s.Redis.Keys(ctx, "events_archive:*").Result()
	require.NoError(t, err)
	pageChecks := map[string][]string{}
	for _, k := range keys {
		for _, raw := range s.Redis.LRange(ctx, k, 0, -1).Val() {
			var ev struct{ Entity, Check, State, Page string }
			require.NoError(t, json.Unmarshal([]byte(raw), &ev))
			if ev.Entity == id && ev.Page != "" {
				pageChecks[ev.Page] = append(pageChecks[ev.Page], ev.Check+" "+ev.State)
			}
		}
	}
	assert.Contains(t, pageChecks[srv.URL+"/loop"], "on_Snapshot__21_pagefetch.sh critical", pageChecks)
	assert.Empty(t, pageChecks[broken], "transient attempts are no events")
}
