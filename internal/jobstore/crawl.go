package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/jobwacz"
	"github.com/archiveflow/archiveflow/internal/luascript"
	"github.com/archiveflow/archiveflow/internal/metrics"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/robots"
	"github.com/archiveflow/archiveflow/internal/scope"
)

// CrawlStore is the production activities.CrawlStore: a crawl's pages in
// internal/frontier, its job hash, log and rules in internal/rkeys.
type CrawlStore struct {
	*RedisStore
	Frontier *frontier.Frontier
	// Log gets what a write could not do that loses nothing of the crawl
	// (a page's hook events); nil: nothing is logged.
	Log *zap.Logger
}

var _ activities.CrawlStore = (*CrawlStore)(nil)

// queuedField is ArchiveBot's items_queued: the frontier moves it with
// the pages it has waiting (READY or CLAIMED), in the same scripts, and
// fetchCounters adds what each page's attempt downloaded.
const queuedField = "items_queued"

// crawlErr maps frontier errors no retry can fix.
func crawlErr(err error) error {
	switch {
	case errors.Is(err, frontier.ErrNotClaimed):
		return fmt.Errorf("%w: %w", activities.ErrPageNotClaimed, err)
	case errors.Is(err, frontier.ErrNoFrontier), errors.Is(err, frontier.ErrInvalidArgument),
		errors.Is(err, frontier.ErrSeedConflict), errors.Is(err, frontier.ErrLeftoverKeys),
		errors.Is(err, frontier.ErrUnknownPage), errors.Is(err, frontier.ErrOutOfOrder):
		return fmt.Errorf("%w: %w", activities.ErrNotWritable, err)
	}
	return notWritable(err)
}

func pageCounts(c frontier.Counts) activities.PageCounts {
	return activities.PageCounts{
		Total: c.Total, Ready: c.Ready, Claimed: c.Claimed, Skipped: c.Skipped, Done: c.Done,
		Succeeded: c.Succeeded, Failed: c.Failed, Deferred: c.Deferred, Propagating: c.Propagating,
		Charged: c.Charged, Waiting: c.Waiting, RetryAt: c.RetryAt, ListPartial: c.ListPartial,
	}
}

func pageSpec(p frontier.Page) activities.PageSpec {
	return activities.PageSpec{ID: p.ID, URL: p.URL, Depth: p.Depth, Attempt: p.Attempts, NoRecurse: p.NoRecurse}
}

// SucceededPages lists the crawl's pages that succeeded, in discovery
// order (jobwacz.Succeeded).
func (s *CrawlStore) SucceededPages(ctx context.Context, ident string) ([]activities.PageRef, error) {
	ps, err := s.Frontier.AllPages(ctx, ident, jobwacz.Succeeded)
	if err != nil {
		return nil, fmt.Errorf("pages of %s: %w", ident, crawlErr(err))
	}
	out := make([]activities.PageRef, len(ps))
	for i, p := range ps {
		out[i] = activities.PageRef{ID: p.ID, URL: p.URL, Parent: p.Parent}
	}
	return out, nil
}

// SeedCrawl seeds the frontier (items_queued counts the start page) and
// claims the start page with the input's token.
func (s *CrawlStore) SeedCrawl(ctx context.Context, in activities.SeedCrawlInput) (activities.SeedCrawlResult, error) {
	_, err := s.Frontier.Seed(ctx, in.Ident, in.URL, frontier.Config{MaxDepth: in.MaxDepth, MaxAttempts: in.PageAttempts, QueuedField: queuedField,
		RetryLater: in.RetryLater})
	if err != nil {
		return activities.SeedCrawlResult{}, fmt.Errorf("seed crawl %s: %w", in.Ident, crawlErr(err))
	}
	pages, counts, err := s.Frontier.Claim(ctx, in.Ident, 1, in.Token, 0)
	if err != nil {
		return activities.SeedCrawlResult{}, fmt.Errorf("claim start page of %s: %w", in.Ident, crawlErr(err))
	}
	res := activities.SeedCrawlResult{Counts: pageCounts(counts)}
	for _, p := range pages {
		if p.ID == 1 {
			ps := pageSpec(p)
			res.Page = &ps
		}
	}
	return res, nil
}

