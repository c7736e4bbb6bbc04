package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/engine"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/jobctl"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/pageindex"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/snapindex"
	"github.com/archiveflow/archiveflow/workflows"
)

// newFrontier reads and writes crawls' pages on b's Redis.
func newFrontier(b *backend.Backend) *frontier.Frontier {
	f, err := frontier.New(b.Redis, b.Store.Keys(), frontier.Options{})
	if err != nil {
		panic(err) // only a nil client fails, and b has one
	}
	return f
}

// crawlJSON is a crawl's part of `status --json`: ArchiveBot's counters
// and its pages by state and by depth (from the frontier in Redis).
type crawlJSON struct {
	ItemsQueued     int64 `json:"items_queued"`
	ItemsDownloaded int64 `json:"items_downloaded"`
	// Cuts counts losses to a limit: bodies cut short, links dropped over
	// a cap or refused by the frontier (the job hash's cut_count).
	Cuts int64 `json:"cut_count"`
	// Bytes is the crawl's bytes_downloaded (status shows it on the
	// job's bytes line).
	Bytes       int64                  `json:"bytes_downloaded,omitempty"`
	Responses   model.ResponseCounts   `json:"responses"`
	Pages       frontier.StateCounts   `json:"pages"`
	Total       int64                  `json:"total"`
	Propagating int64                  `json:"propagating,omitempty"`
	ByDepth     []frontier.DepthCounts `json:"by_depth"`
	// MaxDepth is the crawl's depth limit in links from the start page
	// (-1: none, submit --depth inf).
	MaxDepth int `json:"max_depth"`
	// Waiting is the READY pages waiting for a later retry
	// (hooks.retry_later), RetryAt when the first is due.
	Waiting int64      `json:"waiting,omitempty"`
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Running is how many CLAIMED pages are running now, read from the
	// crawl's page activities (a batch claims up to crawl.batch_pages and
	// runs its share of the concurrency; its heartbeat says how many run);
	// nil when Temporal could not say.
	Running *int64 `json:"claimed_running,omitempty"`
}

// depthLimit says a crawl's depth limit in words.
func (c *crawlJSON) depthLimit() string {
	if c.MaxDepth < 0 {
		return "no depth limit (--depth inf)"
	}
	return fmt.Sprintf("at most %d link(s) from the start page (--depth %d)", c.MaxDepth, c.MaxDepth)
}

// crawlStatus reads a crawl's pages; nil when the job has no frontier
// (yet, or any more).
func crawlStatus(ctx context.Context, b *backend.Backend, id string) (*crawlJSON, error) {
	c, err := newFrontier(b).Counts(ctx, id)
	if errors.Is(err, frontier.ErrNoFrontier) {
		return nil, nil
	}
	if err != nil {
		return nil, withCode(exitUnavailable, err)
	}
	by := c.ByDepth
	if by == nil {
		by = []frontier.DepthCounts{}
	}
	out := &crawlJSON{Pages: c.StateCounts, Total: c.Total, Propagating: c.Propagating, ByDepth: by, MaxDepth: c.MaxDepth, Waiting: c.Waiting}
	if c.Waiting > 0 {
		out.RetryAt = &c.RetryAt
	}
	return out, nil
}

// jobCrawl is crawl job v's pages (its frontier) and counters (its job
// hash); nil when it has no frontier (yet, or any more).
func jobCrawl(ctx context.Context, b *backend.Backend, v rkeys.JobView) (*crawlJSON, error) {
	c, err := crawlStatus(ctx, b, v.Ident)
	if err != nil || c == nil {
		return nil, err
	}
	c.ItemsQueued, c.ItemsDownloaded, c.Responses, c.Cuts = v.ItemsQueued, v.ItemsDownloaded, v.Responses, v.Cuts
	c.Bytes = v.BytesDownloaded
	return c, nil
}

