package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/jobctl"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/workflows"
)

// controlTimeout bounds a query, signal or update: they need a worker.
const controlTimeout = time.Minute

// oneIdent returns the command's single IDENT argument; a URL is accepted
// and turned into its ident.
func oneIdent(inv *invocation) (string, error) {
	if len(inv.args) != 1 {
		return "", usageErr("want exactly one IDENT (or URL), got %d argument(s) (see: starter help %s)", len(inv.args), inv.cmd.name)
	}
	return parseIdent(inv.args[0])
}

// parseIdent validates an ident (lower-case base36, as ArchiveBot's) or
// derives it from a URL.
func parseIdent(raw string) (string, error) {
	if strings.Contains(raw, "://") {
		id, _, err := ident.FromURL(raw)
		if err != nil {
			return "", withCode(exitUsage, err)
		}
		return id, nil
	}
	if raw == "" || len(raw) > 25 {
		return "", usageErr("ident %q: must be 1-25 characters of 0-9 and a-z (or a http(s) URL)", raw)
	}
	for _, r := range raw {
		if (r < '0' || r > '9') && (r < 'a' || r > 'z') {
			return "", usageErr("ident %q: must be 1-25 characters of 0-9 and a-z (or a http(s) URL)", raw)
		}
	}
	return raw, nil
}

// jobNotFound says Redis has no job id; it is rkeys.ErrJobNotFound. why,
// when set, says what Temporal's record tells of the job (notInRedis).
type jobNotFound struct{ id, why string }

func (e jobNotFound) Error() string {
	if e.why != "" {
		return e.why
	}
	return fmt.Sprintf("job %s: not found in Redis (never submitted, or expired after its retention)", e.id)
}

func (jobNotFound) Is(target error) bool { return target == rkeys.ErrJobNotFound }

// getJob reads a job: not found is exit 3, other failures exit 5.
func getJob(ctx context.Context, b *backend.Backend, id string) (rkeys.JobView, error) {
	v, err := b.Store.GetJob(ctx, id)
	if errors.Is(err, rkeys.ErrJobNotFound) {
		return v, withCode(exitNotFound, jobNotFound{id: id})
	}
	if err != nil {
		return v, withCode(exitUnavailable, err)
	}
	return v, nil
}

// paused says that a paused job (jobJSON.Paused: submit --concurrency 0,
// or set) runs nothing, and how to resume it.
func paused(j jobJSON) string {
	if !j.Paused {
		return ""
	}
	return fmt.Sprintf(", paused: concurrency 0 runs nothing (starter set %s concurrency=N resumes it)", j.Ident)
}

// liveJob reads a job that must not be final (exit 4 when it is).
func liveJob(ctx context.Context, b *backend.Backend, id, what string) (rkeys.JobView, error) {
	v, err := getJob(ctx, b, id)
	if err != nil {
		return v, err
	}
	if v.Final() {
		return v, withCode(exitConflict, fmt.Errorf("job %s (%s) is already %s: cannot %s", id, v.URL, v.State, what))
	}
	return v, nil
}

// temporalErr classifies an error of a call on a job's workflow.
func temporalErr(id, what string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return withCode(exitNotFound, fmt.Errorf("%s job %s: no running workflow with this ident in Temporal: %w", what, id, err))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return withCode(exitUnavailable, fmt.Errorf("%s job %s: no answer within %s (is a worker of its pool running?): %w", what, id, controlTimeout, err))
	}
	return withCode(exitUnavailable, fmt.Errorf("%s job %s: %w", what, id, err))
}

// ---- status ----

func statusCommand() *command {
	return &command{
		name:    "status",
		args:    "IDENT",
		summary: "show one job: state, step, bytes, settings, Web UI link, each hook's result; a crawl's pages by state and depth",
		details: `
IDENT may also be the job's URL. Reads the Redis job hash (and a crawl's
frontier: pages by state and by depth), then asks the job's workflow for
each hook's result (step, status, attempts, duration, output or error; for
skipped hooks the reason); for a crawl these are the start page's hooks
(its workflow IDENT/seed). Temporal answers for a finished job too while
it retains the workflow. When Temporal cannot answer, the per-hook table
is left out and the reason is said; the counts come from Redis. Once the
job's hash has expired (redis.retain_*: an aborted job's after 5 s) or was
purged, status prints Temporal's record of its workflow instead, and says
so ("source": "temporal" in --json; fields only Redis keeps, such as
bytes, nice and the WACZ, are then absent or zero); exit 3 when neither
has the job.`,
		examples: []string{
			"starter status 3mlbkdu1fpo7wt4lr2qf1mpsw",
			"starter status https://example.com/ --json",
		},
		run: runStatus,
	}
}