// SeedList seeds the frontier from a URL list (items_queued counts each
// start page once).
func (s *CrawlStore) SeedList(ctx context.Context, in activities.SeedListInput) (activities.PageCounts, error) {
	_, err := s.Frontier.SeedList(ctx, in.Ident, in.List, in.URLs, frontier.Config{MaxDepth: in.MaxDepth, MaxAttempts: in.PageAttempts, QueuedField: queuedField,
		RetryLater: in.RetryLater})
	if err != nil {
		return activities.PageCounts{}, fmt.Errorf("seed crawl %s from %s: %w", in.Ident, in.List, crawlErr(err))
	}
	return s.Counts(ctx, in.Ident)
}

// BytesDownloaded reads the job's bytes_downloaded (a crawl's byte limit).
func (s *CrawlStore) BytesDownloaded(ctx context.Context, ident string) (int64, error) {
	n, err := s.Redis.BytesDownloaded(ctx, ident)
	if err != nil {
		return 0, notWritable(err)
	}
	return n, nil
}

// Claim claims up to n pages for token under a page budget (0 = none).
func (s *CrawlStore) Claim(ctx context.Context, ident string, n int, token string, rulesVersion, budget int64) ([]activities.PageSpec, activities.PageCounts, error) {
	return s.claimed(s.Frontier.ClaimWithin(ctx, ident, n, token, rulesVersion, budget))
}

// ClaimBatch claims up to n pages for a page batch, whatever their
// host's turn (frontier ClaimBatch).
func (s *CrawlStore) ClaimBatch(ctx context.Context, ident string, n int, token string, rulesVersion, budget int64) ([]activities.PageSpec, activities.PageCounts, error) {
	return s.claimed(s.Frontier.ClaimBatch(ctx, ident, n, token, rulesVersion, budget))
}

// claimed converts a frontier claim's reply.
func (s *CrawlStore) claimed(pages []frontier.Page, counts frontier.Counts, err error) ([]activities.PageSpec, activities.PageCounts, error) {
	if err != nil {
		return nil, activities.PageCounts{}, crawlErr(err)
	}
	out := make([]activities.PageSpec, len(pages))
	for i, p := range pages {
		out[i] = pageSpec(p)
	}
	return out, pageCounts(counts), nil
}

// Skip moves a page to SKIPPED.
func (s *CrawlStore) Skip(ctx context.Context, ident string, pageID int64, reason string) error {
	if err := s.Frontier.Skip(ctx, ident, pageID, reason); err != nil {
		return crawlErr(err)
	}
	return nil
}

// Discover adds one batch (0, 1, 2, … per attempt) of a page's links
// (a page's links one call at a time; RecordPages adds many pages' at
// once).
func (s *CrawlStore) Discover(ctx context.Context, ident string, pageID int64, attempt, batch int, links []activities.Link) (activities.LinksAdded, error) {
	res, err := s.Frontier.Discover(ctx, ident, pageID, attempt, batch, frontierLinks(links))
	if err != nil {
		return activities.LinksAdded{}, crawlErr(err)
	}
	d := activities.LinksAdded{Queued: res.Queued()}
	for _, l := range res.Invalid {
		d.Refused = append(d.Refused, activities.RefusedLink{URL: l.URL, Bytes: l.Bytes, Rule: l.Rule})
	}
	return d, nil
}

// Complete ends a page attempt with ArchiveBot's counters (fetchCounters);
// archiveflow's own cut_count counts the attempt's losses to a limit. An
// applied outcome is also the job's heartbeat (heartbeat, ts): a crawl's
// pages are its liveness, as a hook's pulses are a snapshot's, so
// ArchiveBot's reaper never sees a crawl that completes pages as dead.
func (s *CrawlStore) Complete(ctx context.Context, ident string, pageID int64, attempt int, status, note string, notBefore time.Time, t activities.PageTally) (activities.PageCounts, error) {
	o, urls := s.outcome(status, note, notBefore, t)
	done, err := s.Frontier.CompleteCounted(ctx, ident, pageID, attempt, o)
	if err != nil {
		return activities.PageCounts{}, crawlErr(err)
	}
	if done.Counted {
		s.counted(ctx, ident, []countedPage{{pageID, attempt, t, urls, done}})
	}
	return pageCounts(done.Counts), nil
}