// The activity types of a crawl's pages: one page, a batch of pages.
const (
	runPageActivity      = "RunPage"
	runPageBatchActivity = "RunPageBatch"
	seedWorkflowType     = "SnapshotWorkflow" // a crawl's start page
)

// pagesRunning is how many of a crawl's pages run now: its start page
// while its seed snapshot (a child SnapshotWorkflow) runs, one per RunPage
// activity, and what each RunPageBatch's last heartbeat says
// (activities.BatchProgress); nil when the crawl's workflow cannot be
// described. Best effort: a batch that has not beaten yet counts none.
func pagesRunning(ctx context.Context, c client.Client, workflowID string) *int64 {
	dctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	desc, err := c.DescribeWorkflowExecution(dctx, workflowID, "")
	if err != nil {
		return nil
	}
	var n int64
	for _, pc := range desc.GetPendingChildren() {
		if pc.GetWorkflowTypeName() == seedWorkflowType {
			n++
		}
	}
	for _, pa := range desc.GetPendingActivities() {
		switch pa.GetActivityType().GetName() {
		case runPageActivity:
			n++
		case runPageBatchActivity:
			var p activities.BatchProgress
			if pa.GetHeartbeatDetails() != nil && converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p) == nil {
				n += int64(p.PagesRunning)
			}
		}
	}
	return &n
}

// printCrawl prints a crawl's pages by state and by depth.
func printCrawl(w io.Writer, c *crawlJSON) {
	p := c.Pages
	// Queued as ArchiveBot's !status computes it: the pages still waiting.
	fmt.Fprintf(w, "  items:    %d downloaded, %d queued; responses %d (1xx %d, 2xx %d, 3xx %d, 4xx %d, 5xx %d, unknown %d, errors %d)\n",
		c.ItemsDownloaded, c.ItemsQueued-c.ItemsDownloaded, c.Responses.Count, c.Responses.R1xx, c.Responses.R2xx, c.Responses.R3xx,
		c.Responses.R4xx, c.Responses.R5xx, c.Responses.Runk, c.Responses.Errors)
	if c.Cuts > 0 {
		fmt.Fprintf(w, "  cuts:     %d lost to a limit (bodies cut short, links dropped or refused): see the pages' notes and the job log\n", c.Cuts)
	}
	fmt.Fprintf(w, "  depth:    %s\n", c.depthLimit())
	printPages(w, c.Total, p)
	if c.Running != nil && p.Claimed > 0 {
		fmt.Fprintf(w, "  claimed:  %d running, %d waiting their turn in a page batch or being recorded\n",
			*c.Running, max(p.Claimed-*c.Running, 0))
	}
	if c.Waiting > 0 && c.RetryAt != nil {
		fmt.Fprintf(w, "  waiting:  %d ready page(s) %s: their attempts ended transiently (hooks.retry_later)\n", c.Waiting, waitingWords(*c.RetryAt))
	}
	if len(c.ByDepth) == 0 {
		return
	}
	fmt.Fprintf(w, "  %-6s %8s %8s %8s %9s %7s %8s %8s\n", "depth", "ready", "claimed", "done", "succeeded", "failed", "skipped", "deferred")
	for _, d := range c.ByDepth {
		fmt.Fprintf(w, "  %-6d %8d %8d %8d %9d %7d %8d %8d\n", d.Depth, d.Ready, d.Claimed, d.Done, d.Succeeded, d.Failed, d.Skipped, d.Deferred)
	}
}

// printPages is status's line of a crawl's total pages by state.
func printPages(w io.Writer, total int64, p frontier.StateCounts) {
	fmt.Fprintf(w, "  pages:    %d: %d ready, %d claimed, %d done (%d succeeded, %d failed), %d skipped, %d beyond the depth limit\n",
		total, p.Ready, p.Claimed, p.Done, p.Succeeded, p.Failed, p.Skipped, p.Deferred)
}

// ---- pages ----

