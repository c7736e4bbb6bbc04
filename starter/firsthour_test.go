//go:build dev

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/wacz"
	"github.com/archiveflow/archiveflow/plugins"
)

// These tests run the starter as a new user does: the built binary alone,
// started from an empty directory, against a site on loopback.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string // binPath's directory: TestMain removes it
)

// starterBinary builds the dev starter once into a temporary directory.
func starterBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "starter-bin-")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "starter")
		out, err := exec.Command("go", "build", "-tags", "dev", "-o", binPath, "github.com/archiveflow/archiveflow/starter").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// testSite serves a small page on loopback; every request waits for gate
// (nil: none).
func testSite(t *testing.T, gate <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>First hour</title></head><body><p>Hello, archive.</p><a href="/more">more</a></body></html>`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// cleanEnv is a new user's environment: no ARCHIVEFLOW_* settings, and no
// Chromium (CHROME_BINARY names none), so the browser hooks skip at once.
func cleanEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8",
		"CHROME_BINARY=/nonexistent/chromium",
	}
}

// devArgs keep the stack off the standard ports other tests may hold.
var devArgs = []string{"--port", "0", "--ui-port", "0", "--redis-port", "0"}

func TestDevFromAnEmptyDirectoryArchivesALocalSite(t *testing.T) {
	bin := starterBinary(t)
	// The site answers once the console has shown a progress line, so a
	// job faster than one poll still shows one (and the test cannot pass
	// or fail on the machine's speed).
	gate := make(chan struct{})
	url := testSite(t, gate)
	id := identOf(t, url)
	cwd := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"dev", url}, devArgs...)...)
	cmd.Dir, cmd.Env = cwd, cleanEnv()
	var stderr strings.Builder
	stdout := &watchedOutput{pattern: regexp.MustCompile(`(?m)^` + id + `  active\s+step \d/9  hooks \d+/12`), seen: gate}
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	// Should no progress line come, the site answers anyway after a while
	// and the assertion below names what is missing.
	release := time.AfterFunc(time.Minute, stdout.release)
	defer release.Stop()
	err := cmd.Run()
	out := stdout.String()
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out, stderr.String())

	snap := filepath.Join(cwd, "data", "archive", "snapshots", id)
	for _, f := range []string{"headers/headers.json", "title/title.txt", "index/index.html", "index/index.json"} {
		assert.FileExists(t, filepath.Join(snap, f))
	}
	assert.DirExists(t, filepath.Join(cwd, "data", "archive", "plugins", plugins.DirPrefix+plugins.Hash()),
		"the built-in plugins come from the binary")
	log, err := os.ReadFile(filepath.Join(cwd, "data", "logs", "dev.log"))
	require.NoError(t, err)
	assert.Contains(t, string(log), "hook finished", "log records go to the data dir's log file")

	// The console: plain lines (stdout is not a terminal), no log records,
	// the results table, and what to do next.
	t.Logf("console output of `starter dev URL`:\n%s", out)
	assert.Empty(t, stderr.String())
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	assert.Less(t, len(lines), 25, "a default run for one URL prints under 25 lines")
	assert.NotContains(t, out, "\x1b", "no escape sequences when not on a terminal")
	assert.Contains(t, lines[0], "logs: "+filepath.Join(cwd, "data", "logs", "dev.log"))
	assert.Regexp(t, `(?m)^`+id+`  active\s+step \d/9  hooks \d+/12`, out, "plain progress lines")
	assert.Contains(t, out, id+"  FINISHED  "+url)
	assert.Regexp(t, `(?m)^  STEP  HOOK\s+STATUS\s+TRIES  TIME\s+OUTPUT / ERROR$`, out)
	assert.Regexp(t, `(?m)^  2     headers\s+succeeded  1\s+`, out)
	assert.Regexp(t, `(?m)^  5     screenshot\s+skipped\s+1\s+\S+\s+screenshot needs Chromium`, out, "a skipped hook says why")
	assert.Contains(t, out, "  hint: install chromium (or set CHROME_BINARY) to enable screenshot, pdf, dom")
	assert.Contains(t, out, "  files:   "+snap+"  (open index/index.html)")
	sealed := filepath.Join(snap, id+".wacz")
	assert.Contains(t, out, "  wacz:    "+sealed+"  (starter replay "+id+")", "the seal's WACZ is named")
	if _, err := wacz.Validate(sealed); err != nil {
		t.Errorf("the sealed WACZ: %v", err)
	}
	assert.Regexp(t, `(?m)^  Web UI:  http://127\.0\.0\.1:\d+/namespaces/default/workflows/`+id+`$`, out)
	assert.Contains(t, out, "Archive another URL: "+bin+" dev URL")
}

