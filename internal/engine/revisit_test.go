package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// TestCrawlStoresASharedPayloadOnce: 50 pages each show one 1 MB image,
// the same bytes under 50 URLs. The job's WARC holds the image's payload
// once, and 49 revisit records naming that first response.
func TestCrawlStoresASharedPayloadOnce(t *testing.T) {
	img := make([]byte, 1<<20)
	_, _ = rand.Read(img)
	mux := http.NewServeMux()
	mux.HandleFunc("/img/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(img)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><head><title>%s</title></head><body><img src="/img%s.png"></body></html>`, r.URL.Path, r.URL.Path)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	// By name, so the WARC-IP-Address is the connection's, not the URL's.
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	base := "http://localhost:" + port
	plugins, err := filepath.Abs("../../plugins")
	require.NoError(t, err)
	e := pageEngine(t, plugins, func(c *Config) { c.InProcessBuiltins = true })
	cr := testCrawl("pagefetch")
	cr.Job.URL = base + "/"
	ctx := context.Background()
	const pages = 50
	for i := range pages {
		out, err := e.RunPage(ctx, activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: int64(i + 2), URL: fmt.Sprintf("%s/p%d", base, i), Depth: 1, Attempt: 1}})
		require.NoError(t, err)
		require.Equal(t, activities.PageSucceeded, out.Status, out.Note)
		require.Len(t, out.Responses, 2, "the page and its image")
	}

	warcs, err := filepath.Glob(filepath.Join(e.cfg.ArchiveDir, "crawls", "crawl1", "warc", "*.warc.gz"))
	require.NoError(t, err)
	require.Len(t, warcs, 1)
	data, err := os.ReadFile(warcs[0])
	require.NoError(t, err)
	t.Logf("job WARC: %d bytes for %d pages sharing a %d-byte image", len(data), pages, len(img))
	assert.Less(t, len(data), len(img)+len(img)/5, "the image's payload is stored once")

	types := map[string]int{}
	requests := map[string]bool{}
	var stored warc.Header
	var revisits []warc.Header
	var info string
	require.NoError(t, warc.Read(bytes.NewReader(data), func(h warc.Header, block io.Reader) error {
		types[h.Type]++
		assert.Equal(t, "WARC/1.1", h.Version)
		switch h.Type {
		case "warcinfo":
			b, err := io.ReadAll(block)
			info = string(b)
			return err
		case "request":
			requests[h.ID] = true
		case "response", "revisit":
			require.Len(t, h.ConcurrentTo, 1)
			assert.True(t, requests[h.ConcurrentTo[0]], "linked to its request, written before it")
			assert.Contains(t, []string{"127.0.0.1", "::1"}, h.Get("WARC-IP-Address"), "the address the fetch connected to")
			assert.True(t, strings.HasPrefix(h.Get("WARC-Payload-Digest"), "sha1:"))
			if !strings.Contains(h.TargetURI, "/img/") {
				break
			}
			if h.Type == "response" {
				stored = h
			} else {
				revisits = append(revisits, h)
			}
		}
		return nil
	}))
	assert.Equal(t, map[string]int{"warcinfo": 1, "request": 2 * pages, "response": pages + 1, "revisit": pages - 1}, types)
	assert.Contains(t, info, "software: "+warc.Software()+"\r\n")
	assert.Contains(t, info, "isPartOf: crawl1\r\n")
	require.Len(t, revisits, pages-1)
	assert.Equal(t, warc.Digest(img), stored.Get("WARC-Payload-Digest"))
	for _, r := range revisits {
		assert.Equal(t, stored.ID, r.Get("WARC-Refers-To"))
		assert.Equal(t, stored.TargetURI, r.Get("WARC-Refers-To-Target-URI"))
		assert.Equal(t, stored.Get("WARC-Date"), r.Get("WARC-Refers-To-Date"))
		assert.Equal(t, warc.RevisitProfile, r.Get("WARC-Profile"))
		assert.Less(t, r.ContentLength, int64(300), "the HTTP header only")
	}

	// The index outlives the worker: a new engine on the same archive (a
	// restarted worker) writes the image as a revisit of the first record.
	require.NoError(t, e.warcs.close("crawl1"))
	e2 := pageEngine(t, plugins, func(c *Config) { c.InProcessBuiltins = true; c.ArchiveDir = e.cfg.ArchiveDir; c.Instance = "host-2" })
	out, err := e2.RunPage(ctx, activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: 100, URL: base + "/again", Depth: 1, Attempt: 1}})
	require.NoError(t, err)
	require.Equal(t, activities.PageSucceeded, out.Status, out.Note)
	require.NoError(t, e2.warcs.close("crawl1"))
	again, err := filepath.Glob(filepath.Join(e.cfg.ArchiveDir, "crawls", "crawl1", "warc", "crawl1-host-2-*.warc.gz"))
	require.NoError(t, err)
	require.Len(t, again, 1)
	f, err := os.Open(again[0])
	require.NoError(t, err)
	defer f.Close()
	var refers []string
	require.NoError(t, warc.Read(f, func(h warc.Header, _ io.Reader) error {
		if h.Type == "revisit" {
			refers = append(refers, h.Get("WARC-Refers-To"))
		}
		return nil
	}))
	assert.Equal(t, []string{stored.ID}, refers)
}
