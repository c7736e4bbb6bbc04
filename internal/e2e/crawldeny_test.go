//go:build dev

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestCrawlNeverRequestsDeniedLinks is issue 17's crawl acceptance: a crawl
// of a local page linking to cloud metadata (denied by the default
// fetch.deny) and to a denied loopback port requests neither (the guarded
// port counts connections, the site logs what it served), queues neither,
// and reports each as an ignore packet naming its rule. A page whose
// requisites are on denied addresses is archived without them.
func TestCrawlNeverRequestsDeniedLinks(t *testing.T) {
	const metadataRule = "169.254.0.0/16"
	g := egresstest.Guard(t)
	metadata := "http://169.254.169.254/latest/meta-data/"
	guarded := "http://" + g.Addr + "/page"
	site := newLoggingSite(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/":
			fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>start</title></head><body>
<a href="%s">metadata</a>
<a href="%s">internal</a>
<img src="http://%s/i.png">
<a href="/ok">ok</a>
</body></html>`, metadata, guarded, g.Addr)
		case "/ok":
			fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>ok</title></head><body>
<img src="http://%s/ok.png"><img src="http://169.254.169.254/ok.png"><p>ok</p>
</body></html>`, g.Addr)
		default:
			http.NotFound(w, r)
		}
	})
	s := NewStack(t, server, builtinPlugins(t, "pagefetch", "title", "outlinks"), func(c *config.Config) {
		crawlConfig(c)
		c.Fetch.Deny = append(c.Fetch.Deny, g.Addr)
	})
	require.Contains(t, s.Config.Fetch.Deny, metadataRule, "the default fetch.deny")
	s.StartPools(t, builtinEnv(t))

	job := s.SubmitCrawl(t, site.URL+"/", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var st workflows.CrawlStatus
	require.NoError(t, job.Run.Get(ctx, &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)

	assert.Zero(t, g.Connections(), "the denied loopback port was connected to")
	assert.True(t, site.served("/"), "the start page is fetched")
	assert.True(t, site.served("/ok"), "the allowed link is fetched")

	pages := crawlPages(t, s, job.Ident)
	byURL := map[string]frontier.Page{}
	for _, p := range pages {
		byURL[p.URL] = p
		assert.NotContains(t, p.URL, "169.254.169.254", "a denied URL is in the frontier")
		assert.NotContains(t, p.URL, g.Addr, "a denied URL is in the frontier")
	}
	for _, u := range []string{job.URL, site.URL + "/ok"} {
		p, ok := byURL[u]
		if assert.True(t, ok, "page %s is in the frontier (pages: %v)", u, pages) {
			assert.Equal(t, frontier.StatusSucceeded, p.Status, "page %s (requisites on denied addresses): %s", u, p.Note)
		}
	}

	// Each denied link is reported with its rule.
	reported := map[string]string{}
	log := jobLog(t, s, job.Ident)
	for _, l := range strings.Split(log, "\n") {
		var p struct{ Type, URL, Pattern, Source string }
		require.NoError(t, json.Unmarshal([]byte(l), &p), l)
		if p.Type == "ignore" && p.Source == "fetch.deny" {
			reported[p.URL] = p.Pattern
		}
	}
	assert.Equal(t, metadataRule, reported[metadata], log)
	assert.Equal(t, g.Addr, reported[guarded], log)
}
