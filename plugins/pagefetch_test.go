package plugins_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// TestPageFetch fetches a redirecting page with pagefetch (as a crawl page
// does: enabled by its page plugin set), then reads it with title and
// outlinks, which must not fetch it again.
func TestPageFetch(t *testing.T) {
	ctx := context.Background()
	s := newSite(t)
	snap := newSnapshot(t, s.URL+"/redirect")
	snap.env["PAGEFETCH_ENABLED"] = "True"
	snap.env["CRAWL_DIR"] = t.TempDir()
	fetch := snap.run(ctx, hookOf(t, "pagefetch"), userAgent(t, "pagefetch"))
	requireFinal(t, fetch, model.StatusSucceeded)
	var got []string
	for _, r := range fetch.responses() {
		got = append(got, strings.TrimPrefix(r.URL, s.URL)+" "+strconv.Itoa(r.Status))
	}
	assert.Equal(t, []string{"/redirect 302", "/page2.html 200"}, got, "the redirect is followed inside the page's fetch")
	out := fetch.outputJSON(t)
	assert.Equal(t, s.URL+"/page2.html", out["final_url"])

	title := snap.run(ctx, hookOf(t, "title"), userAgent(t, "title"))
	requireFinal(t, title, model.StatusSucceeded)
	assert.Equal(t, "Page two", title.last().OutputStr)
	assert.Empty(t, title.responses(), "title reads pagefetch's page")
	links := snap.run(ctx, hookOf(t, "outlinks"), userAgent(t, "outlinks"))
	requireFinal(t, links, model.StatusSucceeded)
	require.Len(t, links.snapshots(), 1)
	assert.Equal(t, s.URL+"/", links.snapshots()[0].URL, "links resolve against the final URL")

	// The home page's requisites come with it, each once per crawl.
	home := newSnapshot(t, s.URL+"/")
	home.env = snap.env
	first := home.run(ctx, hookOf(t, "pagefetch"), userAgent(t, "pagefetch"))
	requireFinal(t, first, model.StatusSucceeded)
	var reqs []string
	for _, r := range first.responses()[1:] {
		reqs = append(reqs, strings.TrimPrefix(r.URL, s.URL))
	}
	assert.Contains(t, reqs, "/style.css")
	assert.Contains(t, reqs, "/img/logo.png")
	assert.Contains(t, reqs, "/missing.png", "a missing requisite is fetched and reported")
	warcData, err := os.ReadFile(home.file("pagefetch", "page.warc.gz"))
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(warcData))
	require.NoError(t, err)
	all, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, 1+2*len(first.responses()), strings.Count(string(all), "WARC/1.1\r\n"), "warcinfo, then a request and a response per fetch")
	assert.Contains(t, string(all), "WARC-Target-URI: "+s.URL+"/style.css")

	// A 4xx page is a final failure; the parsing hooks do not fetch it again.
	gone := newSnapshot(t, s.URL+"/nothing-here")
	gone.env = map[string]string{"PAGEFETCH_ENABLED": "True"}
	r := gone.run(ctx, hookOf(t, "pagefetch"), userAgent(t, "pagefetch"))
	requireFinal(t, r, model.StatusFailed)
	tr := gone.run(ctx, hookOf(t, "title"), userAgent(t, "title"))
	requireFinal(t, tr, model.StatusNoResults)
	assert.Empty(t, tr.responses())
	// A 5xx page is transient: retried by the crawl.
	bad := newSnapshot(t, s.URL+"/error")
	bad.env = map[string]string{"PAGEFETCH_ENABLED": "True"}
	br := bad.run(ctx, hookOf(t, "pagefetch"), userAgent(t, "pagefetch"))
	assert.True(t, br.res.Transient)
	require.Len(t, br.responses(), 1)
	assert.Equal(t, 500, br.responses()[0].Status)
	// So is a 429 outside a crawl's host budget (which would back the
	// host off and postpone the page instead).
	busy := newSnapshot(t, s.URL+"/busy")
	busy.env = map[string]string{"PAGEFETCH_ENABLED": "True"}
	bz := busy.run(ctx, hookOf(t, "pagefetch"), userAgent(t, "pagefetch"))
	assert.True(t, bz.res.Transient, "HTTP 429: status %s", bz.status())
	assert.Contains(t, bz.res.TransientReason(), s.URL+"/busy answered HTTP 429")
}
