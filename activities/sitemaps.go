package activities

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/robots"
	"github.com/archiveflow/archiveflow/internal/sitemap"
)

// sitemapFetchTimeout bounds one sitemap file's fetch.
const sitemapFetchTimeout = time.Minute

// sitemapLinks reads the start host's sitemaps (Crawl.Sitemaps): the
// Sitemap lines of its robots.txt (read through the crawl's robots cache,
// so fetched once whatever the robots policy) and ORIGIN/sitemap.xml,
// with every index they lead to. Their page URLs become links of the
// start page, so the frontier queues them at depth 1 and the crawl's
// scope, rules, ignores and robots policy judge them as any link. What
// the walk could not read is reported in the job's log (a notice per
// file) and in the page's note, never fatal; what a limit left out is a
// cut.
func (a *CrawlActivities) sitemapLinks(ctx context.Context, cr Crawl, now time.Time) (links []Discovered, entries []LogEntry, note string, cuts int, err error) {
	logf := a.pageLine(&entries, now)
	origin, err := robots.Origin(cr.Job.URL)
	if err != nil {
		return nil, nil, "", 0, nil // not an http(s) start URL: no sitemaps
	}
	rules, err := a.robots.rules(ctx, a, cr, origin, logf)
	if err != nil {
		return nil, nil, "", 0, err
	}
	var starts []string
	for _, s := range rules.Sitemaps() {
		starts = append(starts, sitemap.Resolve(robots.URL(origin), s))
	}
	if def := origin + "/sitemap.xml"; !slices.Contains(starts, def) {
		starts = append(starts, def)
	}
	res, err := a.pages.FetchSitemaps(ctx, SitemapFetch{Ident: cr.Job.Ident, URLs: starts, UserAgent: cr.RobotsAgent,
		Limits: cr.SitemapLimits, Timeout: sitemapFetchTimeout})
	if err != nil {
		return nil, nil, "", 0, fmt.Errorf("read the sitemaps of %s: %w", cr.Job.Ident, err)
	}
	note = fmt.Sprintf("sitemaps: %d page URLs from %d files", len(res.URLs), res.Files)
	if len(res.Problems) > 0 {
		note += fmt.Sprintf(", %d sitemap files not read (malformed, too large or not fetched: see the job log)", len(res.Problems))
	}
	for _, p := range res.Problems {
		logf(fmt.Sprintf("%ssitemap %s not read: %v", jsonl.NoticePrefix, p.URL, p.Err))
	}
	for _, c := range res.Cuts {
		logf(jsonl.CutPrefix + c)
		note = joinNote(note, "cut: "+c)
	}
	logf(fmt.Sprintf("sitemaps: %d page URLs from %d sitemap files (%d not read) seeded at depth 1", len(res.URLs), res.Files, len(res.Problems)))
	a.log.Info("sitemaps read", logging.Ident(cr.Job.Ident), zap.Int("urls", len(res.URLs)), zap.Int("files", res.Files), zap.Int("problems", len(res.Problems)))
	for _, u := range res.URLs {
		links = append(links, Discovered{URL: u})
	}
	return links, entries, note, len(res.Cuts), nil
}
