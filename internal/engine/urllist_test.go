package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// TestFetchURLList: a text list is downloaded with the job's user agent
// and kept in the crawl's directory; a denied host, a 4xx, a non-text
// content type and a list over the size limit are refused
// (ErrURLListRefused), a 5xx or a 429 is not (another attempt may succeed).
func TestFetchURLList(t *testing.T) {
	var ua string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/list.txt":
			ua = r.UserAgent()
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, "http://a.example/\n")
		case "/bare":
			fmt.Fprint(w, "http://a.example/\n") // sniffed as text/plain
		case "/big.txt":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, strings.Repeat("x", 100))
		case "/image":
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "\x89PNG")
		case "/down":
			http.Error(w, "down", http.StatusServiceUnavailable)
		case "/busy":
			http.Error(w, "busy", http.StatusTooManyRequests)
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	guard := egresstest.Guard(t)
	pol, err := netpolicy.Parse([]string{guard.Addr})
	require.NoError(t, err)
	e := pageEngine(t, t.TempDir(), func(c *Config) { c.Fetch = pol })
	fetch := func(u string, maxBytes int64) (activities.URLListData, error) {
		return e.FetchURLList(context.Background(), activities.URLListFetch{Ident: "job1", URL: u, MaxBytes: maxBytes, Timeout: 10 * time.Second, UserAgent: "UA/1"})
	}

	got, err := fetch(srv.URL+"/list.txt", 50)
	require.NoError(t, err)
	assert.Equal(t, "http://a.example/\n", string(got.Data))
	assert.Equal(t, "UA/1", ua)
	assert.Equal(t, filepath.Join(e.crawlDir("job1"), URLListFile), got.Path)
	kept, err := os.ReadFile(got.Path)
	require.NoError(t, err)
	assert.Equal(t, got.Data, kept, "the list is kept in the crawl's directory")
	_, err = fetch(srv.URL+"/bare", 50)
	require.NoError(t, err)

	for path, want := range map[string]string{
		"http://" + guard.Addr + "/l.txt": "the fetch policy denies it",
		srv.URL + "/missing":              "HTTP status 404",
		srv.URL + "/image":                `content type "image/png": must be text`,
		srv.URL + "/big.txt":              "more than 50 bytes",
	} {
		_, err := fetch(path, 50)
		require.ErrorIs(t, err, activities.ErrURLListRefused, path)
		assert.Contains(t, err.Error(), want, path)
	}
	// A list that redirects to the denied port, however it is spelled.
	for _, host := range []string{guard.Addr, fmt.Sprintf("[::ffff:127.0.0.1]:%d", guard.Port()),
		fmt.Sprintf("2130706433:%d", guard.Port()), fmt.Sprintf("0x7f.1:%d", guard.Port())} {
		target := "http://" + host + "/l.txt"
		_, err := fetch(srv.URL+"/redirect?to="+url.QueryEscape(target), 50)
		require.ErrorIs(t, err, activities.ErrURLListRefused, host)
		assert.Contains(t, err.Error(), fmt.Sprintf("fetch of %s denied by fetch.deny rule %q", target, guard.Addr))
	}
	assert.Zero(t, guard.Connections(), "the denied address was connected to")
	for _, path := range []string{"/down", "/busy"} {
		_, err = fetch(srv.URL+path, 50)
		require.Error(t, err, path)
		assert.NotErrorIs(t, err, activities.ErrURLListRefused, "%s: a 5xx or a 429 may pass", path)
	}
}
