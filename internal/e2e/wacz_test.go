//go:build dev

package e2e

import (
	"archive/zip"
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/testsite"
	"github.com/archiveflow/archiveflow/internal/wacz"
)

// TestExportACrawlWritesAValidWACZ crawls the generated site two links
// deep with the real page plugins, then runs `starter export` on it: the
// WACZ validates (hashes, sorted index, every line at its record of the
// engine's job WARCs), its pages are the crawl's succeeded pages, each
// with a capture in the index and a date.
func TestExportACrawlWritesAValidWACZ(t *testing.T) {
	srv := crawlSite(t, testsite.MinPages)
	root, env := builtinPlugins(t, "pagefetch", "title", "outlinks"), builtinEnv(t)
	s := NewStack(t, server, root, crawlConfig)
	s.StartPools(t, env)
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	done := runSiteCrawl(t, s, srv, 2, nil, nil)
	require.Equal(t, model.StateFinished, done.status.State, done.status.Error)
	id := done.status.Ident

	file := filepath.Join(t.TempDir(), "crawl.wacz")
	res := runStarter(t, bin, s, "export", id, "-o", file, "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var out struct {
		Pages   int      `json:"pages"`
		Entries int      `json:"index_lines"`
		WARCs   []string `json:"warcs"`
		Crawl   bool     `json:"crawl"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out), res.stdout)
	assert.True(t, out.Crawl)
	require.NotEmpty(t, out.WARCs)
	for _, w := range out.WARCs {
		assert.Equal(t, filepath.Join(s.Config.ArchiveDir, "crawls", id, "warc"), filepath.Dir(w), "the engine's job WARCs")
	}

	rep, err := wacz.Validate(file)
	require.NoError(t, err)
	assert.Equal(t, out.Entries, rep.Entries)

	succeeded := map[string]bool{}
	for _, p := range done.pages {
		if p.State == frontier.StateDone && p.Status == frontier.StatusSucceeded {
			succeeded[p.URL] = true
		}
	}
	require.Equal(t, len(succeeded), out.Pages)
	zr, err := zip.OpenReader(file)
	require.NoError(t, err)
	defer zr.Close()
	captured := map[string]bool{}
	read := func(name string, fn func(line string)) {
		rc, err := zr.Open(name)
		require.NoError(t, err, name)
		defer rc.Close()
		sc := bufio.NewScanner(rc)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			fn(sc.Text())
		}
		require.NoError(t, sc.Err())
	}
	read(wacz.IndexPath, func(line string) {
		_, js, _ := strings.Cut(line, " {")
		var e struct{ URL string }
		require.NoError(t, json.Unmarshal([]byte("{"+js), &e), line)
		captured[e.URL] = true
	})
	pages, titled := 0, 0
	read(wacz.PagesPath, func(line string) {
		var p struct{ URL, TS, Title string }
		require.NoError(t, json.Unmarshal([]byte(line), &p))
		if p.URL == "" {
			return // the header
		}
		pages++
		assert.True(t, succeeded[p.URL], "a page that did not succeed: %s", p.URL)
		assert.True(t, captured[p.URL], "a page without a capture in the index: %s", p.URL)
		assert.NotEmpty(t, p.TS, p.URL)
		if p.Title != "" {
			titled++
			assert.True(t, strings.HasPrefix(p.Title, "testsite "), "%s: title %q", p.URL, p.Title)
		}
	})
	assert.Equal(t, len(succeeded), pages)
	assert.Greater(t, titled, pages/2, "the pages' titles, from the crawl's page index")
	t.Logf("%d pages, %d index lines, %d WARC(s)", pages, rep.Entries, len(out.WARCs))

	// The seal wrote the same WACZ beside the job's WARCs, each WARC's
	// index kept beside it as the WARCs closed.
	sealed := sealedWACZ(t, bin, s, id)
	assert.Equal(t, filepath.Join(s.Config.ArchiveDir, "crawls", id, id+".wacz"), sealed)
	srep, err := wacz.Validate(sealed)
	require.NoError(t, err)
	assert.Equal(t, rep.Entries, srep.Entries)
	assert.Equal(t, rep.Pages, srep.Pages)
	for _, w := range out.WARCs {
		assert.FileExists(t, w+wacz.SidecarSuffix)
	}
}

// sealedWACZ is the WACZ job id's seal wrote, as `starter status` names it
// (its text and --json agree), on this host.
func sealedWACZ(t *testing.T, bin string, s *Stack, id string) string {
	t.Helper()
	res := runStarter(t, bin, s, "status", id, "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var st struct {
		WACZ struct {
			File, Error string
			Bytes       int64
		} `json:"wacz"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &st), res.stdout)
	require.Empty(t, st.WACZ.Error)
	require.NotEmpty(t, st.WACZ.File, "status names no WACZ: %s", res.stdout)
	fi, err := os.Stat(st.WACZ.File)
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), st.WACZ.Bytes)
	text := runStarter(t, bin, s, "status", id)
	require.Equal(t, 0, text.code, text.stderr)
	assert.Contains(t, text.stdout, "  wacz:     "+st.WACZ.File+" (")
	return st.WACZ.File
}
