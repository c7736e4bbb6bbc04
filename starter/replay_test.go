package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/wacz"
)

// lockedBuffer is a bytes.Buffer safe for a command running meanwhile.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveReplay runs `starter replay args...` until the test ends and
// returns its base URL and output.
func serveReplay(t *testing.T, args ...string) (string, *lockedBuffer) {
	t.Helper()
	addr := closedAddr(t)
	var out, errb lockedBuffer
	a := newApp(strings.NewReader(""), &out, &errb)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, append([]string{"replay", "--listen", addr}, args...)) }()
	t.Cleanup(func() {
		cancel()
		assert.Equal(t, exitOK, <-done, errb.String())
	})
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "replay never served: %s", errb.String())
	return base, &out
}

func get(t *testing.T, method, url string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func TestReplayServesTheWACZWithRangeRequests(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "job-w1-1-00001.warc.gz")
	captures(t, w, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC), "https://example.com/")
	file := filepath.Join(dir, "job.wacz")
	_, err := wacz.Create(file, wacz.Files(w), []wacz.Page{{URL: "https://example.com/"}}, wacz.Options{})
	require.NoError(t, err)
	whole, err := os.ReadFile(file)
	require.NoError(t, err)

	base, out := serveReplay(t, file)
	assert.Contains(t, out.String(), "at "+base+"/wacz/job.wacz (Range requests, CORS)")
	assert.Contains(t, out.String(), "open "+base+"/ for the offline ways")

	resp, b := get(t, "GET", base+"/wacz/job.wacz", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, whole, b)
	assert.Equal(t, "bytes", resp.Header.Get("Accept-Ranges"))
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))

	// The end of the ZIP, as a replay reads its central directory first.
	resp, b = get(t, "GET", base+"/wacz/job.wacz", map[string]string{"Range": "bytes=-22"})
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, whole[len(whole)-22:], b)
	resp, b = get(t, "GET", base+"/wacz/job.wacz", map[string]string{"Range": "bytes=10-19"})
	assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
	assert.Equal(t, whole[10:20], b)
	assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), "Content-Range")

	resp, b = get(t, "HEAD", base+"/wacz/job.wacz", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, b)
	assert.Equal(t, int64(len(whole)), resp.ContentLength)
	resp, _ = get(t, "OPTIONS", base+"/wacz/job.wacz", map[string]string{"Origin": "http://127.0.0.1:1", "Access-Control-Request-Headers": "range"})
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "Range", resp.Header.Get("Access-Control-Allow-Headers"))

	resp, b = get(t, "GET", base+"/", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(b), base+"/wacz/job.wacz")
	assert.Contains(t, string(b), "npm pack replaywebpage")
	resp, _ = get(t, "GET", base+"/wacz/other.wacz", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestReplayServesAViewerBesideTheWACZ(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "a.warc.gz")
	captures(t, w, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC), "https://example.com/")
	file := filepath.Join(dir, "a.wacz")
	_, err := wacz.Create(file, wacz.Files(w), nil, wacz.Options{})
	require.NoError(t, err)
	viewer := t.TempDir()
	for _, f := range []string{"index.html", "ui.js", "sw.js"} {
		writeFile0(t, filepath.Join(viewer, f), "viewer "+f)
	}
	base, out := serveReplay(t, file, "--viewer", viewer)
	assert.Contains(t, out.String(), "open "+base+"/?source="+url.QueryEscape(base+"/wacz/a.wacz")+" in a browser")
	_, b := get(t, "GET", base+"/sw.js", nil)
	assert.Equal(t, "viewer sw.js", string(b))
	_, b = get(t, "GET", base+"/?source=x", nil)
	assert.Equal(t, "viewer index.html", string(b))
}

func TestReplayRefusesWhatItCannotServe(t *testing.T) {
	dir := t.TempDir()
	res := runCLI(t, "", "replay", filepath.Join(dir, "x.wacz"), "--listen", "0.0.0.0:0")
	assert.Equal(t, exitUsage, res.code)
	assert.Contains(t, res.stderr, "not a loopback address")
	res = runCLI(t, "", "replay", filepath.Join(dir, "x.wacz"), "--viewer", dir)
	assert.Equal(t, exitUsage, res.code)
	assert.Contains(t, res.stderr, "no index.html")
	res = runCLI(t, "", "replay", filepath.Join(dir, "x.wacz"))
	assert.Equal(t, exitNotFound, res.code, res.stderr)
}

func TestReplayAJobExportsItsWACZFirst(t *testing.T) {
	const id = "3mlbkdu1fpo7wt4lr2qf1mpsw"
	srv, _ := exportJob(t, id, "https://example.com/", model.FetchShallow)
	archive := t.TempDir()
	captures(t, filepath.Join(archive, "snapshots", id, "pagefetch", "page.warc.gz"), time.Now(), "https://example.com/")
	t.Chdir(t.TempDir())
	base, out := serveReplay(t, id, "--archive-dir", archive, "--redis-url", srv.URL)
	assert.Contains(t, out.String(), "wrote "+id+".wacz: 1 WARC(s)")
	_, err := wacz.Validate(id + ".wacz")
	require.NoError(t, err)
	resp, _ := get(t, "HEAD", base+"/wacz/"+id+".wacz", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