// outcome is a page attempt's outcome for the frontier, with the
// requisite URLs its Once counters name (in that order).
func (s *CrawlStore) outcome(status, note string, notBefore time.Time, t activities.PageTally) (frontier.Outcome, []string) {
	counters := s.fetchCounters(t.FetchTally)
	if t.Cuts > 0 {
		counters = append(counters, frontier.JobCounter{Field: rkeys.FieldCutCount, Delta: t.Cuts})
	}
	o := frontier.Outcome{Status: frontier.Status(status), Note: note, NotBefore: notBefore, JobCounters: counters}
	urls := make([]string, 0, len(t.Requisites))
	for u := range t.Requisites {
		urls = append(urls, u)
	}
	sort.Strings(urls) // the same script arguments on a retried write
	for _, u := range urls {
		o.Once = append(o.Once, frontier.OnceCounters{Key: "requisite " + u, Counters: s.fetchCounters(t.Requisites[u])})
	}
	return o, urls
}

// countedPage is a page attempt whose outcome a write applied and counted.
type countedPage struct {
	id      int64
	attempt int
	t       activities.PageTally
	urls    []string
	done    frontier.Completed
}

// counted writes what follows an applied outcome, for the pages, in one
// round trip: the job's heartbeat pulses and the pages' hook events (one
// write for all of them, its counters summed), and their hooks' outcomes
// in the fleet's health (one write too), once, with the outcome the
// frontier applied (a crash right after it loses them, never counts them
// twice; a lost pulse is the next page's to give). The metrics count
// exactly what the job's counters got.
func (s *CrawlStore) counted(ctx context.Context, ident string, pages []countedPage) {
	var ops []luascript.Op
	var results []func(redis.Cmder) error // nil: the command's error is all
	var what []string
	events := make([]rkeys.PageEvents, len(pages))
	for i, p := range pages {
		events[i] = rkeys.PageEvents{OpID: fmt.Sprintf("%s/page-%d/attempt-%d", ident, p.id, p.attempt), URL: p.t.PageURL, Results: p.t.Results}
	}
	// One write for every page's heartbeat pulse and hook events: the
	// counters summed (rkeys RecordPageEvents).
	op, err := s.Redis.RecordPageEventsOp(ctx, ident, events)
	if err != nil && s.Log != nil {
		s.Log.Warn("hook events left out", zap.String("ident", ident), zap.Error(err))
	}
	if op != nil {
		ops, results = append(ops, op), append(results, nil)
		what = append(what, fmt.Sprintf("%d pages' heartbeat and hook events", len(pages)))
	}
	var health []fleethealth.Outcome
	for _, p := range pages {
		for _, res := range p.t.Results {
			health = append(health, fleethealth.Outcome{Once: true, Result: res})
		}
	}
	if op, read := s.healthOp(ctx, ident, health); op != nil {
		ops, results = append(ops, op), append(results, read)
		what = append(what, fmt.Sprintf("%d pages' hooks in the fleet's health", len(pages)))
	}
	for _, p := range pages {
		metrics.Fetched(metrics.FetchPage, p.t.Responses)
		for i, u := range p.urls {
			if p.done.Once[i] {
				metrics.Fetched(metrics.FetchRequisite, p.t.Requisites[u].Responses)
			}
		}
	}
	if len(ops) == 0 {
		return
	}
	for i, c := range luascript.Pipeline(ctx, s.Redis.Client(), ops) {
		err := c.Err()
		if results[i] != nil {
			err = results[i](c)
		}
		if err != nil && s.Log != nil {
			s.Log.Warn("not recorded: "+what[i], zap.String("ident", ident), zap.Error(err))
		}
	}
}

