package plugins_test

import (
	"context"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// TestURLIsData runs the fetching hooks on a URL full of shell syntax:
// quotes, spaces, $(), backticks and ';' reach the server as data and
// nothing is ever executed.
func TestURLIsData(t *testing.T) {
	s := newSite(t)
	const query = `q='"$(touch%20pwned1)%20;touch%20pwned2;%60touch%20pwned3%60&x=a%20b`
	rawURL := s.URL + "/data?" + query
	wantQuery, err := url.QueryUnescape(query)
	require.NoError(t, err)

	plugins := []string{"headers", "title", "wget", "outlinks", "htmltotext"}
	if haveChromium() {
		plugins = append(plugins, "dom")
	}
	snap := newSnapshot(t, rawURL)
	for _, p := range plugins {
		t.Run(p, func(t *testing.T) {
			ua := userAgent(t, p)
			r := snap.run(context.Background(), hookOf(t, p), ua)
			require.False(t, r.res.Transient, "%s: %s", p, r.res.Reason)
			if p == "outlinks" {
				assert.Equal(t, model.StatusNoResults, r.status(), "the page has no links")
				return
			}
			requireFinal(t, r, model.StatusSucceeded)
			if p == "title" || p == "htmltotext" {
				return // they read the saved page
			}
			reqs := s.requests(ua)
			require.NotEmpty(t, reqs, "%s made no request", p)
			got, err := url.QueryUnescape(reqs[0].RawQuery)
			require.NoError(t, err)
			assert.Equal(t, wantQuery, got, "%s sent the query unchanged", p)
		})
	}
	// Nothing named pwned* was created anywhere a hook ran.
	cwd, err := os.Getwd()
	require.NoError(t, err)
	for _, root := range []string{snap.dir, cwd, os.TempDir()} {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && p != root && root != snap.dir {
				return filepath.SkipDir // only the top level of shared dirs
			}
			assert.False(t, strings.HasPrefix(d.Name(), "pwned"), "found %s: a shell ran", p)
			return nil
		})
	}
}

// TestMissingTools: without wget or Chromium the hooks report skipped
// (exit 10) with a message naming what is missing.
func TestMissingTools(t *testing.T) {
	s := newSite(t)
	snap := newSnapshot(t, s.URL+"/")
	snap.env["PATH"] = t.TempDir() // an empty PATH: no wget, no chromium
	for plugin, want := range map[string]string{
		"wget": "wget is not installed", "screenshot": "Chromium", "pdf": "Chromium", "dom": "Chromium",
	} {
		t.Run(plugin, func(t *testing.T) {
			r := snap.run(context.Background(), hookOf(t, plugin), userAgent(t, plugin))
			requireFinal(t, r, model.StatusSkipped)
			assert.Equal(t, 10, r.res.ExitCode)
			assert.Contains(t, r.last().OutputStr, want)
		})
	}
}

// TestDisabledPluginSkipsItself: a hook run by hand with <PLUGIN>_ENABLED
// False reports skipped without doing anything.
func TestDisabledPluginSkipsItself(t *testing.T) {
	s := newSite(t)
	snap := newSnapshot(t, s.URL+"/")
	ua := userAgent(t, "headers")
	r := snap.runWithEnv(context.Background(), hookOf(t, "headers"), ua, "HEADERS_ENABLED=False")
	requireFinal(t, r, model.StatusSkipped)
	assert.Empty(t, s.requests(ua))
}