func pagesCommand() *command {
	return &command{
		name:    "pages",
		args:    "IDENT",
		summary: "list a crawl's pages: URL, depth, state, attempts, status, parent",
		details: `
Reads the crawl's frontier in Redis, in discovery order (the start page is
page 1). --state keeps one state (ready, claimed, skipped, done, deferred:
found beyond the depth limit), --depth one depth; --limit bounds the list
(--after continues after a page id). --url shows one page with each hook's
result of every attempt, read from the archive dir of the worker host
that ran the page: the crawl's page index (ARCHIVE_DIR/crawls/IDENT/
pageindex/*.jsonl, a line per page attempt) and, where its hooks wrote
files, the page's directory (ARCHIVE_DIR/crawls/IDENT/pages/ID, earlier
attempts under attempts/N).`,
		examples: []string{
			"starter pages 3mlbkdu1fpo7wt4lr2qf1mpsw",
			"starter pages 3mlbkdu1fpo7wt4lr2qf1mpsw --state done --depth 2",
			"starter pages https://example.com/ --state skipped --json",
			"starter pages 3mlbkdu1fpo7wt4lr2qf1mpsw --url https://example.com/about",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.String("state", "", "only pages in this state: ready, claimed, skipped, done, deferred")
			fs.Int("depth", -1, "only pages at this depth")
			fs.Int("limit", 1000, "at most this many pages (1..10000)")
			fs.Int64("after", 0, "start after this page id")
			fs.String("url", "", "one page: its hooks' results, attempt by attempt (read from the archive dir)")
		},
		run: runPages,
	}
}

// pageJSON is one page in `pages --json`.
type pageJSON struct {
	ID                int64  `json:"id"`
	URL               string `json:"url"`
	Depth             int    `json:"depth"`
	State             string `json:"state"`
	Status            string `json:"status,omitempty"`
	Attempts          int    `json:"attempts"`
	AttemptsRemaining int    `json:"attempts_remaining"`
	Parent            int64  `json:"parent"`
	ParentURL         string `json:"parent_url,omitempty"`
	RulesVersion      int64  `json:"rules_version,omitempty"`
	NoRecurse         bool   `json:"no_recurse,omitempty"`
	Note              string `json:"note,omitempty"`
	// LaterRetries counts the page's later retries (hooks.retry_later),
	// RetryAt is when a waiting one is due.
	LaterRetries int        `json:"later_retries,omitempty"`
	RetryAt      *time.Time `json:"retry_at,omitempty"`
	// Results are the page's hook results, attempt by attempt (--url).
	Results []pageAttemptJSON `json:"results,omitempty"`
}

// pageAttemptJSON is one attempt's hook results of a page.
type pageAttemptJSON struct {
	Attempt int            `json:"attempt"`
	State   model.JobState `json:"state"`
	Error   string         `json:"error,omitempty"`
	Dir     string         `json:"dir"`
	Hooks   []hookRow      `json:"hooks"`
}

// newPageJSON is p as `pages` shows it.
func newPageJSON(p frontier.Page) pageJSON {
	pj := pageJSON{ID: p.ID, URL: p.URL, Depth: p.Depth, State: string(p.State), Status: string(p.Status), Attempts: p.Attempts,
		AttemptsRemaining: p.AttemptsRemaining, Parent: p.Parent, RulesVersion: p.RulesVersion, NoRecurse: p.NoRecurse, Note: p.Note,
		LaterRetries: p.LaterRetries}
	if !p.RetryAt.IsZero() {
		pj.RetryAt = &p.RetryAt
	}
	return pj
}

// statusWords is a page's status column: waiting (retry at …) for a page
// waiting for a later retry, else its status.
func (p pageJSON) statusWords() string {
	if p.RetryAt != nil {
		return waitingWords(*p.RetryAt)
	}
	return dash(p.Status)
}

