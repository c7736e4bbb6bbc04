package plugins_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/cdptest"
	"github.com/archiveflow/archiveflow/internal/model"
)

// TestBrowserHooksSayWhyAPageDidNotLoad runs the browser hooks on a URL
// nothing listens on. Headless Chromium exits 0 there, with nothing
// captured; each hook ends transiently (the runner retries it), its error
// names Chromium's net error instead of a missing file, and no capture is
// left: Chromium's own error page is nothing the site sent.
func TestBrowserHooksSayWhyAPageDidNotLoad(t *testing.T) {
	if !haveChromium() {
		t.Skip("no Chromium")
	}
	cdptest.Exclusive(t) // its hooks must answer within their timeouts
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/"
	require.NoError(t, ln.Close()) // refused from now on

	snap := newSnapshot(t, url)
	for plugin, file := range map[string]string{"screenshot": "screenshot.png", "pdf": "output.pdf", "dom": "output.html"} {
		r := snap.run(context.Background(), hookOf(t, plugin), userAgent(t, plugin))
		require.True(t, r.res.Transient, "%s: %s %s", plugin, r.res.Status, r.res.Reason)
		assert.Contains(t, r.res.TransientReason(), plugin+": the page did not load: net::ERR_CONNECTION_REFUSED")
		assert.NoFileExists(t, snap.file(plugin, file))
		assert.Zero(t, r.res.Leftovers, "%s left processes behind", plugin)
	}
}

// TestBrowserHooksRetryAPageTheSiteCouldNotServe: the browser hooks know
// the status their page was answered. A 429 or a 5xx is the site unable
// to answer now (model.TransientStatus, as for wget and pagefetch): the
// hook ends transiently, the runner retries it, and the capture of that
// answer is kept until a later attempt replaces it. A 404 is the page's
// own answer: captured and succeeded, its status in output_json. A
// download is nothing a browser shows: noresults, nothing kept. Every
// hook is run on the 429; the three share runCapture, so each other case
// runs one of them (the chrome package covers each capture kind).
func TestBrowserHooksRetryAPageTheSiteCouldNotServe(t *testing.T) {
	if !haveChromium() {
		t.Skip("no Chromium")
	}
	cdptest.Exclusive(t) // its hooks must answer within their timeouts
	s := newSite(t)
	files := map[string]string{"screenshot": "screenshot.png", "pdf": "output.pdf", "dom": "output.html"}
	transient := func(plugin, path string, status int) {
		t.Helper()
		snap := newSnapshot(t, s.URL+path)
		r := snap.run(context.Background(), hookOf(t, plugin), userAgent(t, plugin))
		require.True(t, r.res.Transient, "%s of %s: %s %s", plugin, path, r.res.Status, r.res.Reason)
		assert.Contains(t, r.res.TransientReason(), fmt.Sprintf("%s: %s%s answered HTTP %d", plugin, s.URL, path, status))
		assert.FileExists(t, snap.file(plugin, files[plugin]), "%s keeps what the site answered", plugin)
		assert.Zero(t, r.res.Leftovers, "%s left processes behind", plugin)
	}
	for _, plugin := range []string{"screenshot", "pdf", "dom"} {
		transient(plugin, "/busy", 429)
	}
	transient("pdf", "/error", 500)

	snap := newSnapshot(t, s.URL+"/gone")
	r := snap.run(context.Background(), hookOf(t, "dom"), userAgent(t, "dom"))
	requireFinal(t, r, model.StatusSucceeded)
	out := r.outputJSON(t)
	assert.Equal(t, float64(404), out["status"])
	assert.Equal(t, s.URL+"/gone", out["final_url"])
	assert.FileExists(t, snap.file("dom", files["dom"]))

	snap = newSnapshot(t, s.URL+"/report.zip")
	r = snap.run(context.Background(), hookOf(t, "screenshot"), userAgent(t, "screenshot"))
	requireFinal(t, r, model.StatusNoResults)
	assert.Equal(t, s.URL+"/report.zip answered HTTP 200 with application/zip as a download, which Chromium does not render",
		r.last().OutputStr)
	assert.Equal(t, "application/zip", r.outputJSON(t)["mime_type"])
	assert.NoFileExists(t, snap.file("screenshot", files["screenshot"]))
}
