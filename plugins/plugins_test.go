package plugins_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/cdptest"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/model"
)

// TestDiscoveryAndConfig checks every plugin is discovered at its step with
// a config.json the real resolver accepts, declaring the keys it must.
func TestDiscoveryAndConfig(t *testing.T) {
	want := []struct {
		plugin     string
		step       int
		background bool
		binary     string // default of <PLUGIN>_BINARY; "-" = no binary key
		disabled   bool   // off by default (pagefetch: crawl pages only)
	}{
		{"headers", 2, false, "-", false},
		{"pagefetch", 2, false, "-", true},
		{"screenshot", 5, false, "", false},
		{"pdf", 5, false, "", false},
		{"dom", 5, false, "", false},
		{"title", 5, false, "-", false},
		{"wget", 6, true, "wget", false},
		{"favicon", 6, false, "-", false},
		{"outlinks", 7, false, "-", false},
		{"htmltotext", 8, false, "-", false},
		{"hashes", 9, false, "-", false},
		{"index", 9, false, "-", false},
	}
	p := builtinPlan(t)
	var order []string
	for _, h := range p.Hooks {
		order = append(order, h.Plugin)
	}
	wantOrder := make([]string, len(want))
	for i, w := range want {
		wantOrder[i] = w.plugin
	}
	require.Equal(t, wantOrder, order, "execution order")

	for _, w := range want {
		t.Run(w.plugin, func(t *testing.T) {
			h := hookOf(t, w.plugin)
			assert.Equal(t, w.step, h.Step)
			assert.Equal(t, w.background, h.Background)
			s := p.Schema(w.plugin)
			require.NotNil(t, s)
			key := hooks.PluginKey(w.plugin)

			enabled := s.Properties[key+"_ENABLED"]
			require.NotNil(t, enabled, "%s_ENABLED", key)
			assert.Equal(t, hooks.TypeBoolean, enabled.Type)
			assert.Equal(t, !w.disabled, enabled.Default)

			timeout := s.Properties[key+"_TIMEOUT"]
			require.NotNil(t, timeout, "%s_TIMEOUT", key)
			assert.Equal(t, hooks.TypeInteger, timeout.Type)
			assert.Equal(t, "TIMEOUT", timeout.Fallback)
			assert.Equal(t, int64(60), timeout.Default, "the hook's own fallback is 60 s")

			if w.binary == "-" {
				assert.Nil(t, s.Properties[key+"_BINARY"])
				return
			}
			bin := s.Properties[key+"_BINARY"]
			require.NotNil(t, bin, "%s_BINARY", key)
			assert.Equal(t, w.binary, bin.Default)
			args := s.Properties[key+"_ARGS"]
			require.NotNil(t, args, "%s_ARGS", key)
			assert.Equal(t, hooks.TypeArray, args.Type)

			// TIMEOUT set explicitly reaches the plugin through x-fallback.
			r, err := s.Resolve(hooks.Sources{Env: map[string]string{"TIMEOUT": "7"}})
			require.NoError(t, err)
			assert.Equal(t, 7*time.Second, r.Timeout(time.Minute))
		})
	}
}

