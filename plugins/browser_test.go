package plugins_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/cdptest"
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
