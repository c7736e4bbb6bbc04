package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/builtin"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/hostbudget"
	"github.com/archiveflow/archiveflow/internal/jobwacz"
	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
	"github.com/archiveflow/archiveflow/internal/steprun"
)

// pageDir is a crawl page's SNAP_DIR (archivedir.Page).
func (e *Engine) pageDir(ident string, id int64) string {
	return archivedir.Page(e.cfg.ArchiveDir, ident, id)
}

// pageSnapshotID is a page's sub-snapshot id: IDENT-pID.
func pageSnapshotID(ident string, id int64) string { return ident + "-p" + strconv.FormatInt(id, 10) }

// pagePlan is the crawl's page plugin set as a plan, each plugin enabled
// whatever its <PLUGIN>_ENABLED says for snapshots. A page plugin that is
// not installed is a configuration error.
func (e *Engine) pagePlan(cr activities.Crawl) (activities.Plan, map[string]string, error) {
	overrides := pageOverrides(cr)
	if p, ok := e.plans.get(cr.Job.Ident, nil); ok {
		return p, overrides, nil
	}
	found, err := hooks.Discover(e.cfg.PluginDirs, e.log)
	if err != nil {
		return activities.Plan{}, nil, fmt.Errorf("discover page hooks in %v: %w", e.cfg.PluginDirs, err)
	}
	plan := e.plan(found, overrides, e.pageDir(cr.Job.Ident, 0)).Only(cr.PagePlugins)
	for _, name := range cr.PagePlugins {
		if !slices.ContainsFunc(plan.Hooks, func(h activities.HookSpec) bool { return h.Plugin == name }) {
			return activities.Plan{}, nil, fmt.Errorf("crawl page plugin %q: not found in %v (config crawl.page_plugins): %w", name, e.cfg.PluginDirs, activities.ErrConfig)
		}
	}
	e.plans.put(cr.Job.Ident, plan)
	return plan, overrides, nil
}

// pageOverrides are the job's overrides with every page plugin enabled.
func pageOverrides(cr activities.Crawl) map[string]string {
	out := make(map[string]string, len(cr.Job.Overrides)+len(cr.PagePlugins))
	maps.Copy(out, cr.Job.Overrides)
	for _, p := range cr.PagePlugins {
		out[hooks.PluginKey(p)+"_ENABLED"] = "true"
	}
	return out
}

// pageRecords collects what a page's hooks print.
type pageRecords struct {
	mu        sync.Mutex
	max       int
	responses []model.Response
	dropped   int
	notices   []string // lines for the job's log (jsonl.IsNotice), capped at max
	cuts      []string // the jsonl.IsCut notices' texts, capped at max
	cutCount  int      // every jsonl.IsCut notice, kept or not
}

// notice keeps a page hook's stderr line when it is a notice for the
// job's log (jsonl.IsNotice: a fetch the policy refused, reported by the
// proxy or a built-in fetcher, a body cut at a limit): a page's other
// stderr lines stay out of the job log.
func (r *pageRecords) notice(line string) {
	if !jsonl.IsNotice(line) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if jsonl.IsCut(line) {
		r.cutCount++
		if r.max <= 0 || len(r.cuts) < r.max {
			r.cuts = append(r.cuts, jsonl.CutText(line))
		}
	}
	if r.max > 0 && len(r.notices) >= r.max {
		return
	}
	r.notices = append(r.notices, line)
}

func (r *pageRecords) response(resp model.Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.max > 0 && len(r.responses) >= r.max {
		r.dropped++
		return
	}
	r.responses = append(r.responses, resp)
}

// hookLinks collects one hook's Snapshot records.
type hookLinks struct {
	mu    sync.Mutex
	links []activities.Discovered
}

func (l *hookLinks) add(s jsonl.Snapshot) {
	l.mu.Lock()
	l.links = append(l.links, activities.Discovered{URL: s.URL})
	l.mu.Unlock()
}