func runPages(ctx context.Context, a *app, inv *invocation) error {
	id, err := oneIdent(inv)
	if err != nil {
		return err
	}
	var filter frontier.Filter
	if raw, _ := inv.fs.GetString("state"); inv.fs.Changed("state") {
		st, err := frontier.ParseState(raw)
		if err != nil {
			return usageErr("--state: %v", err)
		}
		filter.State = st
	}
	if inv.fs.Changed("depth") {
		d, _ := inv.fs.GetInt("depth")
		if d < 0 {
			return usageErr("--depth %d: must be >= 0", d)
		}
		filter.Depth = &d
	}
	limit, _ := inv.fs.GetInt("limit")
	if limit < 1 || limit > frontier.MaxPagesLimit {
		return usageErr("--limit %d: must be 1..%d", limit, frontier.MaxPagesLimit)
	}
	after, _ := inv.fs.GetInt64("after")
	if after < 0 {
		return usageErr("--after %d: must be >= 0", after)
	}
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	if _, err := getJob(ctx, b, id); err != nil {
		return a.notInRedis(ctx, inv, id, err, "its pages went with it (the WARCs stay: starter export "+id+")")
	}
	f := newFrontier(b)
	if u, _ := inv.fs.GetString("url"); inv.fs.Changed("url") {
		return a.showPage(ctx, inv, f, id, u)
	}
	pages, next, err := f.Pages(ctx, id, filter, after+1, limit)
	if errors.Is(err, frontier.ErrNoFrontier) {
		return withCode(exitNotFound, fmt.Errorf("job %s: has no pages: it is not a crawl (submit --depth inf or N), or its pages expired", id))
	}
	if err != nil {
		return withCode(exitUnavailable, err)
	}
	parents := map[int64]string{}
	out := make([]pageJSON, 0, len(pages))
	for _, p := range pages {
		pj := newPageJSON(p)
		if p.Parent > 0 {
			u, ok := parents[p.Parent]
			if !ok {
				if pp, err := f.PageByID(ctx, id, p.Parent); err == nil {
					u = pp.URL
				}
				parents[p.Parent] = u
			}
			pj.ParentURL = u
		}
		out = append(out, pj)
	}
	if inv.json {
		res := map[string]any{"ident": id, "pages": out}
		if next > 0 {
			res["next_after"] = next - 1
		}
		return writeJSON(a.stdout, res)
	}
	if len(out) == 0 {
		fmt.Fprintln(a.stdout, "no pages")
		return nil
	}
	fmt.Fprintf(a.stdout, "%7s  %5s  %-8s  %-9s  %8s  %7s  %s\n", "ID", "DEPTH", "STATE", "STATUS", "ATTEMPTS", "PARENT", "URL")
	for _, p := range out {
		fmt.Fprintf(a.stdout, "%7d  %5d  %-8s  %-9s  %8s  %7d  %s\n", p.ID, p.Depth, p.State, p.statusWords(),
			strconv.Itoa(p.Attempts)+"/"+strconv.Itoa(p.Attempts+p.AttemptsRemaining), p.Parent, p.URL)
		if p.Note != "" {
			fmt.Fprintf(a.stdout, "%7s  note: %s\n", "", p.Note)
		}
	}
	if next > 0 {
		fmt.Fprintf(a.stdout, "more: --after %d\n", next-1)
	}
	return nil
}

