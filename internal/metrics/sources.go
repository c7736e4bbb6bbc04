package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FrontierSizes are the page counts of the running crawls, summed, by
// frontier state (ready, claimed, deferred, done, ...), and how many
// crawls they cover.
type FrontierSizes struct {
	Pages  map[string]int64
	Crawls int
}

// FrontierSource reads FrontierSizes from Redis at scrape time.
type FrontierSource func(ctx context.Context) (FrontierSizes, error)

// Backlog is what an outbox holds: items waiting and items set aside.
type Backlog struct{ Pending, Rejected int }

// BacklogSource reads an outbox's backlog at scrape time.
type BacklogSource func() (Backlog, error)

// scrapeTimeout bounds the Redis reads of one scrape.
const scrapeTimeout = 5 * time.Second

var (
	frontierPagesDesc = prometheus.NewDesc(namespace+"_frontier_pages",
		"Pages of the running crawls (the jobs in Redis' working list that have a frontier), summed, by frontier state; read from Redis at scrape time, the same fleet-wide value on every worker.",
		[]string{"state"}, nil)
	frontierCrawlsDesc = prometheus.NewDesc(namespace+"_frontier_crawls",
		"Running crawls whose frontier archiveflow_frontier_pages sums.", nil, nil)
	outboxDesc = prometheus.NewDesc(namespace+"_log_outbox_items",
		"Job log batches in this worker's log outbox (ARCHIVE_DIR/outbox), by state: pending (waiting for Redis) or rejected (set aside for good).",
		[]string{"state"}, nil)
)

// sources is the collector of the values read at scrape time. A process
// has at most one of each source: the last one set wins.
var sources = &sourceCollector{}

func init() { registry.MustRegister(sources) }

type sourceCollector struct {
	mu       sync.Mutex
	frontier *FrontierSource
	backlog  *BacklogSource
}

// SetFrontierSource makes scrapes read the running crawls' frontier sizes
// through src; the returned function unsets it (unless another was set
// since).
func SetFrontierSource(src FrontierSource) (unset func()) {
	return set(&sources.frontier, &src)
}

// SetBacklogSource makes scrapes read the log outbox's backlog through
// src; the returned function unsets it (unless another was set since).
func SetBacklogSource(src BacklogSource) (unset func()) {
	return set(&sources.backlog, &src)
}

func set[T any](slot **T, src *T) func() {
	sources.mu.Lock()
	defer sources.mu.Unlock()
	*slot = src
	return func() {
		sources.mu.Lock()
		defer sources.mu.Unlock()
		if *slot == src {
			*slot = nil
		}
	}
}

// Describe sends the descriptors of every value read at scrape time.
func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- frontierPagesDesc
	ch <- frontierCrawlsDesc
	ch <- outboxDesc
}

// Collect reads the sources set. A source that fails is reported as an
// invalid metric: the scrape names the error, the other metrics are
// served (Handler).
func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fr, bl := c.frontier, c.backlog
	c.mu.Unlock()
	if fr != nil {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		sizes, err := (*fr)(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(frontierPagesDesc, err)
		} else {
			for state, n := range sizes.Pages {
				ch <- prometheus.MustNewConstMetric(frontierPagesDesc, prometheus.GaugeValue, float64(n), state)
			}
			ch <- prometheus.MustNewConstMetric(frontierCrawlsDesc, prometheus.GaugeValue, float64(sizes.Crawls))
		}
	}
	if bl != nil {
		b, err := (*bl)()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(outboxDesc, err)
		} else {
			ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(b.Pending), "pending")
			ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(b.Rejected), "rejected")
		}
	}
}