// jobJSON is the --json form of a job.
type jobJSON struct {
	Ident          string         `json:"ident"`
	URL            string         `json:"url"`
	State          model.JobState `json:"state"`
	CurrentStep    int            `json:"current_step"`
	HooksTotal     int64          `json:"hooks_total"`
	HooksSucceeded int64          `json:"hooks_succeeded"`
	HooksFailed    int64          `json:"hooks_failed"`
	HooksSkipped   int64          `json:"hooks_skipped"`
	HooksNoResults int64          `json:"hooks_noresults"`
	Bytes          int64          `json:"bytes_downloaded"`
	Settings       model.Settings `json:"settings"`
	Nice           int            `json:"nice"`
	FetchDepth     string         `json:"fetch_depth"`
	TaskQueue      string         `json:"task_queue"`
	WorkflowID     string         `json:"workflow_id"`
	RunID          string         `json:"run_id,omitempty"`
	PipelineID     string         `json:"pipeline_id,omitempty"`
	QueuedAt       time.Time      `json:"queued_at,omitzero"`
	StartedAt      time.Time      `json:"started_at,omitzero"`
	FinishedAt     time.Time      `json:"finished_at,omitzero"`
	ExpiresIn      string         `json:"expires_in,omitempty"`
	UI             string         `json:"ui,omitempty"`
	hooksDone      int64          // rkeys.JobView.HooksDone
	// Limit names the limit a crawl finished at (rkeys.FieldLimit).
	Limit string `json:"limit,omitempty"`
	// RetryAt: the running job only waits for a later retry, due then
	// (rkeys.JobView.RetryAt); shown as waiting (jobState).
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Title is the snapshot title a hook set; Tags the names of the
	// hooks' Tag records (ArchiveBox's tags, not submit --tag's worker
	// tag); UnknownRecords counts their records of an unknown type.
	Title          string   `json:"title,omitempty"`
	Tags           []string `json:"tags,omitempty"`
	UnknownRecords int64    `json:"unknown_records,omitempty"`
	// FailedHooks are the job's hooks in failed_checks (list --failed).
	FailedHooks []string `json:"failed_hooks,omitempty"`
	// Crawl is a crawl's counters and pages (status only).
	Crawl *crawlJSON `json:"crawl,omitempty"`
	// WACZ is where the job's seal wrote its WACZ (status only).
	WACZ *waczJSON `json:"wacz,omitempty"`
	// Source is "temporal" when Redis no longer has the job and this is
	// Temporal's record of its workflow (statusFromTemporal), Note says
	// so, Error is how the workflow says the job ended and Pages a
	// crawl's page counts as its workflow last knew them.
	Source string `json:"source,omitempty"`
	// Paused: the job has not ended and its concurrency 0 runs nothing
	// (a missing concurrency is 1, as ArchiveBot's pipeline takes it).
	Paused bool                   `json:"paused,omitempty"`
	Note   string                 `json:"note,omitempty"`
	Error  string                 `json:"error,omitempty"`
	Pages  *activities.PageCounts `json:"pages,omitempty"`
	// hooksView (status only) is each hook's result from the workflow.
	hooksView
}

func toJSON(v rkeys.JobView, ui string) jobJSON {
	j := jobJSON{
		Ident: v.Ident, URL: v.URL, State: v.State, CurrentStep: v.CurrentStep,
		HooksTotal: v.HooksTotal, HooksSucceeded: v.HooksSucceeded, HooksFailed: v.HooksFailed,
		HooksSkipped: v.HooksSkipped, HooksNoResults: v.HooksNoResults, Bytes: v.BytesDownloaded,
		Settings: v.Settings, Nice: v.Nice, FetchDepth: v.FetchDepth, TaskQueue: v.TaskQueue, WorkflowID: v.WorkflowID,
		RunID: v.RunID, PipelineID: v.PipelineID, QueuedAt: v.QueuedAt, StartedAt: v.StartedAt,
		FinishedAt: v.FinishedAt, UI: ui, hooksDone: v.HooksDone(), Limit: v.Limit,
		Title: v.Title, Tags: v.Tags, UnknownRecords: v.UnknownRecords,
	}
	if v.TTL > 0 {
		j.ExpiresIn = v.TTL.Round(time.Second).String()
	}
	j.Paused = !v.State.Final() && v.Settings.Concurrency == 0 && v.Raw["concurrency"] != ""
	if !v.RetryAt.IsZero() && !v.State.Final() {
		at := v.RetryAt
		j.RetryAt = &at
	}
	return j
}