// showPage prints one page and its hooks' results, attempt by attempt.
func (a *app) showPage(ctx context.Context, inv *invocation, f *frontier.Frontier, id, url string) error {
	p, err := f.Page(ctx, id, url)
	switch {
	case errors.Is(err, frontier.ErrNoFrontier):
		return withCode(exitNotFound, fmt.Errorf("job %s: has no pages: it is not a crawl (submit --depth inf or N), or its pages expired", id))
	case errors.Is(err, frontier.ErrUnknownPage):
		return withCode(exitNotFound, fmt.Errorf("job %s has no page %s", id, url))
	case errors.Is(err, frontier.ErrInvalidArgument):
		return usageErr("--url %q: %v", url, err)
	case err != nil:
		return withCode(exitUnavailable, err)
	}
	pj := newPageJSON(p)
	dir := archivedir.Page(inv.cfg.ArchiveDir, id, p.ID)
	if p.Parent == 0 && p.ID == 1 {
		// The start page runs as the crawl's snapshot: its index is the
		// snapshot's (each hook's attempts its own).
		dir = archivedir.Snapshot(inv.cfg.ArchiveDir, id)
	}
	indexDir := archivedir.PageIndex(inv.cfg.ArchiveDir, id)
	if p.Parent == 0 && p.ID == 1 {
		indexDir = "" // the start page is a snapshot: no line in the page index
	}
	pj.Results = pageAttempts(indexDir, p.ID, dir)
	if inv.json {
		return writeJSON(a.stdout, pj)
	}
	fmt.Fprintf(a.stdout, "page %d  %s\n  depth %d, %s %s, attempts %d/%d\n", pj.ID, pj.URL, pj.Depth, pj.State, pj.statusWords(),
		pj.Attempts, pj.Attempts+pj.AttemptsRemaining)
	if pj.Note != "" {
		fmt.Fprintf(a.stdout, "  note: %s\n", pj.Note)
	}
	if len(pj.Results) == 0 {
		where := dir
		if indexDir != "" {
			where = indexDir + " or " + dir
		}
		fmt.Fprintf(a.stdout, "  no hook results in %s: the page has not run yet, or ran on another worker host (a page's records stay on the host that ran it)\n", where)
		return nil
	}
	for _, at := range pj.Results {
		if at.Dir == "" {
			fmt.Fprintf(a.stdout, "attempt %d: %s  (no files)\n", at.Attempt, at.State)
		} else {
			fmt.Fprintf(a.stdout, "attempt %d: %s  (%s)\n", at.Attempt, at.State, at.Dir)
		}
		writeHookTable(a.stdout, at.Hooks, nil, 0)
	}
	return nil
}

// pageAttempts reads a page's attempts, first attempt first: its lines in
// the crawl's page index (indexDir, "" for none), and the index of its
// directory and of its earlier attempts there (engine.AttemptsDir), where
// its hooks' files are (Dir) and, for pages run before the page index, the
// only record; what is missing or unreadable is left out.
func pageAttempts(indexDir string, id int64, dir string) []pageAttemptJSON {
	var out []pageAttemptJSON
	at := map[int]int{} // attempt number → its index in out
	add := func(snap snapindex.Snapshot, results []model.ArchiveResult, d string) {
		if len(results) == 0 {
			return
		}
		if i, ok := at[results[0].Attempts]; ok {
			out[i].Dir = d // recorded in the page index: its files are in d
			return
		}
		a := pageAttemptJSON{Attempt: results[0].Attempts, State: snap.State, Error: snap.Error, Dir: d}
		for _, r := range results {
			a.Hooks = append(a.Hooks, resultRow(r))
		}
		at[a.Attempt] = len(out)
		out = append(out, a)
	}
	if indexDir != "" {
		attempts, _ := pageindex.Page(indexDir, id)
		for _, a := range attempts {
			add(a.Snapshot, a.Results, "")
		}
	}
	dirs := []string{dir}
	if entries, err := os.ReadDir(filepath.Join(dir, engine.AttemptsDir)); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(dir, engine.AttemptsDir, e.Name()))
			}
		}
	}
	for _, d := range dirs {
		if snap, results, err := snapindex.Read(d); err == nil {
			add(snap, results, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Attempt < out[j].Attempt })
	return out
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ---- rules ----

func rulesCommand() *command {
	return &command{
		name:    "rules",
		args:    "IDENT [FILE|-]",
		summary: "show a crawl's rules, or replace them (a new version) from a JSON file",
		details: `
Rules (mnbot's): a JSON list, each rule a Go RE2 pattern searched in the
URL and the settings it gives the URLs it matches:
  [{"pattern": "^https?://example\\.com/calendar/", "skip": true},
   {"pattern": "/calendar/2024/", "skip": false},
   {"pattern": "^https?://cdn\\.example\\.net/", "accept": true},
   {"pattern": "/m/", "ua": "Mozilla/5.0 (iPhone)"}]
For each setting the last matching rule wins. skip=true moves a queued page
to SKIPPED when it is dequeued; accept=true puts a URL in scope (fetched and
followed), accept=false keeps it out; ua is the User-Agent the page is
fetched with. A change is a new version: pages claimed and links found from
then on use it; the attempts that used an older one keep its number
(starter pages shows it). The workflow and Redis (IDENT_rules) have the new
version when this returns.`,
		examples: []string{
			"starter rules 3mlbkdu1fpo7wt4lr2qf1mpsw",
			"starter rules 3mlbkdu1fpo7wt4lr2qf1mpsw rules.json",
			`echo '[{"pattern": "/calendar/", "skip": true}]' | starter rules 3mlbkdu1fpo7wt4lr2qf1mpsw -`,
		},
		run: runRules,
	}
}

func runRules(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) < 1 || len(inv.args) > 2 {
		return usageErr("want IDENT [FILE|-], got %d argument(s) (see: starter help rules)", len(inv.args))
	}
	id, err := parseIdent(inv.args[0])
	if err != nil {
		return err
	}
	var rules scope.Rules
	set := len(inv.args) == 2
	if set {
		if rules, err = readRules(a, "rules", inv.args[1]); err != nil {
			return withCode(exitUsage, err)
		}
	}
	b, err := a.connect(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	if !set {
		return showRules(ctx, a, inv, b, id)
	}
	if _, err := liveJob(ctx, b, id, "change its rules"); err != nil {
		return err
	}
	version, err := applyRules(ctx, b, id, rules)
	if err != nil {
		return err
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"ident": id, "rules": scope.Versioned{Version: version, Rules: rules}})
	}
	fmt.Fprintf(a.stdout, "%s rules (version %d): %d rule(s)\n", id, version, len(rules))
	return nil
}