// RunPage runs one page attempt on this worker (activities.PageRunner):
// the crawl's setup hooks once per worker, then the page plugin set in
// step order, one hook at a time (pages run in parallel, their hooks do
// not), background hooks alive until the page ends. The page is transient
// when a hook's attempt is (later steps are not run), succeeded when a
// hook succeeded, failed otherwise. Its links are the Snapshot records of
// the hooks that ended with a final status; its WARC files join the job's
// WARC of this worker.
func (e *Engine) RunPage(ctx context.Context, run activities.PageRun) (activities.PageOutcome, error) {
	cr, p := run.Crawl, run.Page
	log := e.log.WithLazy(logging.Ident(cr.Job.Ident), zap.Int64("page", p.ID), logging.Attempt(p.Attempt))
	if err := e.ensureSetup(ctx, cr.Job); err != nil {
		return activities.PageOutcome{}, fmt.Errorf("crawl setup: %w", err)
	}
	plan, overrides, err := e.pagePlan(cr)
	if err != nil {
		return activities.PageOutcome{}, err
	}
	dir := e.pageDir(cr.Job.Ident, p.ID)
	if err := keepEarlierAttempt(dir, p.Attempt); err != nil {
		log.Warn("the page's earlier attempt stays where it is (this attempt may overwrite its outputs)", zap.Error(err))
	}
	// The page's directory is made by the first hook that writes there
	// (procs.RunFunc, builtin.writeOutput): a page whose hooks keep
	// everything in memory has none.
	results := &pageResults{attempt: p.Attempt, byKey: map[string]model.ArchiveResult{}}
	notRun := "not run"
	job := cr.Job
	job.URL, job.SnapshotID, job.Overrides, job.FetchDepth = p.URL, pageSnapshotID(cr.Job.Ident, p.ID), overrides, model.FetchShallow
	settings := run.Settings
	if p.UA != "" {
		settings.UserAgent = p.UA
	}
	recs := &pageRecords{max: e.cfg.MaxResponses}
	// An in-process pagefetch keeps its page WARC in memory (it joins the
	// job's WARC below as its file would have) and its parsed page for the
	// parsing hooks after it.
	mem := &memWARCs{m: map[string][]byte{}}
	ctx = builtin.WithCrawlPage(ctx, mem.keep)
	// The page's fetches take their hosts' turns (in-process built-ins:
	// hostbudget.PageFrom), and the budget may postpone or fail the page.
	ctx, budget := hostbudget.WithPage(ctx, e.cfg.Hosts)
	inv := func(h activities.HookSpec) invocation {
		return invocation{job: job, hook: h, settings: settings, attempt: p.Attempt, snapDir: dir,
			crawlDir: e.crawlDir(cr.Job.Ident), depth: p.Depth}
	}
	specs, hooks, bad := runnable(plan)
	if len(bad) > 0 {
		return activities.PageOutcome{}, fmt.Errorf("page plugin %s: %s: %w", bad[0].Plugin, bad[0].ConfigError, activities.ErrConfig)
	}
	results.skip(plan)
	out := activities.PageOutcome{Status: activities.PageFailed}
	var (
		mu        sync.Mutex // guards out, succeeded, notRun, configErr, kept
		succeeded bool
		configErr error
		hl        = make([]hookLinks, len(specs))
		kept      = make([]bool, len(specs))
	)
	// The page's hooks run one at a time in plan order (pages run in
	// parallel, their hooks do not); background hooks live until the page
	// ends; a step with a hook to retry is the page's last.
	steprun.Run(ctx, hooks, e.readiness(steprun.Policy{}, specs, log), func(ctx context.Context, i int, ready func()) steprun.Class {
		h := specs[i]
		res, err := e.runPageHook(ctx, inv(h), recs, &hl[i], ready)
		results.add(h, res, err)
		class := steprun.Classify(steprun.Ending{Err: err, ConfigErr: errors.Is(err, activities.ErrConfig),
			Transient: res.Transient, Cancelled: ctx.Err() != nil, Background: h.Background})
		mu.Lock()
		defer mu.Unlock()
		if h.Background {
			if err != nil {
				log.Warn("page background hook did not run", logging.Hook(h.Key()), zap.Error(err))
			}
			kept[i] = true // its links, when it ended with a final status (runPageHook)
			return class
		}
		switch class {
		case steprun.Config:
			configErr = err
		case steprun.Retry, steprun.Cancelled:
			if out.Status != activities.PageTransient {
				out.Status, out.Note = activities.PageTransient, h.Name+": "+res.TransientReason()
				if err != nil {
					out.Note = err.Error()
				}
				notRun = "not run: " + h.Name + " failed transiently, the page is tried again"
			}
		default:
			kept[i] = true
			switch res.Status {
			case model.StatusSucceeded:
				succeeded = true
			case model.StatusFailed:
				if out.Note == "" {
					out.Note = h.Name + ": " + res.ArchiveResult().Error
				}
			}
		}
		return class
	})
	if configErr != nil {
		return activities.PageOutcome{}, configErr
	}
	var links []activities.Discovered
	for _, bg := range []bool{false, true} {
		for i, h := range specs {
			if kept[i] && h.Background == bg {
				links = append(links, hl[i].links...)
			}
		}
	}
	if !succeeded && out.Note == "" {
		// A page none of whose hooks could run here says why.
		for _, h := range plan.Hooks {
			if h.SkipReason != "" {
				out.Note = h.Name + ": skipped: " + h.SkipReason
				break
			}
		}
	}
	if out.Status != activities.PageTransient && succeeded {
		out.Status, out.Note = activities.PageSucceeded, ""
	}
	switch v := budget.Verdict(); {
	case v.Fail:
		out.Status, out.Note = activities.PageFailed, v.Note
	case v.Postpone:
		out.Status, out.Note, out.NotBefore = activities.PagePostponed, v.Note, v.NotBefore
	}
	out.Responses = recs.responses
	if recs.dropped > 0 {
		log.Warn("page responses over the cap not counted", zap.Int("dropped", recs.dropped))
	}
	if max := cr.MaxLinks; max > 0 && len(links) > max {
		out.LinksDropped = len(links) - max
		links = links[:max]
		log.Warn("page links over crawl.max_links_per_page dropped", zap.Int("dropped", out.LinksDropped))
		recs.notice(linksCut(p.URL, out.LinksDropped, max))
	}
	out.Notices = recs.notices
	out.Cuts = recs.cutCount
	if len(recs.cuts) > 0 && out.Status == activities.PageSucceeded {
		// A page archived incompletely says so in its note.
		out.Note = "cut: " + strings.Join(recs.cuts, "; ")
	}
	out.Links = links
	out.Results = results.finals()
	list := results.list(plan, notRun)
	if err := e.writePageIndex(dir, job, p, out, list); err != nil {
		log.Warn("write the page's index", zap.Error(err))
	}
	// The page's captures (a screenshot...) join its WARCs, and with them
	// the job's WARC.
	_, cw, err := jobwacz.WriteCaptures(dir, p.URL, list, e.cfg.Captures)
	for _, s := range cw.Skipped {
		log.Warn("a capture left out of the captures WARC", zap.String("capture", s))
	}
	if err != nil {
		log.Warn("write the page's captures WARC", zap.Error(err))
	}
	if err := e.collectWARCs(cr.Job.Ident, dir, mem.take()); err != nil {
		log.Warn("append page WARC to the job's WARC", zap.Error(err))
	}
	return out, nil
}

