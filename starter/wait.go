package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/workflows"
)

// progress is one job's progress as --wait shows it.
type progress struct {
	State     model.JobState `json:"state"`
	Step      int            `json:"current_step"`
	HooksDone int64          `json:"hooks_done"`
	Hooks     int64          `json:"hooks_total"`
	Bytes     int64          `json:"bytes_downloaded"`
	// Crawl: the job is a crawl, whose progress is its pages (a crawl
	// has no step, and its hook counters are its start page's).
	Crawl bool `json:"crawl,omitempty"`
	// PagesDone and Pages are a crawl's pages done and known (the
	// frontier's counts); Items its items_downloaded.
	PagesDone int64 `json:"pages_done,omitempty"`
	Pages     int64 `json:"pages_total,omitempty"`
	Items     int64 `json:"items_downloaded,omitempty"`
}

// started reports that the job has something to show: a snapshot once
// its hooks are discovered, a crawl once its frontier has a page.
func (p progress) started() bool {
	if p.Crawl {
		return p.Pages > 0
	}
	return p.Hooks > 0
}

// moved reports that p says something last did not: another step, or
// other pages done.
func (p progress) moved(last progress) bool {
	if p.Crawl {
		return p.PagesDone != last.PagesDone || p.Pages != last.Pages
	}
	return p.Step != last.Step
}

// line is the progress in words, after the job's state, its parts
// separated by sep.
func (p progress) line(sep string) string {
	if p.Crawl {
		return strings.Join([]string{"crawl", fmt.Sprintf("pages %d/%d done", p.PagesDone, p.Pages),
			fmt.Sprintf("%d items", p.Items), humanBytes(p.Bytes)}, sep)
	}
	return strings.Join([]string{fmt.Sprintf("step %d/9", p.Step), fmt.Sprintf("hooks %d/%d", p.HooksDone, p.Hooks),
		humanBytes(p.Bytes)}, sep)
}

func progressOf(v rkeys.JobView) progress {
	return progress{
		State: v.State, Step: v.CurrentStep, Hooks: v.HooksTotal, Bytes: v.BytesDownloaded,
		HooksDone: v.HooksDone(),
	}
}

// outcome is how a waited-for job ended.
type outcome struct {
	submitted
	State     model.JobState     `json:"state"`
	Error     string             `json:"error,omitempty"`
	Counters  *workflowsCounters `json:"counters,omitempty"`
	Elapsed   time.Duration      `json:"elapsed_ns"`
	OutputDir string             `json:"output_dir"`
	// HostQueue is the host queue of the worker that ran the hooks: the
	// output dir is on that host.
	HostQueue string `json:"host_queue,omitempty"`
	// WACZ is where the seal wrote the job's WACZ (read from Redis once
	// the job is final).
	WACZ *waczJSON `json:"wacz,omitempty"`
	// Crawl is a crawl's pages and counters once it ended (from the
	// frontier and the job hash, as status shows them): a crawl's
	// workflow result has no hook counters of its own.
	Crawl *crawlJSON `json:"crawl,omitempty"`
	hooksView
}

// workflowsCounters aliases the workflow's counters for JSON output.
type workflowsCounters = struct {
	Total     int   `json:"hooks_total"`
	Succeeded int   `json:"hooks_succeeded"`
	Failed    int   `json:"hooks_failed"`
	Skipped   int   `json:"hooks_skipped"`
	NoResults int   `json:"hooks_noresults"`
	Bytes     int64 `json:"output_bytes"`
}

type result struct {
	idx int
	st  workflows.Status
	err error
}

// waitJobs follows the jobs until each ends (a live view on a terminal,
// progress lines otherwise), shows each one's results table (with --json:
// writes them all), and returns exit 1 when any did not finish
// successfully.
func (a *app) waitJobs(ctx context.Context, inv *invocation, b *backend.Backend, jobs []submitted) error {
	outcomes, err := a.followJobs(ctx, inv, b, jobs)
	if outcomes == nil {
		return err
	}
	if inv.json {
		if err := writeJSON(a.stdout, map[string]any{"jobs": outcomes}); err != nil {
			return err
		}
	}
	return err
}

