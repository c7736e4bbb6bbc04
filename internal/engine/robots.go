package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/builtin"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/hostname"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/robots"
	"github.com/archiveflow/archiveflow/internal/sitemap"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// FetchRobots fetches in.Origin's robots.txt (activities.PageRunner)
// through the fetch policy, following up to robots.MaxRedirects
// redirects, each exchange recorded from the wire into the crawl's WARC
// on this worker (as pagefetch records a page). No answer (a network
// error, the policy's refusal) is a Record with its Error.
func (e *Engine) FetchRobots(ctx context.Context, in activities.RobotsFetch) (robots.Record, error) {
	rec := robots.Record{URL: robots.URL(in.Origin)}
	err := e.recorded(ctx, in.Ident, "robots", in.UserAgent, in.Timeout, func(rf builtin.RecordedFetcher) error {
		f, err := followGet(ctx, rf, rec.URL, robots.MaxBytes)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rec.Error = err.Error()
			return nil
		}
		rec.Status, rec.Body = f.Resp.StatusCode, string(f.Body)
		return nil
	})
	rec.Fetched = time.Now().UTC()
	if err == nil {
		// The Crawl-delay the file asks of this agent becomes the host's
		// least delay in the fleet-wide budget (capped:
		// crawl.per_host.max_crawl_delay).
		if d := robots.Parse(rec, in.UserAgent).CrawlDelay(); d > 0 {
			if host, herr := hostname.Of(rec.URL); herr == nil {
				if serr := e.cfg.Hosts.SetCrawlDelay(ctx, host, d); serr != nil {
					e.log.Warn("robots.txt Crawl-delay not applied to the host budget", logging.Ident(in.Ident), zap.String("host", host), zap.Error(serr))
				}
			}
		}
	}
	return rec, err
}

// FetchSitemaps reads a crawl's sitemaps (activities.PageRunner): each
// file fetched as FetchRobots fetches, only a 2xx answer read
// (sitemap.Walk).
func (e *Engine) FetchSitemaps(ctx context.Context, in activities.SitemapFetch) (sitemap.Result, error) {
	if err := in.Limits.Validate(); err != nil {
		return sitemap.Result{}, fmt.Errorf("sitemaps of %s: %w", in.Ident, err)
	}
	var res sitemap.Result
	err := e.recorded(ctx, in.Ident, "sitemaps", in.UserAgent, in.Timeout, func(rf builtin.RecordedFetcher) error {
		res = sitemap.Walk(ctx, in.URLs, func(ctx context.Context, u string, limit int64) ([]byte, error) {
			f, err := followGet(ctx, rf, u, limit)
			switch {
			case err != nil:
				return nil, err
			case f.Resp.StatusCode < 200 || f.Resp.StatusCode > 299:
				return nil, fmt.Errorf("HTTP %d", f.Resp.StatusCode)
			case f.Truncated:
				return nil, fmt.Errorf("%w: more than %d bytes", sitemap.ErrTooLarge, limit)
			}
			return f.Body, nil
		}, in.Limits)
		return ctx.Err()
	})
	return res, err
}

// followGet gets u, following up to robots.MaxRedirects redirects; every
// hop is recorded.
func followGet(ctx context.Context, rf builtin.RecordedFetcher, u string, limit int64) (builtin.Fetched, error) {
	for hops := 0; ; hops++ {
		f, err := rf.Get(ctx, u, limit)
		if f.Resp == nil || err != nil {
			if d, ok := egress.DeniedBy(err); ok {
				return f, errors.New(egress.Denial{Target: u, Decision: d.Decision}.Message())
			}
			if err == nil {
				err = errors.New("no answer")
			}
			return f, err
		}
		loc := f.Resp.Header.Get("Location")
		if f.Resp.StatusCode < 300 || f.Resp.StatusCode > 399 || loc == "" || hops == robots.MaxRedirects {
			return f, nil
		}
		next, err := f.Resp.Request.URL.Parse(loc)
		if err != nil || (next.Scheme != "http" && next.Scheme != "https") {
			return f, nil
		}
		u = next.String()
	}
}

// recorded runs fetch with a RecordedFetcher writing a WARC file of its
// own in the crawl's directory, then appends that file to the crawl's
// WARC on this worker (warcFiles.appendWARCs, the one writer of it) and
// removes it.
func (e *Engine) recorded(ctx context.Context, ident, what, userAgent string, timeout time.Duration, fetch func(builtin.RecordedFetcher) error) error {
	dir := e.crawlDir(ident)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s of %s: %w", what, ident, err)
	}
	file, err := os.CreateTemp(dir, what+"-*.warc.gz")
	if err != nil {
		return fmt.Errorf("%s of %s: %w", what, ident, err)
	}
	path := file.Name()
	defer os.Remove(path)
	w := warc.NewWriter(file)
	if _, err := w.Info(filepath.Base(path), map[string]string{"software": warc.Software() + " (" + what + ")", "format": "WARC File Format 1.1"}); err != nil {
		file.Close()
		return fmt.Errorf("%s of %s: %w", what, ident, err)
	}
	transport := egress.RecordingTransport(egress.Transport(e.cfg.Fetch))
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ferr := fetch(builtin.RecordedFetcher{Client: client, WARC: w, Log: e.log, UserAgent: userAgent})
	if err := file.Close(); err != nil {
		return fmt.Errorf("%s of %s: %w", what, ident, err)
	}
	if ferr != nil {
		return ferr
	}
	if w.Written() == 0 {
		return nil
	}
	if err := e.warcs.appendWARCs(e, ident, []string{path}, nil); err != nil {
		return fmt.Errorf("%s of %s: %w", what, ident, err)
	}
	return nil
}