// TestSnapshotShallow archives the test site's home page with every
// built-in plugin, in plan order, through the real runner.
func TestSnapshotShallow(t *testing.T) {
	if haveChromium() {
		cdptest.Exclusive(t) // its browser hooks must answer within their timeouts
	}
	ctx := context.Background()
	s := newSite(t)
	snap := newSnapshot(t, s.URL+"/")
	runs := map[string]hookRun{}
	uas := map[string]string{}
	type bgRun struct {
		run hookRun
		err error
	}
	var wgetDone chan bgRun
	for _, h := range builtinPlan(t).Hooks {
		if h.Plugin == "pagefetch" {
			continue // off for snapshots; TestPageFetch runs it
		}
		if h.Step == 9 && wgetDone != nil {
			// The test waits for wget so hashes and index see its WARC; a
			// real snapshot would stop it at the seal instead.
			select {
			case r := <-wgetDone:
				require.NoError(t, r.err)
				runs["wget"] = r.run
			case <-time.After(hookDeadline):
				t.Fatal("wget did not finish")
			}
			wgetDone = nil
		}
		uas[h.Plugin] = userAgent(t, h.Plugin)
		if h.Background {
			wgetDone = make(chan bgRun, 1)
			go func(h hooks.Hook, ua string) {
				r, err := snap.runE(ctx, h, ua)
				wgetDone <- bgRun{r, err}
			}(h, uas[h.Plugin])
			continue
		}
		runs[h.Plugin] = snap.run(ctx, h, uas[h.Plugin])
	}
	chromium := haveChromium()

	t.Run("headers", func(t *testing.T) {
		r := runs["headers"]
		requireFinal(t, r, model.StatusSucceeded)
		var meta struct {
			Status   int                 `json:"status"`
			FinalURL string              `json:"final_url"`
			Headers  map[string][]string `json:"headers"`
		}
		b, err := os.ReadFile(snap.file("headers", "headers.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &meta))
		assert.Equal(t, 200, meta.Status)
		assert.Equal(t, s.URL+"/", meta.FinalURL)
		assert.Equal(t, []string{"text/html; charset=utf-8"}, meta.Headers["Content-Type"])
		body, err := os.ReadFile(snap.file("headers", "response.body"))
		require.NoError(t, err)
		assert.Equal(t, indexHTML, string(body))
		assertResponsesMatch(t, s, uas["headers"], r.responses())
	})

	t.Run("browser", func(t *testing.T) {
		for plugin, file := range map[string]string{"screenshot": "screenshot.png", "pdf": "output.pdf", "dom": "output.html"} {
			r := runs[plugin]
			if !chromium {
				requireFinal(t, r, model.StatusSkipped)
				assert.Contains(t, r.last().OutputStr, "Chromium")
				continue
			}
			requireFinal(t, r, model.StatusSucceeded)
			b, err := os.ReadFile(snap.file(plugin, file))
			require.NoError(t, err, plugin)
			switch plugin {
			case "screenshot":
				assert.True(t, bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")), "screenshot is a PNG")
			case "pdf":
				assert.True(t, bytes.HasPrefix(b, []byte("%PDF-")), "pdf is a PDF")
			case "dom":
				assert.Contains(t, string(b), "<title>"+siteTitle+"</title>")
				assert.Contains(t, string(b), "scripted text must not be extracted", "the DOM is rendered: script output is in it")
			}
			assert.True(t, s.has(uas[plugin], "/"), "%s fetched the page with USER_AGENT", plugin)
		}
	})

	t.Run("title", func(t *testing.T) {
		r := runs["title"]
		requireFinal(t, r, model.StatusSucceeded)
		assert.Equal(t, siteTitle, r.last().OutputStr)
		b, err := os.ReadFile(snap.file("title", "title.txt"))
		require.NoError(t, err)
		assert.Equal(t, siteTitle+"\n", string(b))
		assert.Empty(t, s.requests(uas["title"]), "title reads saved pages, it does not fetch")
	})

	t.Run("wget", func(t *testing.T) {
		r := runs["wget"]
		requireFinal(t, r, model.StatusSucceeded)
		recs, err := readWARC(snap.file("wget", "warc/archive.warc.gz"))
		require.NoError(t, err)
		got := warcResponses(recs)
		for path, status := range map[string]int{
			"/": 200, "/style.css": 200, "/img/logo.png": 200, "/img/bg.png": 200,
			"/icons/fav.png": 200, "/missing.png": 404, "/error.js": 500,
		} {
			assert.Equal(t, status, got[s.URL+path], "WARC response for %s", path)
		}
		assert.NotContains(t, got, s.URL+"/page2.html", "shallow: links are not followed")
		assertResponsesMatch(t, s, uas["wget"], r.responses())
		out := r.outputJSON(t)
		assert.EqualValues(t, len(s.requests(uas["wget"])), out["responses"])
		assert.EqualValues(t, 2, out["errors"], "the 404 and the 500")
		page, err := os.ReadFile(snap.file("wget", out["main_file"].(string)))
		require.NoError(t, err)
		assert.Equal(t, indexHTML, string(page))
	})

	t.Run("favicon", func(t *testing.T) {
		r := runs["favicon"]
		requireFinal(t, r, model.StatusSucceeded)
		b, err := os.ReadFile(snap.file("favicon", "favicon.png"))
		require.NoError(t, err)
		assert.Equal(t, pngBytes, b)
		assert.Equal(t, []string{"200 /icons/fav.png"}, s.paths(uas["favicon"]), "the declared icon, fetched once")
		assertResponsesMatch(t, s, uas["favicon"], r.responses())
	})

	t.Run("outlinks", func(t *testing.T) {
		r := runs["outlinks"]
		requireFinal(t, r, model.StatusSucceeded)
		want := []string{s.URL + "/page2.html", s.URL + "/redirect", s.URL + "/missing", s.URL + "/error",
			s.URL + "/ignored.html", "https://example.org/elsewhere?x=1"}
		var got []string
		for _, sn := range r.snapshots() {
			got = append(got, sn.URL)
			assert.Equal(t, 1, sn.Depth)
		}
		assert.Equal(t, want, got)
		b, err := os.ReadFile(snap.file("outlinks", "urls.jsonl"))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		require.Len(t, lines, len(want))
		assert.JSONEq(t, `{"type":"Snapshot","url":"`+want[0]+`","depth":1}`, lines[0])
		assert.Contains(t, []string{"dom", "wget", "headers"}, r.outputJSON(t)["source"])
	})

	t.Run("htmltotext", func(t *testing.T) {
		r := runs["htmltotext"]
		requireFinal(t, r, model.StatusSucceeded)
		b, err := os.ReadFile(snap.file("htmltotext", "htmltotext.txt"))
		require.NoError(t, err)
		text := string(b)
		assert.Contains(t, text, siteText)
		assert.Contains(t, text, "Page two")
		assert.NotContains(t, text, "document.write", "script source is not text")
	})

	t.Run("hashes", func(t *testing.T) {
		r := runs["hashes"]
		requireFinal(t, r, model.StatusSucceeded)
		var doc struct {
			Files []struct {
				Path   string `json:"path"`
				Size   int64  `json:"size"`
				SHA256 string `json:"sha256"`
			} `json:"files"`
		}
		b, err := os.ReadFile(snap.file("hashes", "hashes.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &doc))
		paths := map[string]string{}
		for _, f := range doc.Files {
			paths[f.Path] = f.SHA256
			assert.NotRegexp(t, `\.[0-9a-f]{32}\.(stdout\.log|stderr\.log|pid|sh)$`, f.Path, "runner file hashed")
			assert.False(t, strings.HasPrefix(f.Path, "index/") || strings.HasPrefix(f.Path, "hashes/"), "%s hashed", f.Path)
		}
		for _, p := range []string{"headers/headers.json", "wget/warc/archive.warc.gz", "title/title.txt", "favicon/favicon.png"} {
			require.Contains(t, paths, p)
			data, err := os.ReadFile(filepath.Join(snap.dir, p))
			require.NoError(t, err)
			sum := sha256.Sum256(data)
			assert.Equal(t, hex.EncodeToString(sum[:]), paths[p], p)
		}
		sums, err := os.ReadFile(snap.file("hashes", "sha256sums.txt"))
		require.NoError(t, err)
		assert.Contains(t, string(sums), paths["title/title.txt"]+"  title/title.txt\n")
	})

	t.Run("index", func(t *testing.T) {
		r := runs["index"]
		requireFinal(t, r, model.StatusSucceeded)
		var doc struct {
			Title   string `json:"title"`
			Plugins []struct {
				Name    string `json:"name"`
				Results []struct {
					Status string `json:"status"`
				} `json:"results"`
				Files []struct {
					Path string `json:"path"`
				} `json:"files"`
			} `json:"plugins"`
		}
		b, err := os.ReadFile(snap.file("index", "index.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &doc))
		assert.Equal(t, siteTitle, doc.Title)
		statuses := map[string]string{}
		for _, p := range doc.Plugins {
			require.Len(t, p.Results, 1, p.Name)
			statuses[p.Name] = p.Results[0].Status
		}
		wantStatus := "succeeded"
		if !chromium {
			wantStatus = "skipped"
		}
		assert.Equal(t, map[string]string{
			"headers": "succeeded", "screenshot": wantStatus, "pdf": wantStatus, "dom": wantStatus,
			"title": "succeeded", "wget": "succeeded", "favicon": "succeeded", "outlinks": "succeeded",
			"htmltotext": "succeeded", "hashes": "succeeded",
		}, statuses)
		page, err := os.ReadFile(snap.file("index", "index.html"))
		require.NoError(t, err)
		assert.Contains(t, string(page), "<title>"+siteTitle)
		assert.Contains(t, string(page), `href="../wget/warc/archive.warc.gz"`)
		assert.Contains(t, string(page), `href="../index.jsonl"`, "the page links to the final index the seal writes")
		assert.Contains(t, string(page), `href="../index.json"`)
	})
}

// assertResponsesMatch checks a hook's Response records against the
// requests the site answered for its user agent: same (status, path) pairs
// and the same body bytes for every 2xx answer.
func assertResponsesMatch(t *testing.T, s *site, ua string, got []model.Response) {
	t.Helper()
	var want, have []string
	var wantBytes, haveBytes int64
	for _, r := range s.requests(ua) {
		want = append(want, statusKey(r.Status, r.Path))
		if r.Status/100 == 2 {
			wantBytes += r.Bytes
		}
	}
	for _, r := range got {
		u, err := url.Parse(r.URL)
		require.NoError(t, err)
		have = append(have, statusKey(r.Status, u.Path))
		if r.Status/100 == 2 {
			haveBytes += r.Bytes
		}
	}
	sort.Strings(want)
	sort.Strings(have)
	require.NotEmpty(t, want, "the site saw no request with user agent %s", ua)
	assert.Equal(t, want, have, "Response records vs requests served")
	assert.Equal(t, wantBytes, haveBytes, "2xx body bytes")
}