// followJobs is the one way a command waits for jobs (submit --wait,
// retry --wait, unabort --wait): it follows them until each ends, shows
// each one's end as text unless --json, and returns their outcomes and
// exit 1 when any did not finish successfully. Outcomes are nil when the
// wait was stopped before every job ended.
func (a *app) followJobs(ctx context.Context, inv *invocation, b *backend.Backend, jobs []submitted) ([]*outcome, error) {
	start := a.now()
	results := make(chan result, len(jobs))
	for i, j := range jobs {
		go func() {
			st, err := awaitEnd(ctx, func(ctx context.Context, st *workflows.Status) error {
				return b.Temporal.GetWorkflow(ctx, j.WorkflowID, j.RunID).Get(ctx, st)
			}, a.pollInterval)
			if end, ok := workflows.EndStatus(err); ok {
				// A failed or aborted job ends its workflow so, its Status
				// in the error's details.
				st, err = end, nil
			}
			results <- result{idx: i, st: st, err: err}
		}()
	}
	rep := a.newReporter(inv, b, jobs)
	defer rep.close()
	outcomes := make([]*outcome, len(jobs))
	tick := time.NewTicker(a.pollInterval)
	defer tick.Stop()
	stopped := func() ([]*outcome, error) {
		rep.close()
		return nil, withCode(exitStillActive, fmt.Errorf("stopped waiting (%v); the jobs keep running: follow them with starter status IDENT", context.Cause(ctx)))
	}
	for remaining := len(jobs); remaining > 0; {
		select {
		case <-ctx.Done():
			return stopped()
		case r := <-results:
			if ctx.Err() != nil {
				// The wait was stopped, not the job: whatever the wait
				// returned then says nothing of how the job ends.
				return stopped()
			}
			remaining--
			o := a.outcomeOf(ctx, inv, b, jobs[r.idx], r, a.now().Sub(start))
			outcomes[r.idx] = o
			rep.finished(r.idx, o)
		case <-tick.C:
			rep.progress(ctx, a.now().Sub(start))
		}
	}
	rep.close()
	failed := 0
	for _, o := range outcomes {
		if o.State != model.StateFinished {
			failed++
		}
	}
	if failed > 0 {
		return outcomes, withCode(exitJobFailed, fmt.Errorf("%d of %d job(s) did not finish successfully", failed, len(jobs)))
	}
	return outcomes, nil
}

// awaitEnd waits until one job's workflow has ended and returns what get
// (the workflow's result) said then. A wait the server or the network cut
// short (a long poll past its deadline, the server unavailable for a
// moment) is not an end: get is asked again after retryAfter, as long as
// ctx lasts, so a job still running is never reported as ended.
func awaitEnd(ctx context.Context, get func(context.Context, *workflows.Status) error, retryAfter time.Duration) (workflows.Status, error) {
	for {
		var st workflows.Status
		err := get(ctx, &st)
		switch {
		case err == nil:
			return st, nil
		case ctx.Err() != nil:
			return st, ctx.Err() // the wait was interrupted, not the job
		case !waitCutShort(err):
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(retryAfter):
		}
	}
}