// runPageHook runs one attempt of a page hook (attempt; a built-in that
// starts no process may run in this process: Config.InProcessBuiltins).
func (e *Engine) runPageHook(ctx context.Context, inv invocation, recs *pageRecords, hl *hookLinks, ready func()) (procs.Result, error) {
	inv.inProcessOK = true
	res, err := e.attempt(ctx, inv, attemptIO{onReady: ready, onRecord: func(r jsonl.Record) {
		switch {
		case r.Response != nil:
			recs.response(*r.Response)
		case r.Snapshot != nil && !r.Snapshot.IsUpdate():
			hl.add(*r.Snapshot)
		}
	}, onStderr: recs.notice})
	if err != nil {
		return res, err
	}
	if res.Transient {
		hl.links = nil // only a final attempt's links count
	}
	return res, nil
}

// SeedRecords reads what the start page's snapshot left on this worker
// (activities.PageRunner): the Snapshot records of the last attempt of
// each hook in.Hooks names, the Response records of every attempt of every
// hook, and its WARC files, which join the job's WARC of this worker.
func (e *Engine) SeedRecords(ctx context.Context, in activities.SeedPageInput) (activities.SeedRecords, error) {
	snapDir, err := e.snapDir(in.Crawl.Job.SnapshotID)
	if err != nil {
		return activities.SeedRecords{}, fmt.Errorf("%w: %w", err, activities.ErrConfig)
	}
	if _, err := os.Stat(snapDir); err != nil {
		return activities.SeedRecords{}, fmt.Errorf("start page snapshot dir %s: %w", snapDir, err)
	}
	if in.Transient {
		// The start page runs again later: this attempt's records and
		// WARC files move aside first (a repeat finds the records
		// there), so the next attempt's count only its own.
		if snapDir, err = keepAttempt(snapDir, in.Page.Attempt); err != nil {
			return activities.SeedRecords{}, err
		}
	}
	attempts := allAttempts(snapDir)
	last := map[string]string{} // each hook's (PLUGIN/STEM) newest stdout log
	for _, a := range attempts {
		last[a.key] = a.path
	}
	var out activities.SeedRecords
	wanted := map[string]bool{}
	for _, k := range in.Hooks {
		plugin, name, _ := strings.Cut(k, "/")
		wanted[plugin+"/"+strings.TrimSuffix(name, filepath.Ext(name))] = true
	}
	for _, a := range attempts {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		final := wanted[a.key] && last[a.key] == a.path
		err := readRecords(a.path, func(r jsonl.Record) {
			switch {
			case r.Response != nil:
				out.Responses = append(out.Responses, *r.Response)
			case r.Snapshot != nil && !r.Snapshot.IsUpdate() && final:
				if in.Crawl.MaxLinks > 0 && len(out.Links) >= in.Crawl.MaxLinks {
					out.LinksDropped++
					return
				}
				out.Links = append(out.Links, activities.Discovered{URL: r.Snapshot.URL})
			}
		})
		if err != nil {
			return out, err
		}
	}
	if out.LinksDropped > 0 {
		e.log.Warn("start page links over crawl.max_links_per_page dropped", logging.Ident(in.Crawl.Job.Ident),
			zap.Int("dropped", out.LinksDropped))
		out.Notices = append(out.Notices, linksCut(in.Page.URL, out.LinksDropped, in.Crawl.MaxLinks))
	}
	// A kept attempt's WARC files leave it once in the job's WARC, as a
	// page attempt's do; the last attempt's stay in the snapshot: a repeat
	// appends neither again (AppendedFile).
	if err := e.appendSeedWARCs(in.Crawl.Job.Ident, snapDir, in.Transient); err != nil {
		return out, fmt.Errorf("append the start page's WARC: %w", err)
	}
	return out, nil
}

