package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/pageindex"
	"github.com/archiveflow/archiveflow/internal/procs"
	"github.com/archiveflow/archiveflow/internal/snapindex"
)

// A crawl page keeps its records as a snapshot does, one result per hook
// of each attempt: a line per attempt in the crawl's page index of this
// host (internal/pageindex, archivedir.PageIndex), written without a file or a
// directory of the page's own. A page whose hooks wrote files has a page
// directory (archivedir.Page, its SNAP_DIR, created by the first hook that writes
// there); the attempt's index.json/index.jsonl go there too
// (internal/snapindex), and, when the page runs again on the same host,
// the earlier attempt's outputs and index move to attempts/N.

// AttemptsDir is the page directory's folder of earlier attempts.
const AttemptsDir = "attempts"

// pageIndexes are the page index writers of this worker's crawls, one
// file per crawl: archivedir.PageIndex/INSTANCE.jsonl.
type pageIndexes struct{ perCrawl[*pageindex.Writer] }

// close closes a crawl's page index file (its crawl ended on this worker).
func (x *pageIndexes) close(ident string) error {
	if w, ok := x.take(ident); ok {
		return w.Close()
	}
	return nil
}

// pageResults collects one page attempt's hook results (foreground and
// background hooks alike).
type pageResults struct {
	attempt int
	mu      sync.Mutex
	byKey   map[string]model.ArchiveResult
	final   []string // keys of the hooks that ended with a final status, in the order they ended
}

// add records how hook h's run ended: its result, a transient failure as
// failed with the reason (the page is retried), or the error that kept it
// from running.
func (r *pageResults) add(h activities.HookSpec, res procs.Result, runErr error) {
	ar := res.ArchiveResult()
	switch {
	case runErr != nil:
		ar = model.ArchiveResult{Status: model.StatusFailed, Error: runErr.Error()}
	case res.Transient:
		ar.Status = model.StatusFailed
		ar.Error = "transient, the page is tried again: " + res.TransientReason()
	}
	ar.Plugin, ar.Hook, ar.Step, ar.Background, ar.Attempts = h.Plugin, h.Name, h.Step, h.Background, r.attempt
	r.mu.Lock()
	r.byKey[h.Key()] = ar
	if runErr == nil && !res.Transient {
		r.final = append(r.final, h.Key())
	}
	r.mu.Unlock()
}

// skip records the hooks of plan that discovery said cannot run here
// (SkipReason) as final skipped results with that reason.
func (r *pageResults) skip(plan activities.Plan) {
	now := time.Now()
	for _, h := range plan.Hooks {
		if h.SkipReason == "" {
			continue
		}
		r.mu.Lock()
		r.byKey[h.Key()] = model.ArchiveResult{Plugin: h.Plugin, Hook: h.Name, Step: h.Step, Background: h.Background,
			Status: model.StatusSkipped, OutputStr: h.SkipReason, Attempts: r.attempt, StartedAt: now, EndedAt: now}
		r.final = append(r.final, h.Key())
		r.mu.Unlock()
	}
}

// finals are the results of the hooks that ended with a final status in
// this attempt, in the order they ended.
func (r *pageResults) finals() []model.ArchiveResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]model.ArchiveResult, 0, len(r.final))
	for _, k := range r.final {
		out = append(out, r.byKey[k])
	}
	return out
}

// list returns a result per hook of plan, in plan order: a hook that did
// not run in this attempt says why.
func (r *pageResults) list(plan activities.Plan, why string) []model.ArchiveResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []model.ArchiveResult
	for _, h := range plan.Hooks {
		if h.Launch() == activities.LaunchSkip && h.SkipReason == "" {
			continue // disabled: the page plugin set says which run
		}
		ar, ok := r.byKey[h.Key()] // a hook with a SkipReason has one (skip)
		if !ok {
			ar = model.ArchiveResult{Plugin: h.Plugin, Hook: h.Name, Step: h.Step, Background: h.Background,
				Status: model.StatusSkipped, OutputStr: why, Attempts: r.attempt}
		}
		out = append(out, ar)
	}
	return out
}

// keepEarlierAttempt moves what an earlier attempt of the page left in dir
// on this host (its plugins' outputs and its index) into dir/attempts/N,
// N the attempt its index names, so a retry never overwrites it. Without
// an index (an attempt interrupted before its end: the worker died, the
// activity runs the same attempt again) or with this attempt's own index,
// nothing moves.
func keepEarlierAttempt(dir string, attempt int) error {
	_, results, err := snapindex.Read(dir)
	if err != nil || len(results) == 0 {
		return nil
	}
	if prev := results[0].Attempts; prev > 0 && prev < attempt {
		_, err = keepAttempt(dir, prev)
	}
	return err
}

// keepAttempt moves everything in dir but its attempts folder into
// dir/attempts/N and returns that directory; repeating it moves what came
// since (nothing, for a repeated activity).
func keepAttempt(dir string, n int) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("keep the page's attempt %d: %w", n, err)
	}
	dst := filepath.Join(dir, AttemptsDir, strconv.Itoa(n))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", fmt.Errorf("keep the page's attempt %d: %w", n, err)
	}
	for _, e := range entries {
		if e.Name() == AttemptsDir {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return "", fmt.Errorf("keep the page's attempt %d: %w", n, err)
		}
	}
	return dst, nil
}

// writePageIndex records the page attempt: the page as a snapshot
// (finished when it succeeded, failed otherwise, with the page's note) and
// one result per hook, as a line of the crawl's page index, and as
// index.json/index.jsonl in its page directory when it has one (a hook
// wrote files there: keepEarlierAttempt reads which attempt they are).
func (e *Engine) writePageIndex(dir string, job activities.Job, p activities.PageSpec, out activities.PageOutcome, results []model.ArchiveResult) error {
	state := model.StateFailed
	if out.Status == activities.PageSucceeded {
		state = model.StateFinished
	}
	snap := snapindex.Snapshot{ID: job.SnapshotID, URL: p.URL, Page: p.ID, Depth: p.Depth, State: state,
		Error: out.Note, SealedAt: time.Now()}
	w, _ := e.indexes.get(job.Ident, func() *pageindex.Writer {
		return pageindex.NewWriter(archivedir.PageIndex(e.cfg.ArchiveDir, job.Ident), archivedir.Name(e.cfg.Instance))
	})
	err := w.Append(snap, results)
	if _, serr := os.Lstat(dir); serr == nil {
		_, derr := snapindex.Write(dir, snap, results)
		err = errors.Join(err, derr)
	}
	return err
}
