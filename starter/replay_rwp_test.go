package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/websocket"

	"github.com/archiveflow/archiveflow/internal/builtin/chrome"
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

	profile := filepath.Join(dir, "profile")
	cmd := exec.Command(browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir="+profile, "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	var port string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort"))
		port, _, _ = strings.Cut(string(b), "\n")
		return err == nil && port != ""
	}, 30*time.Second, 100*time.Millisecond, "Chromium wrote no DevToolsActivePort")

	cdp := newCDP(t, "http://127.0.0.1:"+port)
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
					Result struct {
						Result struct{ Value string }
					}
				}
				cdp.decode(cdp.call("Runtime.evaluate", map[string]any{"expression": replayProbe, "returnByValue": true}), &res)
				seen = res.Result.Result.Value
			}
			t.Logf("replayed frames:\n%s", seen)
			require.Contains(t, seen, "ARCHIVEFLOW-REPLAY-OK", "ReplayWeb.page did not replay the page")
			require.Contains(t, seen, "| Archived start |")
			require.Contains(t, seen, "rgb(1, 2, 3)", "the archived stylesheet was not applied")
			require.Contains(t, seen, "mp_/https://example.com/")
		})
	}
}

// cdp is a minimal Chrome DevTools Protocol client for one page.
type cdp struct {
	t    *testing.T
	conn *websocket.Conn
	id   int
}

func newCDP(t *testing.T, debug string) *cdp {
	t.Helper()
	resp, err := http.Get(debug + "/json/list")
	require.NoError(t, err)
	defer resp.Body.Close()
	var targets []struct {
		Type                 string
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&targets))
	for _, tg := range targets {
		if tg.Type == "page" {
			conn, err := websocket.Dial(tg.WebSocketDebuggerURL, "", "http://127.0.0.1/")
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close() })
			return &cdp{t: t, conn: conn}
		}
	}
	t.Fatal("Chromium has no page target")
	return nil
}

// call sends one command and returns its answer (events are skipped).
func (c *cdp) call(method string, params any) json.RawMessage {
	c.t.Helper()
	c.id++
	require.NoError(c.t, websocket.JSON.Send(c.conn, map[string]any{"id": c.id, "method": method, "params": params}))
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	for {
		var m struct {
			ID    int
			Error json.RawMessage
		}
		var raw json.RawMessage
		require.NoError(c.t, websocket.JSON.Receive(c.conn, &raw))
		require.NoError(c.t, json.Unmarshal(raw, &m))
		if m.ID == c.id {
			require.Empty(c.t, m.Error, "%s: %s", method, m.Error)
			return raw
		}
	}
}

func (c *cdp) decode(raw json.RawMessage, v any) { require.NoError(c.t, json.Unmarshal(raw, v)) }