// attemptFile is one attempt's stdout log: key is PLUGIN/STEM.
type attemptFile struct {
	key, path string
	mod       time.Time
}

// allAttempts lists the stdout logs under snapDir/PLUGIN/, oldest first.
func allAttempts(snapDir string) []attemptFile {
	var out []attemptFile
	plugins, _ := os.ReadDir(snapDir)
	for _, p := range plugins {
		if !p.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(snapDir, p.Name()))
		for _, f := range files {
			rf, ok := procs.ParseRunnerFile(f.Name())
			if !ok || rf.Suffix != procs.SuffixStdout {
				continue
			}
			info, err := f.Info()
			if err != nil {
				continue
			}
			out = append(out, attemptFile{key: p.Name() + "/" + rf.Stem, path: filepath.Join(snapDir, p.Name(), f.Name()), mod: info.ModTime()})
		}
	}
	slices.SortStableFunc(out, func(a, b attemptFile) int { return a.mod.Compare(b.mod) })
	return out
}

// readRecords parses a stdout log's records with the hook contract's rules.
func readRecords(path string, fn func(jsonl.Record)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read records of %s: %w", path, err)
	}
	defer f.Close()
	sp := &jsonl.Splitter{Emit: func(line []byte, truncated bool) {
		if truncated {
			return
		}
		if r, err := jsonl.ParseLine(line); err == nil {
			fn(r)
		}
	}}
	if _, err := io.Copy(sp, f); err != nil {
		return fmt.Errorf("read records of %s: %w", path, err)
	}
	sp.Flush()
	return nil
}

// collectWARCs appends every *.warc.gz below dir, and the page WARCs
// kept in memory (mem, by the path their file would have had), in path
// order, to the crawl's WARC of this worker, and deletes the files: they
// are in the job's WARC now.
func (e *Engine) collectWARCs(ident, dir string, mem map[string][]byte) error {
	files, err := listWARCs(dir)
	if err != nil {
		return err
	}
	for path, data := range mem {
		if len(data) > 0 && !slices.Contains(files, path) {
			files = append(files, path)
		}
	}
	if len(files) == 0 {
		return nil
	}
	slices.Sort(files)
	if err := e.warcs.appendWARCs(e, ident, files, mem); err != nil {
		return err
	}
	for _, f := range files {
		if _, ok := mem[f]; !ok {
			_ = os.Remove(f)
		}
	}
	return nil
}

// listWARCs lists the WARC files below dir, not those of its earlier
// attempts (AttemptsDir), in walk order; none when dir is gone.
func listWARCs(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() && path == filepath.Join(dir, AttemptsDir) {
			return filepath.SkipDir // earlier attempts' files were collected then
		}
		if d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".warc.gz") {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// memWARCs are the page WARCs a page's in-process hooks kept in memory
// (builtin.WithCrawlPage), by path; one kept after take is dropped.
type memWARCs struct {
	mu    sync.Mutex
	m     map[string][]byte
	taken bool
}

func (w *memWARCs) keep(path string, data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.taken {
		w.m[path] = data
	}
}

func (w *memWARCs) take() map[string][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.taken = true
	return w.m
}

// linksCut is the cut notice of a page whose links over
// crawl.max_links_per_page (max) were dropped: the page's note and the
// job's log say so, for a start page as for any other.
func linksCut(url string, dropped, max int) string {
	return fmt.Sprintf("%spage %s: %d of its %d links dropped: more than crawl.max_links_per_page (%d)",
		jsonl.CutPrefix, url, dropped, dropped+max, max)
}
