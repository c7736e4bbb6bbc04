//go:build dev && bench

package chromestack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/e2e"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

var rounds = flag.Int("rounds", 3, "BenchmarkChromeStack: rounds of abx-dl and archiveflow, alternating")

const (
	envPlugins = "ABX_PLUGINS_DIR" // abx-plugins' abx_plugins/plugins directory
	envAbxDL   = "ABXDL_BIN"       // the abx-dl command
	jobTimeout = 5 * time.Minute
	pageTitle  = "Héllo wörld — 日本語 archive"
	jsText     = "JS-built text: zebra quokka 42"
)

// browserPlugins are the plugins both tools run; base holds the helpers
// the others require.
var browserPlugins = []string{"chrome", "headers", "screenshot", "pdf", "dom", "title"}

// page declares its charset (the server does not) and builds jsText with
// a script: the HTML holds neither the joined words nor the number.
const page = `<!doctype html>
<html><head><meta charset="utf-8"><title>` + pageTitle + `</title></head>
<body><h1>Static heading</h1><div id="js"></div>
<script>document.getElementById('js').textContent = 'JS-built text: ' + ['zebra', 'quokka'].join(' ') + ' ' + 6 * 7;</script>
</body></html>`

type run struct {
	tool    string
	wall    time.Duration
	failed  []string // hooks that did not succeed, with their error
	retried []string // hooks that succeeded on a later attempt (archiveflow)
}