func showRules(ctx context.Context, a *app, inv *invocation, b *backend.Backend, id string) error {
	st, err := crawlOf(ctx, b, id)
	if err != nil {
		return err
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"ident": id, "rules": st.Rules})
	}
	fmt.Fprintf(a.stdout, "%s rules version %d: %d rule(s)\n", id, st.Rules.Version, len(st.Rules.Rules))
	for i, r := range st.Rules.Rules {
		fmt.Fprintf(a.stdout, "  %2d  %s", i+1, r.Pattern)
		if r.Accept != nil {
			fmt.Fprintf(a.stdout, "  accept=%t", *r.Accept)
		}
		if r.Skip != nil {
			fmt.Fprintf(a.stdout, "  skip=%t", *r.Skip)
		}
		if r.UA != nil {
			fmt.Fprintf(a.stdout, "  ua=%q", *r.UA)
		}
		fmt.Fprintln(a.stdout)
	}
	return nil
}

// crawlOf queries a crawl's workflow for its status.
func crawlOf(ctx context.Context, b *backend.Backend, id string) (workflows.CrawlStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	var st workflows.CrawlStatus
	if err := jobctl.Status(cctx, b.Temporal, id, &st); err != nil {
		return st, temporalErr(id, "query", err)
	}
	if st.Kind != "crawl" {
		return st, withCode(exitConflict, fmt.Errorf("job %s is not a crawl: rules are for crawls (submit --depth inf or N)", id))
	}
	return st, nil
}

// applyRules sends the set_rules update and waits until the workflow and
// Redis have the new version.
func applyRules(ctx context.Context, b *backend.Backend, id string, rules scope.Rules) (int64, error) {
	if _, err := crawlOf(ctx, b, id); err != nil {
		return 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	version, err := jobctl.SetRules(cctx, b.Temporal, id, rules)
	if err != nil {
		return 0, controlErr(id, "update rules of", err)
	}
	return version, nil
}