// watchedOutput collects a command's output and closes seen the first
// time the output matches pattern.
type watchedOutput struct {
	mu      sync.Mutex
	buf     strings.Builder
	pattern *regexp.Regexp
	seen    chan struct{}
	once    sync.Once
}

func (w *watchedOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.pattern.MatchString(w.buf.String()) {
		w.release()
	}
	return len(p), nil
}

func (w *watchedOutput) release() { w.once.Do(func() { close(w.seen) }) }

func (w *watchedOutput) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// tmux drives a terminal of its own (a private server, so the test's
// environment is exact and other tmux users are not touched).
type tmux struct {
	t      *testing.T
	socket string
}

func (x tmux) run(args ...string) string {
	x.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-L", x.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), "LANG=C.UTF-8", "LC_ALL=C.UTF-8") // the live view draws UTF-8 marks
	out, err := cmd.CombinedOutput()
	require.NoError(x.t, err, "tmux %v: %s", args, out)
	return string(out)
}

// screen is what the terminal shows now.
func (x tmux) screen() string { return x.run("capture-pane", "-p", "-t", "t") }

// history is everything the terminal printed, scrolled off or not.
func (x tmux) history() string { return x.run("capture-pane", "-p", "-J", "-S", "-", "-t", "t") }

func TestDevOnATerminalShowsALiveViewThenTheResults(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux on PATH")
	}
	bin := starterBinary(t)
	gate := make(chan struct{})
	url := testSite(t, gate)
	id := identOf(t, url)
	cwd := t.TempDir()

	x := tmux{t: t, socket: fmt.Sprintf("starter-test-%d", os.Getpid())}
	shell := "env -i " + strings.Join(append(cleanEnv(), "TERM=xterm-256color"), " ") + " " + bin + " dev " + url + " " +
		strings.Join(devArgs, " ") + "; echo EXIT=$?; sleep 600"
	x.run("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", "-c", cwd, shell)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", x.socket, "kill-server").Run() })

	// The site holds every request: the headers hook stays running and
	// the live view shows it.
	var live string
	require.Eventually(t, func() bool {
		live = x.screen()
		return strings.Contains(live, "▸ headers") && strings.Contains(live, "running")
	}, 2*time.Minute, 200*time.Millisecond, "no live view; the terminal shows:\n%s", live)
	t.Logf("live view:\n%s", live)
	assert.Regexp(t, `[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] `+id+`  active · step 2/9 · hooks [01]/12 · `, live)
	assert.Regexp(t, `· \d+ pending`, live)
	close(gate)

	var final string
	require.Eventually(t, func() bool {
		final = x.history()
		return strings.Contains(final, "EXIT=")
	}, 3*time.Minute, 200*time.Millisecond, "the run did not end; the terminal shows:\n%s", final)
	t.Logf("terminal after the run:\n%s", final)
	assert.Contains(t, final, "EXIT=0")
	assert.Regexp(t, `(?m)^  2     headers\s+succeeded  1\s+`, final, "the results table")
	assert.Regexp(t, `(?m)^  6     wget\s+succeeded`, final)
	assert.Contains(t, final, "hint: install chromium (or set CHROME_BINARY) to enable screenshot, pdf, dom")
	// Redrawn in place: no frame of the live view is left in the history.
	assert.NotContains(t, final, "▸ headers")
	assert.NotContains(t, final, "pending")
	assert.Len(t, regexp.MustCompile(id+`  FINISHED`).FindAllString(final, -1), 1)
	lines := strings.Split(strings.TrimRight(final, "\n"), "\n")
	assert.Less(t, len(lines), 25, "console lines of the run:\n%s", final)
}
