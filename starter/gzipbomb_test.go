//go:build dev

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/builtin/chrome"
	"github.com/archiveflow/archiveflow/internal/cdptest"
	"github.com/archiveflow/archiveflow/internal/hostile"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/proccheck"
	"github.com/archiveflow/archiveflow/internal/procs"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// TestDevOnAGzipBombGivesUpAtTheMemoryLimit is issue 30 item 4's
// acceptance, run as a user does: `starter dev URL` (the built binary, its
// embedded stack, the default configuration) on a loopback page that is a
// gzip bomb (10 MB on the wire, 10 GiB of zeros inflated). The browser
// hooks end failed after one attempt each, naming their default memory
// limit (ended by it, not by their 60 s timeout); the job reaches a final state;
// no hook process is left; wget's and pagefetch's WARCs keep the
// compressed bytes as sent. It runs with the mechanism the host offers (a
// cgroup where the worker can create one) and with rlimits only, as on a
// host without a writable cgroup.
func TestDevOnAGzipBombGivesUpAtTheMemoryLimit(t *testing.T) {
	browser, err := chrome.Find("")
	if err != nil {
		t.Skip(err)
	}
	bin := starterBinary(t)
	bomb := hostile.NewGzipBomb(10 << 30)
	var stream bytes.Buffer
	_, err = bomb.WriteTo(&stream)
	require.NoError(t, err)
	sent := sha256.Sum256(stream.Bytes())

	for _, mech := range []struct{ name, cgroup string }{{"host", ""}, {"rlimit", procs.CgroupNone}} {
		t.Run(mech.name, func(t *testing.T) {
			// Three Chromium renderers inflating up to their limit at once:
			// beside other browser tests one got too little CPU and ended its
			// first attempt another way. The machine's browsers are this
			// test's.
			cdptest.Exclusive(t)
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				bomb.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			url := srv.URL + "/"
			id := identOf(t, url)
			cwd := t.TempDir()

			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "dev", url, "--json", "--port", "0", "--ui-port", "-1", "--redis-port", "0")
			cmd.Dir = cwd
			cmd.Env = []string{
				"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8",
				"CHROME_BINARY=" + browser,
				"PAGEFETCH_ENABLED=true", // pagefetch's WARC too (on for crawl pages)
			}
			if mech.cgroup != "" {
				cmd.Env = append(cmd.Env, "ARCHIVEFLOW_HOOKS_LIMITS_CGROUP="+mech.cgroup)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			require.NoError(t, ctx.Err(), "starter dev did not end; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			if err != nil {
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "stderr:\n%s", stderr.String())
			}

			var out struct{ Jobs []outcome }
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			require.Len(t, out.Jobs, 1)
			job := out.Jobs[0]
			assert.True(t, job.State.Final(), "the job reached a final state: %s", job.State)
			rows := map[string]hookRow{}
			for _, r := range job.Hooks {
				rows[r.Plugin] = r
			}
			var browserTime time.Duration
			for _, plugin := range []string{"screenshot", "pdf", "dom"} {
				r := rows[plugin]
				t.Logf("%s: %s, %d attempt(s), %s: %s", plugin, r.Status, r.Attempts, r.duration(), r.Error)
				assert.Equal(t, model.StatusFailed, r.Status, "%s: %s", plugin, r.Error)
				assert.Equal(t, 1, r.Attempts, "%s gave up after one attempt", plugin)
				// Ended by its memory limit, not by its 60 s timeout: how long
				// that takes depends on the machine (22-28 s quiet, 48-53 s in
				// a loaded CI run), so the log says it and docs/reliability.md
				// §9 records it; the test asserts the cause.
				assert.Contains(t, r.Error, "memory limit 2 GiB", plugin) // "exceeded" (cgroup) or "reached (RLIMIT_DATA)"
				assert.NotContains(t, r.Error, "timed out", plugin)
				browserTime += r.duration()
			}
			t.Logf("%s: job %s after %s (browser hooks %s, %d requests to the bomb)", mech.name, job.State, took.Round(100*time.Millisecond),
				browserTime.Round(100*time.Millisecond), requests.Load())

			// Nothing the hooks started is left: their processes work in
			// the snapshot directory below cwd.
			require.Eventually(t, func() bool { return len(proccheck.Below(cwd)) == 0 }, 15*time.Second, 100*time.Millisecond,
				"hook processes left: %v", proccheck.Below(cwd))

			snap := filepath.Join(cwd, "data", "archive", "snapshots", id)
			for _, w := range []string{"wget/warc/archive.warc.gz", "pagefetch/page.warc.gz"} {
				body, hdr := warcResponse(t, filepath.Join(snap, filepath.FromSlash(w)), url)
				assert.Equal(t, "gzip", hdr.Get("Content-Encoding"), w)
				assert.Equal(t, len(stream.Bytes()), len(body), "%s keeps the compressed body, not the %d inflated bytes", w, bomb.Inflated())
				assert.Equal(t, sent, sha256.Sum256(body), "%s keeps the bytes as sent", w)
			}
		})
	}
}

// warcResponse returns the payload and HTTP header of the response record
// for url in the WARC at path, as recorded (no content decoding).
func warcResponse(t *testing.T, path, url string) ([]byte, http.Header) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var body []byte
	var hdr http.Header
	err = warc.Read(f, func(h warc.Header, block io.Reader) error {
		if h.Type != "response" || strings.Trim(h.TargetURI, "<>") != url || hdr != nil {
			return nil
		}
		resp, err := http.ReadResponse(bufio.NewReader(block), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		hdr = resp.Header
		body, err = io.ReadAll(resp.Body)
		return err
	})
	require.NoError(t, err, path)
	require.NotNil(t, hdr, "%s has no response record for %s", path, url)
	return body, hdr
}