// RecordPages records finished page attempts in three round trips for all
// of them (more only to settle depths their links lowered, once for all):
// their log packets and links, then the outcomes of those whose links were
// applied (one script, their job counters summed), then what follows an
// applied outcome (counted). Each part is
// repeat-safe (a log batch per page attempt, Discover's batches, an
// outcome applied once), so a failed call is made again whole.
func (s *CrawlStore) RecordPages(ctx context.Context, ident string, ws []activities.PageWrite) ([]activities.PageWritten, activities.PageCounts, error) {
	out := make([]activities.PageWritten, len(ws))
	rdb := s.Redis.Client()
	type link struct {
		page, first, n int
		d              frontier.Discovery
	}
	var ops []luascript.Op
	logs := map[int]func(redis.Cmder) (int64, error){}
	logAt := map[int]int{}
	var links []link
	for i, w := range ws {
		if len(w.Entries) > 0 {
			op, res, err := s.Redis.AppendLogOp(ctx, ident, w.LogKey+"#0", packets(w.Entries))
			if err != nil {
				return nil, activities.PageCounts{}, notWritable(err)
			}
			logs[i], logAt[i] = res, len(ops)
			ops = append(ops, op)
		}
		for b := 0; b*activities.LinkBatch < len(w.Links); b++ {
			part := w.Links[b*activities.LinkBatch : min((b+1)*activities.LinkBatch, len(w.Links))]
			dops, d, err := s.Frontier.DiscoverOps(ctx, ident, w.PageID, w.Attempt, b, frontierLinks(part))
			if err != nil {
				return nil, activities.PageCounts{}, crawlErr(err)
			}
			links = append(links, link{page: i, first: len(ops), n: len(dops), d: d})
			ops = append(ops, dops...)
		}
	}
	cmds := luascript.Pipeline(ctx, rdb, ops)
	for i, res := range logs {
		if _, err := res(cmds[logAt[i]]); err != nil {
			return nil, activities.PageCounts{}, fmt.Errorf("log page %d of %s: %w", ws[i].PageID, ident, notWritable(err))
		}
	}
	settle := -1 // the first page that left depths to propagate
	for _, l := range links {
		if out[l.page].Superseded != nil {
			continue
		}
		added, backlog, err := l.d.Replies(cmds[l.first : l.first+l.n])
		if errors.Is(err, frontier.ErrNotClaimed) {
			out[l.page].Superseded = crawlErr(err)
			continue
		}
		if err != nil {
			return nil, activities.PageCounts{}, fmt.Errorf("add links of page %d of %s: %w", ws[l.page].PageID, ident, crawlErr(err))
		}
		out[l.page].Queued += added.Queued()
		if backlog && settle < 0 {
			settle = l.page
		}
	}
	if settle >= 0 {
		// Once for every page, before their outcomes (as Discover does).
		promoted, err := s.Frontier.Settle(ctx, ident)
		if err != nil {
			return nil, activities.PageCounts{}, fmt.Errorf("add links of %d pages of %s: %w", len(ws), ident, crawlErr(err))
		}
		out[settle].Queued += promoted
	}
	// The outcomes in one script: their job counters summed (frontier
	// CompleteBatchOp).
	var cs []frontier.Completion
	var pages []int // ws index of each completion
	var urls [][]string
	for i, w := range ws {
		if out[i].Superseded != nil {
			continue
		}
		o, u := s.outcome(w.Status, w.Note, w.NotBefore, w.Tally)
		o.Last = w.Last
		cs, pages, urls = append(cs, frontier.Completion{PageID: w.PageID, Attempt: w.Attempt, Outcome: o}), append(pages, i), append(urls, u)
	}
	var counts *frontier.Counts
	var counted []countedPage
	if len(cs) > 0 {
		op, res, err := s.Frontier.CompleteBatchOp(ctx, ident, cs)
		if err != nil {
			return nil, activities.PageCounts{}, crawlErr(err)
		}
		done, errs, err := res(luascript.Pipeline(ctx, rdb, []luascript.Op{op})[0])
		if err != nil {
			return nil, activities.PageCounts{}, fmt.Errorf("complete %d pages of %s: %w", len(cs), ident, crawlErr(err))
		}
		for j, d := range done {
			w := ws[pages[j]]
			if errors.Is(errs[j], frontier.ErrNotClaimed) {
				out[pages[j]].Superseded = crawlErr(errs[j])
				continue
			}
			if errs[j] != nil {
				return nil, activities.PageCounts{}, fmt.Errorf("complete page %d of %s: %w", w.PageID, ident, crawlErr(errs[j]))
			}
			counts = &d.Counts
			if d.Counted {
				counted = append(counted, countedPage{w.PageID, w.Attempt, w.Tally, urls[j], d})
			}
		}
	}
	s.counted(ctx, ident, counted)
	if counts == nil {
		c, err := s.Counts(ctx, ident)
		return out, c, err
	}
	return out, pageCounts(*counts), nil
}

