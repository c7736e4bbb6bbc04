package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/urllist"
)

// ErrTypeURLList marks a URL list that fails its job: refused (denied,
// 4xx, not text, too large), over the limits, or naming no URL to crawl.
const ErrTypeURLList = "URLListRefused"

// SeedURLList starts a URL-list crawl (ArchiveBot's `!a <` / `!ao <`):
// it downloads the list through the fetch policy (PageRunner.FetchURLList,
// which keeps it in the crawl's directory on this worker), parses it with
// internal/urllist, and seeds the frontier with every listed URL the fetch
// policy allows, each a start page at depth 0. Every bad line and every
// denied URL is an ignore packet in the job's log, the download a stdout
// packet. A download that fails for a reason another attempt may not have
// is retried by the activity's retry policy; a list refused, over the
// limits or naming no URL to crawl fails the job (ErrTypeURLList). Safe to
// repeat: the frontier adds no URL twice and the log packets are written
// once.
func (a *CrawlActivities) SeedURLList(ctx context.Context, in SeedURLListInput) (SeedURLListResult, error) {
	var res SeedURLListResult
	if in.Ident == "" || in.PageAttempts < 1 {
		return res, invalidInput("seed url list of %q: ident and page attempts must be set", in.Ident)
	}
	if err := in.List.Validate(); err != nil {
		return res, invalidInput("seed url list of %s: %v", in.Ident, err)
	}
	log := a.log.With(logging.Ident(in.Ident), zap.String("url_list", in.List.URL))
	fctx, cancel := context.WithTimeout(ctx, in.List.FetchTimeout)
	defer cancel()
	data, err := a.pages.FetchURLList(fctx, URLListFetch{Ident: in.Ident, URL: in.List.URL, MaxBytes: in.List.MaxBytes,
		Timeout: in.List.FetchTimeout, UserAgent: in.UserAgent})
	if errors.Is(err, ErrURLListRefused) {
		return res, nonRetryable(ErrTypeURLList, "%v", err)
	}
	if err != nil {
		log.Warn("url list download failed: retried", zap.Error(err))
		return res, fmt.Errorf("seed url list of %s: %w", in.Ident, err)
	}
	res.Path = data.Path
	list, err := urllist.Parse(bytes.NewReader(data.Data), urllist.Limits{MaxBytes: in.List.MaxBytes, MaxURLs: in.List.MaxURLs})
	if err != nil {
		return res, nonRetryable(ErrTypeURLList, "url list %s: %v", in.List.URL, err)
	}
	now := time.Now()
	entries := []LogEntry{{Kind: LogStdout, Time: now, Hook: "url-list",
		Message: truncate(fmt.Sprintf("Downloaded %d bytes from %s: %d URLs, %d bad lines", len(data.Data), in.List.URL, len(list.URLs), len(list.Bad)), a.opts.LogLineBytes)}}
	for _, b := range list.Bad {
		entries = append(entries, LogEntry{Kind: LogIgnore, Time: now, Hook: "url-list",
			URL: truncate(b.Text, a.opts.LogLineBytes), Pattern: fmt.Sprintf("line %d: %s", b.Line, b.Rule), Source: "url_list"})
	}
	urls := make([]string, 0, len(list.URLs))
	for _, e := range list.URLs {
		if a.deny != nil {
			if rule, denied := a.deny.Deny(ctx, e.URL); denied {
				res.Denied++
				entries = append(entries, LogEntry{Kind: LogIgnore, Time: now, Hook: "url-list",
					URL: truncate(e.URL, a.opts.LogLineBytes), Pattern: rule, Source: "fetch.deny"})
				continue
			}
		}
		urls = append(urls, e.URL)
	}
	res.Bad, res.URLs = len(list.Bad), len(urls)
	// One log write per list (the key makes a repeat a no-op), before the
	// job can fail on it: nothing is lost silently.
	logKey := in.Ident + "/url-list"
	if err := retryWrite(ctx, func() error { return a.store.AppendLog(ctx, in.Ident, logKey, 0, entries) }); err != nil {
		return res, fmt.Errorf("log url list of %s: %w", in.Ident, err)
	}
	if len(urls) == 0 {
		return res, nonRetryable(ErrTypeURLList, "url list %s: names no URL to crawl (%d bad lines, %d URLs denied by the fetch policy): must name at least one http(s) URL, one per line",
			in.List.URL, res.Bad, res.Denied)
	}
	seed := SeedListInput{Ident: in.Ident, List: in.List.URL, URLs: urls, MaxDepth: in.MaxDepth, PageAttempts: in.PageAttempts, RetryLater: in.RetryLater}
	err = retryWrite(ctx, func() (err error) { res.Counts, err = a.store.SeedList(ctx, seed); return err })
	if err != nil {
		return res, crawlStoreError(err, "seed url list of %s", in.Ident)
	}
	res.Starts = scope.Starts(urls, in.Scope)
	log.Info("url list seeded", zap.Int("urls", res.URLs), zap.Int("bad_lines", res.Bad), zap.Int("denied", res.Denied),
		zap.Int("start_hosts", len(res.Starts)), zap.String("path", res.Path))
	return res, nil
}
