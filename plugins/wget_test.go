package plugins_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// TestWgetRecursive crawls the whole test site (FETCH_DEPTH=inf) with one
// ignore pattern and checks the WARC and the counters against the server.
func TestWgetRecursive(t *testing.T) {
	s := newSite(t)
	snap := newSnapshot(t, s.URL+"/")
	snap.depth = "inf"
	snap.ignores = []string{`/ignored\.html$`}
	ua := userAgent(t, "wget")
	r := snap.run(context.Background(), hookOf(t, "wget"), ua)
	requireFinal(t, r, model.StatusSucceeded)

	recs, err := readWARC(snap.file("wget", "warc/archive.warc.gz"))
	require.NoError(t, err)
	got := warcResponses(recs)
	for path, status := range map[string]int{
		"/": 200, "/page2.html": 200, "/redirect": 302, "/missing": 404, "/error": 500,
		"/style.css": 200, "/img/bg.png": 200, "/missing.png": 404,
	} {
		assert.Equal(t, status, got[s.URL+path], "WARC response for %s", path)
	}
	assert.False(t, s.has(ua, "/ignored.html"), "IGNORE_PATTERNS reject /ignored.html")
	assert.NotContains(t, got, "https://example.org/elsewhere?x=1", "recursion stays on the site")

	assertResponsesMatch(t, s, ua, r.responses())
	var r2, r3, r4, r5 int
	for _, resp := range r.responses() {
		switch resp.Status / 100 {
		case 2:
			r2++
		case 3:
			r3++
		case 4:
			r4++
		case 5:
			r5++
		}
	}
	assert.Equal(t, 1, r3, "one redirect")
	assert.Equal(t, 2, r4, "/missing and /missing.png")
	assert.Equal(t, 2, r5, "/error and /error.js")
	assert.Equal(t, len(s.requests(ua)), r2+r3+r4+r5)
}

// TestWgetPageAnswers: what the page's own answer makes of wget's
// attempt (model.TransientStatus): a 5xx or a 429 is the site unable to
// answer now, so the attempt is transient and the runner tries again; a
// 404 is the page's final answer. Each answer is in the WARC as the
// origin sent it.
func TestWgetPageAnswers(t *testing.T) {
	s := newSite(t)
	for _, c := range []struct {
		path      string
		status    int
		transient bool
	}{
		{"/error", 500, true},
		{"/busy", 429, true},
		{"/missing", 404, false},
	} {
		t.Run(strings.TrimPrefix(c.path, "/"), func(t *testing.T) {
			snap := newSnapshot(t, s.URL+c.path)
			r := snap.run(context.Background(), hookOf(t, "wget"), userAgent(t, "wget"))
			want := fmt.Sprintf("%s answered HTTP %d", s.URL+c.path, c.status)
			if c.transient {
				require.True(t, r.res.Transient, "HTTP %d: the attempt is transient (status %s)", c.status, r.status())
				assert.Contains(t, r.res.TransientReason(), want)
			} else {
				requireFinal(t, r, model.StatusFailed)
				assert.Equal(t, want, r.res.ArchiveResult().Error)
			}
			recs, err := readWARC(snap.file("wget", "warc/archive.warc.gz"))
			require.NoError(t, err)
			assert.Equal(t, c.status, warcResponses(recs)[s.URL+c.path], "the origin's answer is archived")
		})
	}
}

// TestWgetStopsOnSIGTERM stops wget at "the seal" while a requisite hangs:
// the hook stops wget, prints its final record and exits by itself.
func TestWgetStopsOnSIGTERM(t *testing.T) {
	s := newSite(t)
	s.held.Store(true)
	snap := newSnapshot(t, s.URL+"/slow")
	ua := userAgent(t, "wget")
	ctx, seal := context.WithCancel(context.Background())
	defer seal()

	done := make(chan bgResult, 1)
	go func() {
		r, err := snap.runE(ctx, hookOf(t, "wget"), ua)
		done <- bgResult{r, err}
	}()
	// The page is saved and the stylesheet request is hanging.
	require.Eventually(t, func() bool {
		_, err := os.Stat(snap.file("wget", "wget.json"))
		return err == nil && s.has(ua, "/slow") && s.holding()
	}, hookDeadline, 20*time.Millisecond)
	seal()

	var res bgResult
	select {
	case res = <-done:
	case <-time.After(hookDeadline):
		t.Fatal("wget hook did not stop")
	}
	require.NoError(t, res.err)
	r := res.run
	requireFinal(t, r, model.StatusSucceeded)
	require.NotNil(t, r.last(), "the hook printed its final record after SIGTERM")
	assert.Zero(t, r.res.Signal, "the hook exited by itself, it was not killed")
	out := r.outputJSON(t)
	assert.Equal(t, true, out["stopped"])
	assert.EqualValues(t, 200, out["main_status"])
	_, err := os.Stat(snap.file("wget", "warc/archive.warc.gz"))
	assert.NoError(t, err)
}

type bgResult struct {
	run hookRun
	err error
}