// waczJSON is a job's WACZ as its seal recorded it (rkeys.Archive).
type waczJSON struct {
	File    string `json:"file,omitempty"`
	Host    string `json:"host,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"`
	Error   string `json:"error,omitempty"`
	Missing int    `json:"missing_warcs,omitempty"`
}

func toWACZJSON(a rkeys.Archive) *waczJSON {
	if a.WACZ == "" && a.Error == "" {
		return nil
	}
	return &waczJSON{File: a.WACZ, Host: a.Host, Bytes: a.Bytes, Error: a.Error, Missing: a.Missing}
}

// printWACZ is status's wacz line.
func printWACZ(w io.Writer, z *waczJSON) {
	switch {
	case z == nil:
	case z.File == "":
		fmt.Fprintf(w, "  wacz:     not written at the seal: %s (starter export writes one)\n", z.Error)
	default:
		fmt.Fprintf(w, "  wacz:     %s (%s, on %s)\n", z.File, humanBytes(z.Bytes), z.Host)
		if z.Missing > 0 {
			fmt.Fprintf(w, "            %d WARC file(s) other worker hosts wrote are not in it: their archive dirs are not shared with %s (docs/operations.md, \"A job's WACZ\")\n", z.Missing, z.Host)
		}
	}
}

func runStatus(ctx context.Context, a *app, inv *invocation) error {
	id, err := oneIdent(inv)
	if err != nil {
		return err
	}
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	v, err := getJob(ctx, b, id)
	if errors.Is(err, rkeys.ErrJobNotFound) {
		return a.statusFromTemporal(ctx, inv, id, err)
	}
	if err != nil {
		return err
	}
	j := toJSON(v, uiLink(inv.cfg.Temporal, id))
	j.WACZ = toWACZJSON(v.Archive)
	hooksOf := v
	var also func(client.Client)
	if v.FetchDepth == model.FetchInf {
		if j.Crawl, err = jobCrawl(ctx, b, v); err != nil {
			return err
		}
		// A crawl's hooks table is its start page's: the seed snapshot.
		hooksOf.WorkflowID, hooksOf.RunID = workflows.CrawlSeedID(workflowID(v)), ""
		if j.Crawl != nil && j.Crawl.Pages.Claimed > 0 {
			also = func(tc client.Client) { j.Crawl.Running = pagesRunning(ctx, tc, workflowID(v)) }
		}
	}
	j.hooksView = a.statusHooks(ctx, inv, hooksOf, also)
	if inv.json {
		return writeJSON(a.stdout, j)
	}
	w := a.stdout
	fmt.Fprintf(w, "%s  %s\n", j.Ident, j.URL)
	if j.Title != "" {
		fmt.Fprintf(w, "  title:    %s\n", j.Title)
	}
	if len(j.Tags) > 0 {
		fmt.Fprintf(w, "  tags:     %s (the hooks' Tag records; starter list --tag T)\n", strings.Join(j.Tags, ", "))
	}
	if j.Crawl != nil {
		fmt.Fprintf(w, "  state:    %s (crawl)%s", jobState(j.State, j.RetryAt, true), paused(j))
		if j.Limit != "" {
			fmt.Fprintf(w, ": %s (starter retry %s --continue crawls on)", j.Limit, j.Ident)
		}
		fmt.Fprintln(w)
		if l := limitsLine(j.Settings); l != "" {
			fmt.Fprintf(w, "  limits:   %s\n", l)
		}
		printCrawl(w, j.Crawl)
	} else {
		fmt.Fprintf(w, "  state:    %s (step %d/9)%s\n", jobState(j.State, j.RetryAt, true), j.CurrentStep, paused(j))
	}
	if j.Crawl != nil {
		// The job hash counts the start page's hooks; the pages' own are
		// in the page index (starter pages --url).
		fmt.Fprintf(w, "  hooks:    %d of the start page done: %d succeeded, %d noresults, %d skipped, %d failed\n",
			j.hooksDone, j.HooksSucceeded, j.HooksNoResults, j.HooksSkipped, j.HooksFailed)
	} else {
		printSnapshotHooks(w, j)
	}
	if j.UnknownRecords > 0 {
		fmt.Fprintf(w, "  records:  %d of an unknown type, kept in the hooks' stdout logs (index.jsonl's unknown_records says which hook; starter logs %s --hook NAME)\n", j.UnknownRecords, j.Ident)
	}
	fmt.Fprintf(w, "  bytes:    %s\n", humanBytes(j.Bytes))
	printWACZ(w, j.WACZ)
	fmt.Fprintf(w, "  settings: concurrency %d, delay %d-%d ms", j.Settings.Concurrency, j.Settings.DelayMinMS, j.Settings.DelayMaxMS)
	if j.Crawl == nil {
		// A crawl's depth is its limit, on the depth line above.
		fmt.Fprintf(w, ", depth %s", j.FetchDepth)
	}
	if j.Settings.UserAgent != "" {
		fmt.Fprintf(w, ", user agent %q", j.Settings.UserAgent)
	}
	fmt.Fprintln(w)
	for _, p := range j.Settings.Ignores {
		fmt.Fprintf(w, "  ignore:   %s\n", p)
	}
	fmt.Fprintf(w, "  queue:    %s\n", j.TaskQueue)
	fmt.Fprintf(w, "  nice:     %d (priority %d; starter set %s nice=N)\n", j.Nice, model.PriorityKey(j.Nice), j.Ident)
	printTimes(w, j)
	if j.ExpiresIn != "" {
		fmt.Fprintf(w, "  expires:  in %s\n", j.ExpiresIn)
	}
	if j.UI != "" {
		fmt.Fprintf(w, "  Web UI:   %s\n", j.UI)
	}
	a.printStatusHooks(j.hooksView)
	return nil
}

