//go:build dev

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/builtin/chrome"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// policySite serves a page whose requisites and redirects point at cloud
// metadata and at a denied loopback port, and logs what it served.
type policySite struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

// newLoggingSite serves handler and logs the paths it was asked for.
func newLoggingSite(t *testing.T, handler http.HandlerFunc) *policySite {
	t.Helper()
	s := &policySite{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func newPolicySite(t *testing.T, denied string) *policySite {
	t.Helper()
	return newLoggingSite(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>Fetch policy</title>
<link rel="stylesheet" href="http://%[1]s/style.css">
<link rel="icon" href="/icon">
</head><body><p>page</p>
<img src="http://169.254.169.254/latest/meta-data/iam.png">
<img src="/moved.png">
<img src="/ok.png">
</body></html>`, denied)
		case "/moved.png":
			http.Redirect(w, r, "http://"+denied+"/moved.png", http.StatusFound)
		case "/icon":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/icon.png", http.StatusFound)
		case "/seed-redirect":
			http.Redirect(w, r, "http://"+denied+"/", http.StatusFound)
		case "/ok.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n"))
		default:
			http.NotFound(w, r)
		}
	})
}

func (s *policySite) served(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.paths {
		if p == path {
			return true
		}
	}
	return false
}

// hasChromium reports whether a Chromium the browser hooks find is
// installed (chrome.Candidates).
func hasChromium() bool {
	for _, c := range chrome.Candidates {
		if _, err := exec.LookPath(c); err == nil {
			return true
		}
	}
	return false
}

// jobLog returns the stdout messages of a job's IDENT_log.
func jobLog(t *testing.T, s *Stack, ident string) string {
	t.Helper()
	lines, err := s.Redis.ZRange(context.Background(), ident+"_log", 0, -1).Result()
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// TestFetchPolicyHoldsForEveryBuiltinFetcher: a snapshot of a local page
// whose requisites and redirects point at 169.254.169.254 and at a denied
// loopback port, archived by wget, Chromium (when installed) and the Go
// fetchers: neither address is ever connected to (the guarded listener
// proves it for the port), every refusal is in the job log with its rule,
// and what is allowed is archived.
func TestFetchPolicyHoldsForEveryBuiltinFetcher(t *testing.T) {
	if _, err := exec.LookPath("wget"); err != nil {
		t.Skip("wget is not installed")
	}
	denied := egresstest.Guard(t)
	site := newPolicySite(t, denied.Addr)
	plugins := []string{"headers", "wget", "favicon"}
	chromium := hasChromium()
	if chromium {
		plugins = append(plugins, "dom")
	}
	s := NewStack(t, server, builtinPlugins(t, plugins...), func(c *config.Config) {
		c.Fetch.Deny = append(c.Fetch.Deny, denied.Addr)
		c.Hooks.Timeout = time.Minute
	})
	s.StartPools(t, builtinEnv(t))

	job := s.Submit(t, site.URL+"/", nil)
	require.NoError(t, s.Wait(t, job, 3*time.Minute))
	var st workflows.Status
	require.NoError(t, job.Run.Get(context.Background(), &st))
	res := resultsByHook(st)
	assert.Equal(t, model.StatusSucceeded, res["headers"].Status, res["headers"].Error)
	assert.Equal(t, model.StatusSucceeded, res["wget"].Status, res["wget"].Error)
	assert.True(t, site.served("/ok.png"), "allowed requisites are fetched")
	if chromium {
		assert.Equal(t, model.StatusSucceeded, res["dom"].Status, "%s %s", res["dom"].OutputStr, res["dom"].Error)
	}

	log := jobLog(t, s, job.Ident)
	metadataRule := `denied by fetch.deny rule \"169.254.0.0/16\"`
	portRule := fmt.Sprintf(`denied by fetch.deny rule \"%s\"`, denied.Addr)
	requisites := []string{
		"fetch of http://169.254.169.254/latest/meta-data/iam.png " + metadataRule,
		"fetch of http://" + denied.Addr + "/style.css " + portRule,
		"fetch of http://" + denied.Addr + "/moved.png " + portRule,
	}
	reported := map[string][]string{
		"wget/on_Snapshot__60_wget.bg.sh":    requisites,
		"favicon/on_Snapshot__61_favicon.sh": {"fetch of http://169.254.169.254/latest/meta-data/icon.png " + metadataRule},
	}
	if chromium {
		reported["dom/on_Snapshot__52_dom.sh"] = requisites
	}
	for hook, lines := range reported {
		for _, l := range lines {
			assert.Contains(t, log, "["+hook+"] archiveflow: "+l)
		}
	}

	// A seed that redirects to the denied port.
	job2 := s.Submit(t, site.URL+"/seed-redirect", nil)
	require.NoError(t, s.Wait(t, job2, 3*time.Minute))
	require.NoError(t, job2.Run.Get(context.Background(), &st))
	res = resultsByHook(st)
	assert.Equal(t, model.StatusFailed, res["headers"].Status)
	assert.Contains(t, res["headers"].Error, fmt.Sprintf(`denied by fetch.deny rule %q`, denied.Addr))
	assert.Equal(t, 1, res["headers"].Attempts, "a denial is not retried")
	assert.Contains(t, jobLog(t, s, job2.Ident), "archiveflow: fetch of http://"+denied.Addr+"/ "+portRule)

	assert.Zero(t, denied.Connections(), "the denied loopback port was connected to")
}
