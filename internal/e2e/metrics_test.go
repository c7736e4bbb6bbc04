//go:build dev

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/freeport"
	"github.com/archiveflow/archiveflow/internal/metrics/metricstest"
	"github.com/archiveflow/archiveflow/internal/model"
)

// TestMetricsAgreeWithTheCrawlsCounters is issue 28's metrics acceptance:
// two worker processes serve /metrics (metrics.listen); scraped during a
// crawl, it parses with Prometheus' own text parser and shows the running
// crawl's frontier; at the end the fetch counters summed over the two
// workers equal the job's Redis counters exactly (a requisite both hosts
// fetched counts once, as in Redis), and the hook attempts started,
// finished and run agree.
func TestMetricsAgreeWithTheCrawlsCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workers binary and crawls")
	}
	bin := BuildWorkers(t)
	srv := crawlSite(t, sitePages(t, 150))
	root := builtinPlugins(t, "pagefetch", "title", "outlinks")
	s := NewStack(t, server, root, crawlConfig)
	ports, err := freeport.Ports("127.0.0.1", 2)
	require.NoError(t, err)
	var urls []string
	for i, port := range ports {
		name := fmt.Sprintf("w%d", i+1)
		StartWorker(t, bin, s.Config, name, "PAGEFETCH_ENABLED=true", fmt.Sprintf("ARCHIVEFLOW_METRICS_LISTEN=:%d", port))
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	}
	scrape := func(url string) (metricstest.Families, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return metricstest.Scrape(ctx, url)
	}
	for _, u := range urls {
		require.Eventually(t, func() bool { _, err := scrape(u); return err == nil }, time.Minute, 20*time.Millisecond, "%s never answered", u)
	}

	var during []metricstest.Families
	got := runSiteCrawl(t, s, srv, 2, drillSettings, func(j Job) {
		waitPagesDone(t, s, j, 10)
		for _, u := range urls {
			f, err := scrape(u)
			require.NoError(t, err, "a scrape during the crawl parses")
			during = append(during, f)
		}
	})
	require.Equal(t, model.StateFinished, got.status.State, got.status.Error)

	for i, f := range during {
		assert.Equal(t, 1.0, f.Sum("archiveflow_frontier_crawls"), "worker %d sees the running crawl", i+1)
		assert.Positive(t, f.Sum("archiveflow_frontier_pages", "state", "succeeded"), "worker %d: pages done during the crawl", i+1)
		assert.Contains(t, f, "archiveflow_log_outbox_items")
	}

	total := map[string]float64{}
	var bytes, requisites float64
	hooks := map[string][2]float64{} // plugin: started, finished
	finishedBy := map[string]float64{}
	for i, u := range urls {
		f, err := scrape(u)
		require.NoError(t, err)
		for class, n := range f.ByLabel("archiveflow_crawl_fetches_total", "class") {
			total[class] += n
		}
		bytes += f.Sum("archiveflow_crawl_fetched_bytes_total")
		requisites += f.Sum("archiveflow_crawl_fetches_total", "kind", "requisite") - f.Sum("archiveflow_crawl_fetches_total", "kind", "requisite", "class", "error")
		for p, n := range f.ByLabel("archiveflow_hooks_started_total", "plugin") {
			h := hooks[p]
			h[0] += n
			hooks[p] = h
		}
		for p, n := range f.ByLabel("archiveflow_hooks_finished_total", "plugin") {
			h := hooks[p]
			h[1] += n
			hooks[p] = h
		}
		for st, n := range f.ByLabel("archiveflow_hooks_finished_total", "status") {
			finishedBy[st] += n
		}
		assert.Zero(t, f.Sum("archiveflow_frontier_crawls"), "worker %d: the crawl is no longer running", i+1)
		// A healthy crawl has no Redis error: none of the expected answers
		// (a missing key, NOSCRIPT, the handshake) is counted.
		assert.Zero(t, f.Sum("archiveflow_redis_errors_total"), "worker %d: Redis errors %v", i+1, f.ByLabel("archiveflow_redis_errors_total", "command"))
		t.Logf("worker %d: temporal errors %v", i+1, f.ByLabel("archiveflow_temporal_errors_total", "method"))
		t.Logf("worker %d: fetches %v (by kind %v), bytes %.0f, hooks started %v, finished %v", i+1,
			f.ByLabel("archiveflow_crawl_fetches_total", "class"), f.ByLabel("archiveflow_crawl_fetches_total", "kind"), f.Sum("archiveflow_crawl_fetched_bytes_total"),
			f.ByLabel("archiveflow_hooks_started_total", "plugin"), f.ByLabel("archiveflow_hooks_finished_total", "status"))
	}

	j := got.job
	assert.Equal(t, float64(j.ItemsDownloaded), total["2xx"]+total["3xx"], "items_downloaded")
	assert.Equal(t, float64(j.BytesDownloaded), bytes, "bytes_downloaded")
	rc := j.Responses
	assert.Equal(t, map[string]float64{"1xx": float64(rc.R1xx), "2xx": float64(rc.R2xx), "3xx": float64(rc.R3xx), "4xx": float64(rc.R4xx),
		"5xx": float64(rc.R5xx), "unknown": float64(rc.Runk), "error": float64(rc.Errors)}, total, "r1xx..r5xx, runk, error_count")
	assert.Positive(t, total["2xx"])
	assert.Positive(t, total["5xx"], "the site's 500-once page")

	// Every page attempt ran pagefetch once; every attempt started ended.
	attempts := 0
	for _, p := range got.pages {
		attempts += p.Attempts
	}
	for p, h := range hooks {
		assert.Equal(t, h[0], h[1], "plugin %s: attempts started = finished", p)
	}
	assert.Equal(t, float64(attempts), hooks["pagefetch"][1], "pagefetch attempts = the pages' attempts")
	// Both hosts fetch the shared stylesheets (pagefetch remembers them per
	// host); each requisite URL the site served counts once.
	assert.Equal(t, float64(len(got.fetched.Requisites)), requisites, "requisite fetches counted: one per URL the site served")
	t.Logf("job: items_downloaded %d, bytes_downloaded %d, responses %+v; %d pages, %d attempts; hooks %v, by status %v",
		j.ItemsDownloaded, j.BytesDownloaded, j.Responses, len(got.pages), attempts, hooks, finishedBy)
}