// RefusedLinks are the links the frontier refuses (frontier.Refused).
func (s *CrawlStore) RefusedLinks(links []activities.Link) []activities.RefusedLink {
	var out []activities.RefusedLink
	for _, l := range frontier.Refused(frontierLinks(links)) {
		out = append(out, activities.RefusedLink{URL: l.URL, Bytes: l.Bytes, Rule: l.Rule})
	}
	return out
}

func frontierLinks(links []activities.Link) []frontier.Link {
	ls := make([]frontier.Link, len(links))
	for i, l := range links {
		ls[i] = frontier.Link{URL: l.URL, NoRecurse: l.NoRecurse, Requisite: l.Requisite}
	}
	return ls
}

// fetchCounters are ArchiveBot's job counters of fetches: items_downloaded
// counts 2xx and 3xx responses (model.ResponseCounts.Downloaded), and
// items_queued the same, so that items_queued - items_downloaded (what
// ArchiveBot's !status shows as queued) stays the pages the frontier has
// waiting (its QueuedField rule): a requisite or a redirect is downloaded
// without ever waiting in the frontier. bytes_downloaded counts the bytes
// fetched (of every response), and, when archiveflow owns the response
// counters (redis.response_counters), r1xx..r5xx, runk and error_count.
func (s *CrawlStore) fetchCounters(ft activities.FetchTally) []frontier.JobCounter {
	rc := ft.Responses
	counters := []frontier.JobCounter{{Field: queuedField, Delta: rc.Downloaded()}, {Field: "items_downloaded", Delta: rc.Downloaded()},
		{Field: "bytes_downloaded", Delta: rc.Bytes}}
	if *s.Redis.Options().OwnResponseCounters {
		counters = append(counters, frontier.JobCounter{Field: "r1xx", Delta: rc.R1xx}, frontier.JobCounter{Field: "r2xx", Delta: rc.R2xx},
			frontier.JobCounter{Field: "r3xx", Delta: rc.R3xx}, frontier.JobCounter{Field: "r4xx", Delta: rc.R4xx},
			frontier.JobCounter{Field: "r5xx", Delta: rc.R5xx}, frontier.JobCounter{Field: "runk", Delta: rc.Runk},
			frontier.JobCounter{Field: "error_count", Delta: rc.Errors})
	}
	return counters
}

// Release returns claimed pages to READY.
func (s *CrawlStore) Release(ctx context.Context, ident string, ids []int64) (activities.PageCounts, error) {
	_, c, err := s.Frontier.ReleasePages(ctx, ident, ids)
	if err != nil {
		return activities.PageCounts{}, crawlErr(err)
	}
	return pageCounts(c), nil
}

// LockedHostQueues are the host queues of queue's pool on the pipelines
// locked to the crawl (a tag's queue, POOLQUEUE#TAG, is its pool's: host
// queues are POOLQUEUE@INSTANCE).
func (s *CrawlStore) LockedHostQueues(ctx context.Context, ident, queue string) ([]string, error) {
	base, _, _ := strings.Cut(queue, config.TagSeparator)
	qs, err := s.Redis.LockedHostQueues(ctx, ident, base)
	if err != nil {
		return nil, notWritable(err)
	}
	return qs, nil
}

