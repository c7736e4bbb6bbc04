// Package cdptest owns headless Chromium for tests: started in its own
// process group on a loopback DevTools port, killed with the group when the
// test ends, and one page of it driven over the Chrome DevTools Protocol.
// It is for tests only (ReplayWeb.page's replay of a WACZ).
package cdptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/websocket"
)

// Page is one page of a headless Chromium, driven over the DevTools
// protocol. One goroutine at a time calls it.
type Page struct {
	conn *websocket.Conn
	id   int
}

// Start starts browser (chrome.Find) headless with a fresh profile in its
// own process group, killed with the group when the test ends, and returns
// its first page.
func Start(t testing.TB, browser string) *Page {
	t.Helper()
	profile := t.TempDir()
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
	resp, err := http.Get("http://127.0.0.1:" + port + "/json/list")
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
			return &Page{conn: conn}
		}
	}
	t.Fatal("Chromium has no page target")
	return nil
}

// Call sends one command and returns its result; events are skipped, an
// answer not there within 30 seconds is an error, and so is the
// protocol's error answer.
func (p *Page) Call(method string, params any) (json.RawMessage, error) {
	p.id++
	if err := websocket.JSON.Send(p.conn, map[string]any{"id": p.id, "method": method, "params": params}); err != nil {
		return nil, err
	}
	if err := p.conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	for {
		var m struct {
			ID     int
			Error  json.RawMessage
			Result json.RawMessage
		}
		if err := websocket.JSON.Receive(p.conn, &m); err != nil {
			return nil, err
		}
		if m.ID != p.id {
			continue
		}
		if len(m.Error) > 0 {
			return nil, fmt.Errorf("%s: %s", method, m.Error)
		}
		return m.Result, nil
	}
}
