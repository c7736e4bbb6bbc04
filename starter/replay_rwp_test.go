package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/builtin/chrome"
	"github.com/archiveflow/archiveflow/internal/cdptest"
	"github.com/archiveflow/archiveflow/internal/wacz"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// replayProbe looks through the viewer's shadow roots and same-origin
// frames for the replayed page: its URL, title, text and the colour its
// archived stylesheet gives #h.
const replayProbe = `(function(){
  function walk(root, out) {
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) walk(el.shadowRoot, out);
      if (el.tagName !== 'IFRAME') continue;
      try {
        const d = el.contentDocument;
        if (!d) continue;
        const h = d.getElementById('h');
        out.push([d.location.href, d.title, d.body ? d.body.innerText : '', h ? d.defaultView.getComputedStyle(h).color : ''].join(' | '));
        walk(d, out);
      } catch (e) {}
    }
    return out;
  }
  return walk(document, []).join('\n');
})()`

// TestReplayWebPageReplaysTheWACZOffline opens a WACZ served by `starter
// replay --viewer` in ReplayWeb.page, in headless Chromium, everything on
// loopback, and finds the archived page with its archived stylesheet
// applied, with the index plain and compressed. It needs ReplayWeb.page's files (npm pack replaywebpage, the
// package/ directory) in ARCHIVEFLOW_REPLAYWEBPAGE and Chromium; it is
// skipped without them.
func TestReplayWebPageReplaysTheWACZOffline(t *testing.T) {
	viewer := os.Getenv("ARCHIVEFLOW_REPLAYWEBPAGE")
	if viewer == "" {
		t.Skip("ARCHIVEFLOW_REPLAYWEBPAGE (an unpacked npm package replaywebpage) not set")
	}
	browser, err := chrome.Find("")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	warcPath := filepath.Join(dir, "rwp-00001.warc.gz")
	f, err := os.Create(warcPath)
	require.NoError(t, err)
	w := warc.NewWriter(f)
	for _, c := range []struct{ url, ct, body string }{
		{"https://example.com/", "text/html; charset=utf-8", `<!doctype html><title>Archived start</title><link rel="stylesheet" href="/s.css"><h1 id="h">ARCHIVEFLOW-REPLAY-OK</h1>`},
		{"https://example.com/s.css", "text/css", `h1 { color: rgb(1, 2, 3); }`},
	} {
		block := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", c.ct, len(c.body), c.body)
		_, err := w.Write(warc.Record{Type: "response", Date: at, TargetURI: c.url, ContentType: "application/http;msgtype=response",
			Headers: map[string]string{"WARC-Payload-Digest": warc.Digest([]byte(c.body))}, Block: []byte(block)})
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
	// The index plain (index.cdxj) and compressed (index.cdx.gz in blocks
	// of one line, index.idx).
	bases := map[string]string{}
	for name, opt := range map[string]wacz.Options{
		"rwp.wacz":    {MainPageURL: "https://example.com/"},
		"rwp-gz.wacz": {MainPageURL: "https://example.com/", CompressIndexAbove: 1, IndexBlockLines: 1},
	} {
		file := filepath.Join(dir, name)
		_, err = wacz.Create(file, wacz.Files(warcPath), []wacz.Page{{URL: "https://example.com/", Title: "Archived start"}}, opt)
		require.NoError(t, err)
		bases[name], _ = serveReplay(t, file, "--viewer", viewer)
	}

	cdp := &cdp{t: t, page: cdptest.Start(t, browser)}
	for name, base := range bases {
		t.Run(name, func(t *testing.T) {
			cdp.t = t
			target := base + "/?source=" + url.QueryEscape(base+"/wacz/"+name) + "#view=pages&url=" + url.QueryEscape("https://example.com/") + "&ts=20261126100000"
			cdp.call("Page.navigate", map[string]any{"url": target})
			var seen string
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for ctx.Err() == nil && !strings.Contains(seen, "rgb(1, 2, 3)") {
				time.Sleep(500 * time.Millisecond)
				var res struct {
					Result struct{ Value string }
				}
				cdp.decode(cdp.call("Runtime.evaluate", map[string]any{"expression": replayProbe, "returnByValue": true}), &res)
				seen = res.Result.Value
			}
			t.Logf("replayed frames:\n%s", seen)
			require.Contains(t, seen, "ARCHIVEFLOW-REPLAY-OK", "ReplayWeb.page did not replay the page")
			require.Contains(t, seen, "| Archived start |")
			require.Contains(t, seen, "rgb(1, 2, 3)", "the archived stylesheet was not applied")
			require.Contains(t, seen, "mp_/https://example.com/")
		})
	}
}

// cdp is a page of Chromium whose commands fail the test t on an error.
type cdp struct {
	t    *testing.T
	page *cdptest.Page
}

// call sends one command and returns its result.
func (c *cdp) call(method string, params any) json.RawMessage {
	c.t.Helper()
	raw, err := c.page.Call(method, params)
	require.NoError(c.t, err)
	return raw
}

func (c *cdp) decode(raw json.RawMessage, v any) { require.NoError(c.t, json.Unmarshal(raw, v)) }
