package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/robots"
)

// robotsFetchTimeout bounds one robots.txt fetch (each redirect hop).
const robotsFetchTimeout = 30 * time.Second

// robotsCache keeps the robots.txt rules this worker has read, per crawl
// and origin: read from Redis (CrawlStore.Robots) or, when the crawl has
// none yet, fetched once (PageRunner.FetchRobots) and kept there. One
// load per crawl and origin at a time in this process.
type robotsCache struct {
	mu sync.Mutex
	m  map[string]*robotsEntry
}

type robotsEntry struct {
	done  chan struct{}
	rules *robots.Rules
	err   error
}

// rules returns the crawl's robots.txt rules for origin; logf reports a
// fetch this call made (for the job's log).
func (c *robotsCache) rules(ctx context.Context, a *CrawlActivities, cr Crawl, origin string, logf func(string)) (*robots.Rules, error) {
	key := cr.Job.Ident + " " + origin
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*robotsEntry{}
	}
	e, loading := c.m[key]
	if !loading {
		e = &robotsEntry{done: make(chan struct{})}
		c.m[key] = e
	}
	c.mu.Unlock()
	if loading {
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil {
			return e.rules, nil
		}
		return c.rules(ctx, a, cr, origin, logf) // the other load failed: try again
	}
	e.rules, e.err = a.loadRobots(ctx, cr, origin, logf)
	if e.err != nil {
		c.mu.Lock()
		delete(c.m, key)
		c.mu.Unlock()
	}
	close(e.done)
	return e.rules, e.err
}

// loadRobots reads the crawl's record for origin from Redis, fetching and
// keeping it first when there is none.
func (a *CrawlActivities) loadRobots(ctx context.Context, cr Crawl, origin string, logf func(string)) (*robots.Rules, error) {
	ident := cr.Job.Ident
	var rec robots.Record
	var ok bool
	err := retryWrite(ctx, func() (err error) { rec, ok, err = a.store.Robots(ctx, ident, origin); return err })
	if err != nil {
		return nil, fmt.Errorf("read robots.txt of %s for %s: %w", origin, ident, err)
	}
	if !ok {
		fetched, err := a.pages.FetchRobots(ctx, RobotsFetch{Ident: ident, Origin: origin, UserAgent: cr.RobotsAgent, Timeout: robotsFetchTimeout})
		if err != nil {
			return nil, fmt.Errorf("fetch robots.txt of %s for %s: %w", origin, ident, err)
		}
		fetched.Agent = cr.RobotsAgent
		fetched.CrawlDelay = robots.Parse(fetched, cr.RobotsAgent).CrawlDelay()
		err = retryWrite(ctx, func() (err error) { rec, err = a.store.KeepRobots(ctx, ident, origin, fetched); return err })
		if err != nil {
			return nil, fmt.Errorf("keep robots.txt of %s for %s: %w", origin, ident, err)
		}
		what := fmt.Sprintf("HTTP %d, %d bytes", fetched.Status, len(fetched.Body))
		if fetched.Status == 0 {
			what = "no answer: " + fetched.Error
		}
		if fetched.CrawlDelay > 0 {
			what += fmt.Sprintf(", Crawl-delay %s", fetched.CrawlDelay)
		}
		logf(fmt.Sprintf("robots.txt %s: %s", fetched.URL, what))
		a.log.Info("robots.txt fetched", logging.Ident(ident), zap.String("url", fetched.URL), zap.Int("status", fetched.Status),
			zap.Int("bytes", len(fetched.Body)), zap.Duration("crawl_delay", fetched.CrawlDelay))
	}
	return robots.Parse(rec, cr.RobotsAgent), nil
}

// obeyRobots drops the links whose URL the crawl's robots.txt rules
// disallow (requisites are taken: what a page needs to render is not a
// page of the crawl), each reported as an ignore packet naming the rule,
// source "robots.txt" (unless the job suppresses ignore reports). It
// fetches the robots.txt of a host the crawl has not read yet.
func (a *CrawlActivities) obeyRobots(ctx context.Context, cr Crawl, links []Link, entries []LogEntry, suppress bool, now time.Time) ([]Link, []LogEntry, error) {
	logf := a.pageLine(&entries, now)
	kept := links[:0:0]
	for _, l := range links {
		origin, err := robots.Origin(l.URL)
		if l.Requisite || err != nil {
			kept = append(kept, l)
			continue
		}
		rules, err := a.robots.rules(ctx, a, cr, origin, logf)
		if err != nil {
			return nil, nil, err
		}
		switch rule, ok := rules.Check(l.URL); {
		case ok:
			kept = append(kept, l)
		case !suppress:
			entries = append(entries, LogEntry{Kind: LogIgnore, Time: now, Hook: "page",
				URL: truncate(l.URL, a.opts.LogLineBytes), Pattern: truncate(rule, a.opts.LogLineBytes), Source: "robots.txt"})
		}
	}
	return kept, entries, nil
}