// abxDLOnce archives url with abx-dl in a fresh directory and returns its
// wall time and the hooks that did not succeed (a Process record with
// another status than abx-dl's "succeeded", exit 0).
func abxDLOnce(b *testing.B, bin, url string) run {
	dir := b.TempDir()
	cmd := exec.Command(bin, "--plugins="+strings.Join(browserPlugins, ","), url)
	cmd.Dir = dir
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	require.NoError(b, err, "abx-dl: %s", stderr.String())
	r := run{tool: "abx-dl", wall: wall}
	hooks := 0
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var rec struct {
			Type     string `json:"type"`
			HookName string `json:"hook_name"`
			Status   string `json:"status"`
			Stderr   string `json:"stderr"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Type != "Process" {
			continue
		}
		hooks++
		if rec.Status != "succeeded" {
			r.failed = append(r.failed, rec.HookName+": "+lastLine(rec.Stderr))
		}
	}
	require.Equal(b, 11, hooks, "abx-dl ran 3 crawl setup and 8 snapshot hooks:\n%s", out.String())
	if len(r.failed) == 0 {
		checkOutputs(b, dir)
	}
	return r
}

// archiveflowOnce archives url as one job on the stack; it returns the
// job's wall time and the hooks that did not end as they should.
func archiveflowOnce(b *testing.B, st *e2e.Stack, url string) run {
	t0 := time.Now()
	job := st.Submit(b, url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	var status workflows.Status
	err := job.Run.Get(ctx, &status)
	r := run{tool: "archiveflow", wall: time.Since(t0)}
	if ctx.Err() != nil {
		r.failed = append(r.failed, fmt.Sprintf("the job did not end within %s", jobTimeout))
		return r
	}
	require.NoError(b, err)
	require.Equal(b, model.StateFinished, status.State, status.Error)
	require.Len(b, status.Hooks, 8)
	for _, h := range status.Hooks {
		require.NotNil(b, h.Result, h.Hook)
		want := model.StatusSucceeded
		if h.Hook == "on_Snapshot__00_chrome_launch.daemon.bg.js" {
			want = model.StatusSkipped // CHROME_ISOLATION=crawl, as under abx-dl
		}
		if h.Result.Status != want {
			r.failed = append(r.failed, fmt.Sprintf("%s: %s %s", h.Hook, h.Result.Status, h.Result.Error))
		}
		if h.Result.Attempts > 1 {
			r.retried = append(r.retried, fmt.Sprintf("%s (%d attempts)", h.Hook, h.Result.Attempts))
		}
	}
	if len(r.failed) == 0 {
		checkOutputs(b, st.SnapDir(job))
	}
	return r
}

// lastLine is s's last non-empty line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// checkOutputs checks what the extractors left in a snapshot dir.
func checkOutputs(b *testing.B, dir string) {
	png, err := os.ReadFile(filepath.Join(dir, "screenshot", "screenshot.png"))
	require.NoError(b, err)
	require.True(b, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "screenshot.png is a PNG")
	dom, err := os.ReadFile(filepath.Join(dir, "dom", "output.html"))
	require.NoError(b, err)
	require.Contains(b, string(dom), jsText)
	title, err := os.ReadFile(filepath.Join(dir, "title", "title.txt"))
	require.NoError(b, err)
	require.Equal(b, pageTitle, strings.TrimSpace(string(title)))
	pdf, err := os.ReadFile(filepath.Join(dir, "pdf", "output.pdf"))
	require.NoError(b, err)
	require.True(b, bytes.HasPrefix(pdf, []byte("%PDF-")), "output.pdf is a PDF")
	_, err = os.Stat(filepath.Join(dir, "headers", "headers.json"))
	require.NoError(b, err)
}

// BenchmarkChromeStack is issue 27's bench (see the package doc).
func BenchmarkChromeStack(b *testing.B) {
	plugins, abxdl := os.Getenv(envPlugins), os.Getenv(envAbxDL)
	if _, err := os.Stat(filepath.Join(plugins, "chrome", "config.json")); plugins == "" || err != nil {
		b.Skip("BenchmarkChromeStack needs " + envPlugins + ": abx-plugins' abx_plugins/plugins directory")
	}
	if abxdl == "" {
		b.Skip("BenchmarkChromeStack needs " + envAbxDL + ": the abx-dl command")
	}
	root := b.TempDir()
	for _, p := range append([]string{"base"}, browserPlugins...) {
		require.NoError(b, os.Symlink(filepath.Join(plugins, p), filepath.Join(root, p)))
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(page))
	}))
	defer site.Close()
	st := e2e.NewStack(b, e2e.SharedServer(b), root, func(c *config.Config) {
		c.Hooks.PassEnv = append(c.Hooks.PassEnv, "ABXPKG_*", "NODE_BINARY", "CHROME_BINARY")
		c.Hooks.Timeout = time.Minute
		c.Hooks.Grace = 10 * time.Second
	})
	st.StartPools(b, nil)
	b.ResetTimer()
	walls := map[string][]float64{}
	report := func(r run) {
		fmt.Printf("  %-12s %6.2f s", r.tool, r.wall.Seconds())
		if len(r.retried) > 0 {
			fmt.Printf("  retried: %s", strings.Join(r.retried, "; "))
		}
		if len(r.failed) > 0 {
			fmt.Printf("  not every hook succeeded (left out of the medians): %s\n", strings.Join(r.failed, "; "))
			return
		}
		fmt.Println()
		walls[r.tool] = append(walls[r.tool], r.wall.Seconds())
	}
	fmt.Printf("BenchmarkChromeStack: %d rounds, %d cores\n", *rounds, runtime.NumCPU())
	for i := range *rounds {
		url := fmt.Sprintf("%s/?round=%d", site.URL, i)
		report(abxDLOnce(b, abxdl, url))
		report(archiveflowOnce(b, st, url+"&tool=archiveflow"))
	}
	b.StopTimer()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("load at the end: %s\n", strings.TrimSpace(string(load)))
	af, dl := benchkit.Quantile(walls["archiveflow"], 0.5), benchkit.Quantile(walls["abx-dl"], 0.5)
	fmt.Printf("medians: archiveflow %.2f s = %.3f× abx-dl's %.2f s\n", af, af/dl, dl)
	b.ReportMetric(af/dl, "x-abx-dl")
}
