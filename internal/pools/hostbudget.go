package pools

import (
	"fmt"
	"regexp"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/hostbudget"
)

// NewHostBudget is a process's host budget from the configuration
// (crawl.per_host, crawl.rate_limit); nil when crawl.per_host.enabled is
// off or there is no Redis.
func NewHostBudget(cfg *config.Config, be *backend.Backend, log *zap.Logger) (*hostbudget.Gate, error) {
	if cfg == nil || !cfg.Crawl.PerHost.Enabled || be.Redis == nil || be.Store == nil {
		return nil, nil
	}
	hc, err := hostBudgetConfig(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	return hostbudget.New(be.Redis, be.Store.Keys(), hc, log)
}

// hostBudgetConfig is the host budget's configuration from cfg's.
func hostBudgetConfig(cfg *config.Config) (hostbudget.Config, error) {
	p, r := cfg.Crawl.PerHost, cfg.Crawl.RateLimit
	hc := hostbudget.Config{
		Default:       hostbudget.Limits{Concurrency: p.Concurrency, Delay: p.Delay},
		Hosts:         map[string]hostbudget.Limits{},
		Lease:         p.Lease,
		MaxWait:       p.MaxWait,
		MaxCrawlDelay: p.MaxCrawlDelay,
		RateLimit: hostbudget.RateLimit{Statuses: r.Statuses, RetryAfterStatuses: r.RetryAfterStatuses, MaxRetryAfter: r.MaxRetryAfter,
			Backoff: r.Backoff, MaxBackoff: r.MaxBackoff, GiveUpAfter: r.GiveUpAfter},
	}
	if cfg.Crawl.BatchPages > 0 {
		// Kept turns only with page batches: the page-per-activity
		// path's claim counts a kept turn as a fetch in flight and
		// would leave the host's pages in line while it is kept.
		hc.Reuse = p.Reuse
	}
	for _, h := range p.Hosts {
		hc.Hosts[h.Host] = hostbudget.Limits{Concurrency: h.Concurrency, Delay: h.Delay}
	}
	for i, m := range r.Markers {
		mk := hostbudget.Marker{Status: m.Status}
		if m.Body != "" {
			re, err := regexp.Compile(m.Body)
			if err != nil {
				return hostbudget.Config{}, fmt.Errorf("crawl.rate_limit.markers[%d].body: %w", i, err)
			}
			mk.Body = re
		}
		hc.RateLimit.Markers = append(hc.RateLimit.Markers, mk)
	}
	return hc, nil
}

// frontierOptions are a process's frontier options: with the host budget
// on, claims leave a busy host's pages READY.
func frontierOptions(cfg *config.Config, be *backend.Backend, log *zap.Logger) frontier.Options {
	o := frontier.Options{Logger: log}
	if cfg != nil && cfg.Crawl.PerHost.Enabled {
		o.HostBudget = be.Store.Keys().HostBudgetPrefix()
		o.HostConcurrency = cfg.Crawl.PerHost.Concurrency
	}
	return o
}

// batchHostConcurrency is how many pages of one host a page batch runs at
// once: the host budget's concurrency (0, none, with the budget off).
func batchHostConcurrency(cfg *config.Config) int {
	if !cfg.Crawl.PerHost.Enabled {
		return 0
	}
	return cfg.Crawl.PerHost.Concurrency
}

// batchHostLimits are the hosts' own concurrencies of the host budget.
func batchHostLimits(cfg *config.Config) map[string]int {
	if !cfg.Crawl.PerHost.Enabled || len(cfg.Crawl.PerHost.Hosts) == 0 {
		return nil
	}
	out := make(map[string]int, len(cfg.Crawl.PerHost.Hosts))
	for _, h := range cfg.Crawl.PerHost.Hosts {
		if h.Concurrency > 0 {
			out[h.Host] = h.Concurrency
		}
	}
	return out
}
