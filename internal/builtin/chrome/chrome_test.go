package chrome

import (
	"context"
	"errors"
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

func TestRunPassesURLAsOneArgument(t *testing.T) {
	bin, argvFile := fakeChromium(t, `echo '<html></html>'`)
	const url = `http://h/x?a='b"c d$(touch pwned);e`
	out, err := os.Create(filepath.Join(t.TempDir(), "out.html"))
	require.NoError(t, err)
	defer out.Close()
	err = Run(context.Background(), Capture{Binary: bin, UserAgent: "UA x", Extra: []string{"--foo"}, Flag: "--dump-dom", URL: url, Stdout: out, Grace: time.Second,
		Proxy: "http://127.0.0.1:3128"})
	require.NoError(t, err)
	b, err := os.ReadFile(argvFile)
	require.NoError(t, err)
	argv := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	assert.Equal(t, url, argv[len(argv)-1], "the URL is the last argument, verbatim")
	assert.Equal(t, "--dump-dom", argv[len(argv)-2])
	assert.Contains(t, argv, "--headless")
	assert.Contains(t, argv, "--no-sandbox")
	assert.Contains(t, argv, "--user-agent=UA x")
	assert.Contains(t, argv, "--foo")
	assert.Contains(t, argv, "--proxy-server=http://127.0.0.1:3128")
	assert.Contains(t, argv, "--proxy-bypass-list=<-loopback>", "loopback goes through the fetch proxy too")
	var profile string
	for _, a := range argv {
		if strings.HasPrefix(a, "--user-data-dir=") {
			profile = strings.TrimPrefix(a, "--user-data-dir=")
		}
	}
	require.NotEmpty(t, profile)
	assert.NoDirExists(t, profile, "the throw-away profile is removed")
	html, err := os.ReadFile(out.Name())
	require.NoError(t, err)
	assert.Equal(t, "<html></html>\n", string(html))
}

func TestRunReportsFailureWithStderr(t *testing.T) {
	bin, _ := fakeChromium(t, "echo 'cannot open display' >&2; exit 3")
	err := Run(context.Background(), Capture{Binary: bin, Flag: "--screenshot=/x.png", URL: "http://h/"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exit status 3")
	assert.Contains(t, err.Error(), "cannot open display")
}

// Headless Chromium exits 0 when the page's navigation fails: Run tells
// that from a capture by the line it logs.
func TestRunReportsAPageThatDidNotLoad(t *testing.T) {
	bin, _ := fakeChromium(t, `echo '[1:1:1128/131723.093082:ERROR:components/headless/command_handler/headless_command_handler.cc:403] Page load failed: net::ERR_NAME_NOT_RESOLVED' >&2; exit 0`)
	err := Run(context.Background(), Capture{Binary: bin, Flag: "--screenshot=/x.png", URL: "http://h/"})
	var lerr *LoadError
	require.ErrorAs(t, err, &lerr)
	assert.Equal(t, "net::ERR_NAME_NOT_RESOLVED", lerr.Net)
	assert.Equal(t, "the page did not load: net::ERR_NAME_NOT_RESOLVED", err.Error())

	bin, _ = fakeChromium(t, `echo 'Failed to connect to the bus' >&2; exit 0`)
	require.NoError(t, Run(context.Background(), Capture{Binary: bin, Flag: "--screenshot=/x.png", URL: "http://h/"}), "other noise is no failure")
}

func TestRunStopsOnCancel(t *testing.T) {
	bin, argvFile := fakeChromium(t, "trap 'exit 143' TERM; while :; do sleep 0.05; done")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Capture{Binary: bin, Flag: "--dump-dom", URL: "http://h/", Grace: 30 * time.Second})
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