// FailWaiting ends the pages waiting for a later retry as failed.
func (s *CrawlStore) FailWaiting(ctx context.Context, ident, note string) (activities.PageCounts, error) {
	_, c, err := s.Frontier.FailWaiting(ctx, ident, note)
	if err != nil {
		return activities.PageCounts{}, crawlErr(err)
	}
	return pageCounts(c), nil
}

// requeueBatch is how many page records one requeue script call reads
// (~160 KB of records: a few milliseconds of Redis time).
const requeueBatch = frontier.MaxRequeueBatch

// Requeue takes the frontier's retention off (the job runs again) and
// requeues its failed pages under the retry's token (none for a
// continue, which reports whether the start page is READY when asked:
// RequeueInput.StartPage).
func (s *CrawlStore) Requeue(ctx context.Context, in activities.RequeueInput) (activities.RequeueResult, error) {
	if err := s.Frontier.Persist(ctx, in.Ident); err != nil {
		return activities.RequeueResult{}, crawlErr(err)
	}
	if in.Continue {
		c, err := s.Counts(ctx, in.Ident)
		if err != nil || !in.StartPage {
			return activities.RequeueResult{Counts: c}, err
		}
		start, err := s.Frontier.PageByID(ctx, in.Ident, 1)
		if err != nil {
			return activities.RequeueResult{}, fmt.Errorf("start page of %s: %w", in.Ident, crawlErr(err))
		}
		return activities.RequeueResult{Seed: start.State == frontier.StateReady, Counts: c}, nil
	}
	r, err := s.Frontier.Requeue(ctx, in.Ident, in.Token, requeueBatch)
	if err != nil {
		return activities.RequeueResult{}, crawlErr(err)
	}
	return activities.RequeueResult{Pages: r.Pages, Seed: r.Seed, Counts: pageCounts(r.Counts)}, nil
}

// Counts reads the page counts.
func (s *CrawlStore) Counts(ctx context.Context, ident string) (activities.PageCounts, error) {
	c, err := s.Frontier.Counts(ctx, ident)
	if err != nil {
		return activities.PageCounts{}, crawlErr(err)
	}
	return pageCounts(c), nil
}

// LiveSettings reads ignores, the ignore-report flag and the latest rules.
func (s *CrawlStore) LiveSettings(ctx context.Context, ident string) (activities.LiveSettings, error) {
	live, err := s.Redis.CrawlLive(ctx, ident)
	if err != nil {
		return activities.LiveSettings{}, notWritable(err)
	}
	out := activities.LiveSettings{Ignores: live.Ignores, SuppressIgnoreReports: live.SuppressIgnoreReports,
		Concurrency: live.Concurrency, DelayMinMS: live.DelayMinMS, DelayMaxMS: live.DelayMaxMS, BytesDownloaded: live.BytesDownloaded}
	if live.RulesVersion >= 0 {
		rules, err := scope.ParseRules([]byte(live.RulesJSON))
		if err != nil {
			return out, fmt.Errorf("%w: rules version %d of %s: %w", activities.ErrNotWritable, live.RulesVersion, ident, err)
		}
		out.Rules = scope.Versioned{Version: live.RulesVersion, Rules: rules}
	}
	return out, nil
}

// StillClaimed returns the pages of ps still CLAIMED by their attempt,
// one read per page (only a page batch run again asks).
func (s *CrawlStore) StillClaimed(ctx context.Context, ident string, ps []activities.PageSpec) ([]activities.PageSpec, error) {
	var out []activities.PageSpec
	for _, p := range ps {
		got, err := s.Frontier.PageByID(ctx, ident, p.ID)
		if err != nil {
			return nil, fmt.Errorf("claims of %s: %w", ident, crawlErr(err))
		}
		if got.State == frontier.StateClaimed && got.Attempts == p.Attempt {
			out = append(out, p)
		}
	}
	return out, nil
}

