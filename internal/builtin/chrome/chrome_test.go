package chrome

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeChromium writes a shell script that records its argv, one per line,
// to ARGV_FILE and then runs body.
func fakeChromium(t *testing.T, body string) (bin, argvFile string) {
	t.Helper()
	dir := t.TempDir()
	argvFile = filepath.Join(dir, "argv")
	bin = filepath.Join(dir, "chromium")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '" + argvFile + "'\n" + body + "\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	return bin, argvFile
}

func TestFind(t *testing.T) {
	bin, _ := fakeChromium(t, "exit 0")
	got, err := Find(bin)
	require.NoError(t, err)
	assert.Equal(t, bin, got)

	_, err = Find(filepath.Join(t.TempDir(), "absent"))
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "configured binary")

	t.Setenv("PATH", t.TempDir())
	_, err = Find("")
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "none of chromium, chromium-browser")
	assert.True(t, Missing("screenshot needs Chromium: "+err.Error()), "a skip reason built from the error is recognised")
	assert.False(t, Missing("WGET_ENABLED is False"))
	assert.Equal(t, "install chromium (or set CHROME_BINARY) to enable screenshot, pdf", EnableHint([]string{"screenshot", "pdf"}))
}

// TestRunKeepsTheURLOffTheCommandLine: Chromium gets its flags and
// about:blank; the URL goes over the DevTools pipe, so no argument of
// Chromium's (or a shell's) ever parses it.
func TestRunKeepsTheURLOffTheCommandLine(t *testing.T) {
	bin, argvFile := fakeChromium(t, "exit 0")
	const url = `http://h/x?a='b"c d$(touch pwned);e`
	_, err := Run(context.Background(), Capture{Binary: bin, UserAgent: "UA x", Extra: []string{"--foo"}, Kind: DOM, URL: url,
		Out: io.Discard, Grace: time.Second, Proxy: "http://127.0.0.1:3128"})
	require.Error(t, err, "a Chromium that never answers on its pipe captured nothing")
	assert.Contains(t, err.Error(), "chromium closed its DevTools pipe")
	b, err := os.ReadFile(argvFile)
	require.NoError(t, err)
	argv := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	assert.NotContains(t, string(b), "h/x", "the URL is not on the command line")
	assert.Equal(t, "about:blank", argv[len(argv)-1])
	assert.Equal(t, "--foo", argv[len(argv)-2], "operator arguments come last, before the blank page")
	for _, a := range []string{"--headless", "--no-sandbox", "--remote-debugging-pipe", "--user-agent=UA x",
		"--proxy-server=http://127.0.0.1:3128", "--proxy-bypass-list=<-loopback>"} {
		assert.Contains(t, argv, a)
	}
	var profile string
	for _, a := range argv {
		if strings.HasPrefix(a, "--user-data-dir=") {
			profile = strings.TrimPrefix(a, "--user-data-dir=")
		}
	}
	require.NotEmpty(t, profile)
	assert.NoDirExists(t, profile, "the throw-away profile is removed")
}

func TestRunReportsFailureWithStderr(t *testing.T) {
	bin, _ := fakeChromium(t, "echo 'cannot open display' >&2; exit 3")
	_, err := Run(context.Background(), Capture{Binary: bin, Kind: Screenshot, URL: "http://h/", Out: io.Discard})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "chromium screenshot: exit status 3")
	assert.Contains(t, err.Error(), "cannot open display")
}

// realChromium is the Chromium on PATH; the test is skipped without one.
func realChromium(t *testing.T) string {
	t.Helper()
	bin, err := Find("")
	if err != nil {
		t.Skip(err)
	}
	return bin
}

// TestRunCapturesThePageWithItsAnswer drives a real Chromium: each kind
// of capture of a page that redirects, with the status and URL its main
// document was answered after the redirect, whatever that status is.
func TestRunCapturesThePageWithItsAnswer(t *testing.T) {
	bin := realChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/busy", http.StatusFound)
			return
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, "<!doctype html><title>t</title><p>page "+r.URL.Path+"</p>")
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path   string
		status int
		final  string
	}{{"/", 200, "/"}, {"/moved", 503, "/busy"}} {
		for _, kind := range []Kind{Screenshot, PDF, DOM} {
			var out bytes.Buffer
			page, err := Run(context.Background(), Capture{Binary: bin, Kind: kind, URL: srv.URL + tc.path, Out: &out,
				Grace: 5 * time.Second, Viewport: Viewport{1440, 2000}})
			require.NoError(t, err, "%s of %s", kind, tc.path)
			assert.Equal(t, Page{Status: tc.status, URL: srv.URL + tc.final, MIMEType: "text/html"}, page, "%s of %s", kind, tc.path)
			switch kind {
			case Screenshot:
				require.True(t, bytes.HasPrefix(out.Bytes(), []byte("\x89PNG\r\n\x1a\n")), "a PNG")
				assert.Equal(t, []byte{0, 0, 0x05, 0xa0, 0, 0, 0x07, 0xd0}, out.Bytes()[16:24], "1440×2000, the viewport's size")
			case PDF:
				assert.True(t, bytes.HasPrefix(out.Bytes(), []byte("%PDF-")), "a PDF")
			case DOM:
				assert.Equal(t, "<!DOCTYPE html>\n<html><head><title>t</title></head><body><p>page "+tc.final+"</p></body></html>", out.String())
			}
		}
	}
}

// A page answered as a download (here Content-Disposition: attachment) is
// nothing Chromium shows: Run says so with the answer, at once, and writes
// nothing.
func TestRunSaysAPageIsADownload(t *testing.T) {
	bin := realChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/zip")
		w.Header().Set("Content-Disposition", "attachment; filename=report.zip")
		_, _ = w.Write([]byte("PK\x03\x04"))
	}))
	defer srv.Close()
	var out bytes.Buffer
	page, err := Run(context.Background(), Capture{Binary: bin, Kind: DOM, URL: srv.URL + "/report", Out: &out, Grace: 5 * time.Second})
	var derr *DownloadError
	require.ErrorAs(t, err, &derr)
	want := Page{Status: 200, URL: srv.URL + "/report", MIMEType: "application/zip"}
	assert.Equal(t, want, derr.Page)
	assert.Equal(t, want, page)
	assert.Equal(t, srv.URL+"/report answered HTTP 200 with application/zip as a download, which Chromium does not render", err.Error())
	assert.Zero(t, out.Len())
}

// A page whose navigation fails has nothing to capture: Run says why
// with Chromium's net error and writes nothing.
func TestRunReportsAPageThatDidNotLoad(t *testing.T) {
	bin := realChromium(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/"
	require.NoError(t, ln.Close()) // refused from now on
	var out bytes.Buffer
	_, err = Run(context.Background(), Capture{Binary: bin, Kind: Screenshot, URL: url, Out: &out, Grace: 5 * time.Second})
	var lerr *LoadError
	require.ErrorAs(t, err, &lerr)
	assert.Equal(t, "the page did not load: net::ERR_CONNECTION_REFUSED", err.Error())
	assert.Zero(t, out.Len())
}

func TestRunStopsOnCancel(t *testing.T) {
	bin, argvFile := fakeChromium(t, "trap 'exit 143' TERM; while :; do sleep 0.05; done")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Capture{Binary: bin, Kind: DOM, URL: "http://h/", Out: io.Discard, Grace: 30 * time.Second})
		done <- err
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(argvFile); return err == nil }, 30*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.Canceled), "got %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