// printSnapshotHooks is status's line of a snapshot's hook counts.
func printSnapshotHooks(w io.Writer, j jobJSON) {
	fmt.Fprintf(w, "  hooks:    %d/%d done: %d succeeded, %d noresults, %d skipped, %d failed\n",
		j.hooksDone, j.HooksTotal, j.HooksSucceeded, j.HooksNoResults, j.HooksSkipped, j.HooksFailed)
}

// printTimes is status's lines of when the job was queued, started and
// finished, each when known.
func printTimes(w io.Writer, j jobJSON) {
	for _, t := range []struct {
		name string
		at   time.Time
	}{{"queued", j.QueuedAt}, {"started", j.StartedAt}, {"finished", j.FinishedAt}} {
		if !t.at.IsZero() {
			fmt.Fprintf(w, "  %-9s %s\n", t.name+":", t.at.Local().Format(time.RFC3339))
		}
	}
}

// ---- list ----

func listCommand() *command {
	return &command{
		name:    "list",
		args:    "",
		summary: "list jobs, oldest first (all states, or --state S)",
		examples: []string{
			"starter list",
			"starter list --state active",
			"starter list --state failed --json",
			"starter list --failed",
			"starter list --tag sci-fi",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.String("state", "", "only jobs in this state: "+model.JobStateNames())
			fs.String("tag", "", "only jobs a hook tagged T (its Tag records, ArchiveBox's tags; not submit --tag, which picks workers)")
			fs.Bool("failed", false, "only jobs with a failed hook (the fleet health's failed_checks), each with those hooks")
		},
		run: runList,
	}
}

func runList(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) > 0 {
		return usageErr("takes no arguments, got %q (filter with --state)", inv.args)
	}
	states := model.JobStates
	if raw, _ := inv.fs.GetString("state"); inv.fs.Changed("state") {
		st, err := model.ParseJobState(raw)
		if err != nil {
			return usageErr("--state: %v", err)
		}
		states = []model.JobState{st}
	}
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	filtered := len(states) == 1
	tag, _ := inv.fs.GetString("tag")
	tagged := inv.fs.Changed("tag")
	if tagged && tag == "" {
		return usageErr("--tag: must not be empty (a Tag record's name)")
	}
	// A job that changes state while the sets are read can be in two of
	// them by the time each is read: it is listed once, in the state its
	// hash holds, and a --state list leaves out a job that has left it.
	seen := map[string]bool{}
	var jobs []jobJSON
	for _, st := range states {
		ids, err := b.Store.ListJobs(ctx, st)
		if err != nil {
			return withCode(exitUnavailable, err)
		}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			v, err := b.Store.GetJob(ctx, id)
			if errors.Is(err, rkeys.ErrJobNotFound) {
				continue // expired between the two reads
			}
			if err != nil {
				return withCode(exitUnavailable, err)
			}
			if filtered && v.State != st {
				continue
			}
			if tagged && !slices.Contains(v.Tags, tag) {
				continue
			}
			seen[id] = true
			jobs = append(jobs, toJSON(v, uiLink(inv.cfg.Temporal, id)))
		}
	}
	if failedOnly, _ := inv.fs.GetBool("failed"); failedOnly {
		if jobs, err = withFailedHooks(ctx, inv, b, jobs); err != nil {
			return err
		}
	}
	if inv.json {
		if jobs == nil {
			jobs = []jobJSON{}
		}
		return writeJSON(a.stdout, map[string]any{"jobs": jobs})
	}
	if len(jobs) == 0 {
		fmt.Fprintln(a.stdout, "no jobs")
		return nil
	}
	fmt.Fprintf(a.stdout, "%-25s  %-8s  %4s  %5s  %7s  %10s  %s\n", "IDENT", "STATE", "NICE", "STEP", "HOOKS", "BYTES", "URL")
	for _, j := range jobs {
		step, hooks := strconv.Itoa(j.CurrentStep), fmt.Sprintf("%d/%d", j.hooksDone, j.HooksTotal)
		if j.FetchDepth == model.FetchInf {
			// A crawl has no step of its own; its hook counters are its
			// start page's (status shows its pages).
			step, hooks = "crawl", strconv.FormatInt(j.hooksDone, 10)
		}
		fmt.Fprintf(a.stdout, "%-25s  %-8s  %4d  %5s  %7s  %10s  %s\n", j.Ident, jobState(j.State, j.RetryAt, false), j.Nice, step,
			hooks, humanBytes(j.Bytes), j.URL)
		if len(j.FailedHooks) > 0 {
			fmt.Fprintf(a.stdout, "  failed: %s\n", strings.Join(j.FailedHooks, ", "))
		}
	}
	return nil
}