// waitCutShort reports an error of waiting for a workflow's result that
// says nothing about the workflow: a deadline or cancellation of the call
// itself, or the server briefly unavailable. A workflow that ended
// (failed, canceled, terminated, timed out) is an error of another kind.
func waitCutShort(err error) bool {
	var ended *temporal.WorkflowExecutionError
	var canceled *temporal.CanceledError
	var terminated *temporal.TerminatedError
	var timedOut *temporal.TimeoutError
	if errors.As(err, &ended) || errors.As(err, &canceled) || errors.As(err, &terminated) || errors.As(err, &timedOut) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	code := status.Code(err)
	var se serviceerror.ServiceError
	if errors.As(err, &se) {
		code = se.Status().Code()
	}
	switch code {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// outcomeOf turns a workflow result into an outcome. A workflow that
// ended with an error (a failed or aborted job) still has its Status: as
// the error's details, or by querying the closed workflow.
func (a *app) outcomeOf(ctx context.Context, inv *invocation, b *backend.Backend, j submitted, r result, elapsed time.Duration) *outcome {
	dir := archivedir.Snapshot(inv.cfg.ArchiveDir, j.Ident)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	o := &outcome{submitted: j, Elapsed: elapsed, OutputDir: dir}
	st := r.st
	if r.err != nil {
		o.State = model.StateFailed
		var canceled *temporal.CanceledError
		var terminated *temporal.TerminatedError
		if errors.As(r.err, &canceled) || errors.As(r.err, &terminated) {
			o.State = model.StateAborted
		}
		o.Error = r.err.Error()
		var ok bool
		if st, ok = statusFromError(r.err); !ok {
			var qerr error
			st, qerr = queryStatus(ctx, b.Temporal, j.WorkflowID, j.RunID, statusQueryTimeout)
			ok = qerr == nil && st.State.Final()
		}
		if !ok {
			return o
		}
	}
	o.State = st.State
	if st.Error != "" || r.err == nil {
		o.Error = st.Error
	}
	o.HostQueue = st.HostQueue
	o.Counters = &workflowsCounters{
		Total: st.Counters.Total, Succeeded: st.Counters.Succeeded, Failed: st.Counters.Failed,
		Skipped: st.Counters.Skipped, NoResults: st.Counters.NoResults, Bytes: st.Counters.OutputSize,
	}
	o.hooksView = hooksViewOf(st)
	if v, err := b.Store.GetJob(ctx, j.Ident); err == nil {
		o.WACZ = toWACZJSON(v.Archive)
		o.OutputDir = filesDir(o.OutputDir, o.WACZ)
		if v.FetchDepth == model.FetchInf {
			// Unread (nil), the outcome says only how the crawl ended.
			o.Crawl, _ = jobCrawl(ctx, b, v)
		}
	}
	return o
}

// printOutcome prints how a job ended, its hooks table, where its files
// are (and the index page to open) and its Web UI link; width cuts the
// table's lines (0: not a terminal).
func (a *app) printOutcome(o *outcome, width int) {
	line := fmt.Sprintf("%s  %s  %s in %s", o.Ident, strings.ToUpper(string(o.State)), o.URL, shortDuration(o.Elapsed))
	if c := o.Crawl; c != nil {
		p := c.Pages
		line += fmt.Sprintf(" — pages: %d done (%d succeeded, %d failed), %d skipped; %d items, %s downloaded",
			p.Done, p.Succeeded, p.Failed, p.Skipped, c.ItemsDownloaded, humanBytes(c.Bytes))
	} else if c := o.Counters; c != nil {
		line += fmt.Sprintf(" — hooks: %d total, %d succeeded", c.Total, c.Succeeded)
		for _, n := range []struct {
			n    int
			what string
		}{{c.NoResults, "noresults"}, {c.Skipped, "skipped"}, {c.Failed, "failed"}} {
			if n.n > 0 {
				line += fmt.Sprintf(", %d %s", n.n, n.what)
			}
		}
		line += "; " + humanBytes(c.Bytes) + " of output"
	}
	fmt.Fprintln(a.stdout, line)
	if len(o.Hooks) > 0 {
		writeHookTable(a.stdout, o.Hooks, o.Hints, width)
	}
	if o.Error != "" {
		fmt.Fprintf(a.stdout, "  error:   %s\n", oneLine(o.Error))
	}
	fmt.Fprintf(a.stdout, "  files:   %s\n", filesLine(o.OutputDir, o.workerHost()))
	if o.Crawl != nil {
		fmt.Fprintf(a.stdout, "  pages:   starter pages %s  (a page's hooks: --url URL)\n", o.Ident)
	}
	if z := o.WACZ; z != nil && z.File != "" {
		fmt.Fprintf(a.stdout, "  wacz:    %s  (starter replay %s)\n", z.File, o.Ident)
	} else if z != nil {
		fmt.Fprintf(a.stdout, "  wacz:    not written: %s\n", oneLine(z.Error))
	}
	if o.UI != "" {
		fmt.Fprintf(a.stdout, "  Web UI:  %s\n", o.UI)
	}
}

// indexPages are the pages that present a snapshot, best first, relative
// to its directory.
var indexPages = []string{"index.html", filepath.Join("index", "index.html")}

// workerHost names the worker host that has the job's files: the one
// that sealed its WACZ, else the one whose host queue ran its hooks.
func (o *outcome) workerHost() string {
	switch {
	case o.WACZ != nil && o.WACZ.Host != "":
		return "worker host " + o.WACZ.Host
	case o.HostQueue != "":
		return "the worker host of " + o.HostQueue
	}
	return "the worker host that ran the job"
}

// filesDir is where a job's files are: local, its directory under this
// host's archive dir, when this host has it; else (another host, or
// another archive_dir) the directory its seal wrote its WACZ z in, on
// that worker host; else local still.
func filesDir(local string, z *waczJSON) string {
	if z == nil || z.File == "" || exists(local) {
		return local
	}
	return filepath.Dir(z.File)
}

// exists reports whether path exists on this host.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// filesLine says where a job's files are: the directory and the index
// page to open when this host has them, else on which worker host.
func filesLine(dir, host string) string {
	if !exists(dir) {
		return dir + " on " + host
	}
	for _, p := range indexPages {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return fmt.Sprintf("%s  (open %s)", dir, p)
		}
	}
	return dir
}