// SetRules stores a rules version.
func (s *CrawlStore) SetRules(ctx context.Context, ident string, rules scope.Versioned) error {
	list := rules.Rules
	if list == nil {
		list = scope.Rules{}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("encode rules of %s: %w", ident, err)
	}
	if err := s.Redis.SetRules(ctx, ident, rules.Version, string(b)); err != nil {
		return notWritable(err)
	}
	return nil
}

// FinishCrawl finishes the job and gives its frontier the job's retention.
func (s *CrawlStore) FinishCrawl(ctx context.Context, in activities.FinishInput) error {
	if err := s.FinishJob(ctx, in); err != nil {
		return err
	}
	ttl, err := s.Redis.JobTTL(ctx, in.Ident)
	if err != nil {
		return fmt.Errorf("retention of %s: %w", in.Ident, notWritable(err))
	}
	if ttl < time.Millisecond {
		ttl = time.Millisecond
	}
	if err := s.Frontier.Expire(ctx, in.Ident, ttl); err != nil && !errors.Is(err, frontier.ErrNoFrontier) {
		return fmt.Errorf("expire frontier of %s: %w", in.Ident, err)
	}
	return nil
}

// Robots reads the crawl's robots.txt record for origin (frontier
// KeepRobots' hash).
func (s *CrawlStore) Robots(ctx context.Context, ident, origin string) (robots.Record, bool, error) {
	v, ok, err := s.Frontier.Robots(ctx, ident, origin)
	if err != nil || !ok {
		return robots.Record{}, false, crawlErrOrNil(err)
	}
	var rec robots.Record
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		return robots.Record{}, false, fmt.Errorf("%w: robots.txt record of %s for %s: %w", activities.ErrNotWritable, origin, ident, err)
	}
	return rec, true, nil
}

// KeepRobots keeps rec for origin unless one is kept, and returns the kept
// one.
func (s *CrawlStore) KeepRobots(ctx context.Context, ident, origin string, rec robots.Record) (robots.Record, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return robots.Record{}, fmt.Errorf("encode robots.txt record of %s: %w", origin, err)
	}
	v, err := s.Frontier.KeepRobots(ctx, ident, origin, string(b))
	if err != nil {
		return robots.Record{}, crawlErr(err)
	}
	var kept robots.Record
	if err := json.Unmarshal([]byte(v), &kept); err != nil {
		return robots.Record{}, fmt.Errorf("%w: robots.txt record of %s for %s: %w", activities.ErrNotWritable, origin, ident, err)
	}
	return kept, nil
}

func crawlErrOrNil(err error) error {
	if err == nil {
		return nil
	}
	return crawlErr(err)
}

// MaxMetricsCrawls bounds the running jobs one metrics scrape reads
// (FrontierSizes): at most this many round trips per scrape.
const MaxMetricsCrawls = 1000

// FrontierSizes sums the page counts of the running crawls (the first
// MaxMetricsCrawls jobs of `working` that have a frontier) by state, done
// pages split into succeeded and failed: the metrics'
// archiveflow_frontier_pages, read at scrape time.
func (s *CrawlStore) FrontierSizes(ctx context.Context) (metrics.FrontierSizes, error) {
	idents, err := s.Redis.WorkingIdents(ctx, MaxMetricsCrawls)
	if err != nil {
		return metrics.FrontierSizes{}, err
	}
	out := metrics.FrontierSizes{Pages: map[string]int64{}}
	for _, id := range idents {
		c, err := s.Frontier.Counts(ctx, id)
		if errors.Is(err, frontier.ErrNoFrontier) {
			continue // not a crawl, or its frontier is gone
		}
		if err != nil {
			return metrics.FrontierSizes{}, err
		}
		out.Crawls++
		out.Pages[string(frontier.StateReady)] += c.Ready
		out.Pages[string(frontier.StateClaimed)] += c.Claimed
		out.Pages[string(frontier.StateSkipped)] += c.Skipped
		out.Pages[string(frontier.StateDeferred)] += c.Deferred
		out.Pages[string(frontier.StatusSucceeded)] += c.Succeeded
		out.Pages[string(frontier.StatusFailed)] += c.Failed
	}
	return out, nil
}