// ---- abort ----

func abortCommand() *command {
	return &command{
		name:    "abort",
		args:    "IDENT",
		summary: "abort a job: running hooks get SIGTERM, the job ends aborted",
		examples: []string{
			"starter abort 3mlbkdu1fpo7wt4lr2qf1mpsw",
			"starter abort https://example.com/ --reason 'wrong URL'",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.String("reason", "", "why (recorded in the job's error)")
		},
		run: runAbort,
	}
}

func runAbort(ctx context.Context, a *app, inv *invocation) error {
	id, err := oneIdent(inv)
	if err != nil {
		return err
	}
	reason, _ := inv.fs.GetString("reason")
	b, err := a.connect(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	v, err := liveJob(ctx, b, id, "abort it")
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	err = jobctl.Abort(cctx, b.Temporal, workflowID(v), workflows.AbortRequest{Reason: reason, By: startedBy()})
	if err != nil {
		return temporalErr(id, "abort", err)
	}
	// ArchiveBot's own flag, for its dashboard and tools.
	if err := b.Store.RequestAbort(ctx, id); err != nil && !errors.Is(err, rkeys.ErrJobFinal) {
		inv.log.Warn("abort: set abort_requested in Redis: " + err.Error())
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"ident": id, "abort_requested": true})
	}
	fmt.Fprintf(a.stdout, "abort requested for %s (%s)\n", id, v.URL)
	return nil
}

func workflowID(v rkeys.JobView) string {
	if v.WorkflowID != "" {
		return v.WorkflowID
	}
	return v.Ident
}

// ---- settings (set, ignore) ----

// currentSettings asks the job's workflow for its settings (the source of
// truth; Redis may lag behind it).
func currentSettings(ctx context.Context, b *backend.Backend, id string) (workflows.Status, error) {
	cctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	var st workflows.Status
	if err := jobctl.Status(cctx, b.Temporal, id, &st); err != nil {
		return st, temporalErr(id, "query", err)
	}
	return st, nil
}

// applySettings sends the set_settings update and waits until the
// workflow has applied it (and Redis has it). It returns the version.
func applySettings(ctx context.Context, b *backend.Backend, id string, set model.Settings) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	version, err := jobctl.SetSettings(cctx, b.Temporal, id, "", set)
	if err != nil {
		return 0, controlErr(id, "update settings of", err)
	}
	return version, nil
}

// controlErr maps an update's error: a refusal by the workflow (the job is
// stopping or final) is a conflict, anything else as temporalErr.
func controlErr(id, what string, err error) error {
	if errors.Is(err, jobctl.ErrRefused) {
		return withCode(exitConflict, fmt.Errorf("%s job %s: %w", what, id, err))
	}
	return temporalErr(id, what, err)
}

// withFailedHooks keeps the jobs with a failed hook in the fleet health's
// failed_checks and names those hooks.
func withFailedHooks(ctx context.Context, inv *invocation, b *backend.Backend, jobs []jobJSON) ([]jobJSON, error) {
	h, err := healthOf(b, inv)
	if err != nil {
		return nil, err
	}
	failed, err := h.FailedJobs(ctx)
	if err != nil {
		return nil, withCode(exitUnavailable, err)
	}
	var out []jobJSON
	for _, j := range jobs {
		if hooks := failed[j.Ident]; len(hooks) > 0 {
			j.FailedHooks = hooks
			out = append(out, j)
		}
	}
	return out, nil
}
