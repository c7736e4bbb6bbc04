package activities

import (
	"fmt"
	"time"

	"github.com/archiveflow/archiveflow/internal/model"
)

// Error types of the ApplicationErrors the activities return. The workflow
// lists the non-retryable ones in every retry policy as a second safety net
// (the activities already mark them non-retryable).
const (
	// ErrTypeTransient is a hook attempt that failed for a reason worth
	// retrying: a non-zero exit without a result record, a crash or a timeout.
	// Its details carry the attempt's model.ArchiveResult.
	ErrTypeTransient = "HookTransientFailure"
	// ErrTypeConfig is a plugin configuration error (invalid value, unknown
	// plugin). Never retried.
	ErrTypeConfig = "HookConfigError"
	// ErrTypeInvalidInput is an activity input that breaks a documented rule.
	// Never retried.
	ErrTypeInvalidInput = "InvalidActivityInput"
	// ErrTypeNotWritable is a Redis write to a job that is gone or final
	// (see ErrNotWritable). Never retried; the workflow logs it.
	ErrTypeNotWritable = "JobNotWritable"
	// ErrTypeDiscovery is a plugin directory that cannot be read. Retried:
	// a mount may come back.
	ErrTypeDiscovery = "HookDiscoveryError"
)

// NonRetryableErrorTypes lists the error types no retry policy may retry.
var NonRetryableErrorTypes = []string{ErrTypeConfig, ErrTypeInvalidInput, ErrTypeNotWritable}

// HookSpec is one hook of a discovered plan. It is serialisable and small: it
// travels through the workflow history, so it never carries plugin config
// values (they may be secrets); RunHook resolves them on the host.
type HookSpec struct {
	Plugin string `json:"plugin"`
	// Name is the hook's file name, e.g. on_Snapshot__50_title.js.
	Name string `json:"name"`
	// Path is the absolute path of the executable on the worker host.
	Path string `json:"path"`
	// Step is the first digit of NN (0–9).
	Step int `json:"step"`
	// Background hooks (`.bg.` in the name) do not block their step.
	Background bool `json:"background,omitempty"`
	// Timeout is the hook's resolved run-time limit (<PLUGIN>_TIMEOUT, else
	// TIMEOUT); for a background hook it is the grace at seal.
	Timeout time.Duration `json:"timeout"`
	// Grace is the time between SIGTERM and SIGKILL.
	Grace time.Duration `json:"grace"`
	// Enabled is false when PLUGIN_ENABLED resolved to false: the hook is
	// recorded as skipped without being started.
	Enabled bool `json:"enabled"`
	// ConfigError is the plugin's configuration error, if any: the hook is
	// recorded as failed without being started.
	ConfigError string `json:"config_error,omitempty"`
	// SkipReason, when set, is why the hook must not start on this host,
	// decided at discovery (a name that breaks the grammar, a plugin whose
	// files are malformed, a required binary or plugin missing): the hook
	// is recorded skipped with this reason, never started.
	SkipReason string `json:"skip_reason,omitempty"`
}

// Key identifies the hook within a snapshot: PLUGIN/NAME.
func (h HookSpec) Key() string { return h.Plugin + "/" + h.Name }

// Validate checks the fields the workflow relies on.
func (h HookSpec) Validate() error {
	switch {
	case h.Plugin == "":
		return fmt.Errorf("hook %q: plugin must not be empty", h.Name)
	case h.Name == "":
		return fmt.Errorf("hook of plugin %q: name must not be empty", h.Plugin)
	case h.Step < 0 || h.Step > 9:
		return fmt.Errorf("hook %s: step %d: must be 0..9", h.Key(), h.Step)
	case h.Timeout < 0:
		return fmt.Errorf("hook %s: timeout %s: must be >= 0", h.Key(), h.Timeout)
	case h.Grace < 0:
		return fmt.Errorf("hook %s: grace %s: must be >= 0", h.Key(), h.Grace)
	}
	return nil
}

// Plan is the result of discovery: every hook of the snapshot in execution
// order (step, then NN, then file name).
type Plan struct {
	Hooks []HookSpec `json:"hooks"`
}

// Step returns the hooks of step n in plan order.
func (p Plan) Step(n int) []HookSpec {
	var out []HookSpec
	for _, h := range p.Hooks {
		if h.Step == n {
			out = append(out, h)
		}
	}
	return out
}

// Validate checks every hook and that no hook appears twice.
func (p Plan) Validate() error {
	seen := make(map[string]bool, len(p.Hooks))
	for i, h := range p.Hooks {
		if err := h.Validate(); err != nil {
			return fmt.Errorf("plan hook %d: %w", i, err)
		}
		if seen[h.Key()] {
			return fmt.Errorf("plan hook %d: %s: appears twice", i, h.Key())
		}
		seen[h.Key()] = true
	}
	return nil
}

// Claim is what ClaimAndDiscover returns: the claimed host's task queue
// and the snapshot's plan discovered on it.
type Claim struct {
	HostQueue string `json:"host_queue"`
	Plan      Plan   `json:"plan"`
}

// DiscoverInput asks for the hook plan of one snapshot.
type DiscoverInput struct {
	Ident      string `json:"ident"`
	SnapshotID string `json:"snapshot_id"`
	// URL is the job's URL: the crawl setup hooks run before discovery
	// returns get it (empty in inputs recorded before it existed: no
	// crawl setup).
	URL string `json:"url,omitempty"`
	// Overrides are job-level plugin config values (KEY → value).
	Overrides map[string]string `json:"overrides,omitempty"`
}

// Job is the job-level context every hook run needs.
type Job struct {
	Ident      string            `json:"ident"`
	URL        string            `json:"url"`
	SnapshotID string            `json:"snapshot_id"`
	FetchDepth string            `json:"fetch_depth,omitempty"`
	ExtraArgs  []string          `json:"extra_args,omitempty"`
	Overrides  map[string]string `json:"overrides,omitempty"`
	// CrawlPage marks a snapshot that is a page of the crawl job Ident
	// (its start URL): the crawl owns the job's state and its response
	// counters (items_*, bytes_downloaded, r1xx..), so the snapshot writes
	// neither; its hook results are recorded as usual.
	CrawlPage bool `json:"crawl_page,omitempty"`
}

// RunHookInput asks for one attempt of one hook.
type RunHookInput struct {
	Job      Job            `json:"job"`
	Hook     HookSpec       `json:"hook"`
	Settings model.Settings `json:"settings"`
	// Key is the idempotency key of the hook's result:
	// RUNID/step-S/PLUGIN/NAME (see ResultInput.Key).
	Key string `json:"key"`
	// AttemptsBefore counts the attempts of this hook that earlier
	// schedulings of it already ran: the workflow schedules a hook again
	// when it waited on a busy (alive) host past its ScheduleToStart
	// timeout. The reported attempt is AttemptsBefore + the activity's own.
	AttemptsBefore int `json:"attempts_before,omitempty"`
	// ReadyTo, for a background hook (InputV3), is the workflow RunHook
	// tells, with a SignalHookReady carrying ReadyKey, that the hook is
	// ready (its first line of stdout); "": none is told.
	ReadyTo  string `json:"ready_to,omitempty"`
	ReadyKey string `json:"ready_key,omitempty"`
}

// RunHookResult is what RunHook returns for a hook that reached a final
// status: the hook's result and whether RunHook wrote it to Redis itself.
// Its JSON is the result's own fields plus "recorded", so a reader that
// decodes it as a model.ArchiveResult (a history recorded before the
// field, or a workflow that does not know it) reads the same result.
type RunHookResult struct {
	model.ArchiveResult
	// Recorded reports that RunHook wrote the result, with the responses
	// only it holds, under RunHookInput.Key (Store.RecordResult is
	// idempotent by key). The workflow then skips its own write of the
	// result, which stays the durable fallback for when RunHook could not
	// write it (Redis down): one Redis write and no local activity per hook.
	Recorded bool `json:"recorded,omitempty"`
}

// Liveness is what HostLiveness says about a worker host.
type Liveness struct {
	Alive bool `json:"alive"`
	// Lease is how much longer the host counts as alive if it stops
	// reporting now: the remaining time to live of its pipeline:ID record
	// (0 when it is not alive).
	Lease time.Duration `json:"lease"`
}

// Progress is what a running hook has produced so far; it is the heartbeat
// detail of RunHook, visible in the Web UI's pending activity.
type Progress struct {
	// Attempt is the hook's attempt (RunHookInput.AttemptsBefore included):
	// the workflow reads it from a timeout's last heartbeat to count the
	// attempts a hook already ran.
	Attempt     int   `json:"attempt,omitempty"`
	StderrLines int64 `json:"stderr_lines"`
	Records     int64 `json:"records"`
	Responses   int64 `json:"responses"`
}

// BatchProgress is a RunPageBatch's heartbeat: Progress's attempt, and
// how many of the batch's claimed pages are running and how many have not
// started yet (a batch claims up to crawl.batch_pages at once and runs at
// most its share of the concurrency).
type BatchProgress struct {
	Attempt      int `json:"attempt,omitempty"`
	PagesRunning int `json:"pages_running"`
	PagesWaiting int `json:"pages_waiting"`
}

// Counters are a job's absolute hook counters, computed by the workflow so
// a retried write can never double-count.
type Counters struct {
	Total      int   `json:"hooks_total"`
	Succeeded  int   `json:"hooks_succeeded"`
	Failed     int   `json:"hooks_failed"`
	Skipped    int   `json:"hooks_skipped"`
	NoResults  int   `json:"hooks_noresults"`
	OutputSize int64 `json:"output_bytes"`
}

// Add counts one final result.
func (c *Counters) Add(r model.ArchiveResult) {
	switch r.Status {
	case model.StatusSucceeded:
		c.Succeeded++
	case model.StatusFailed:
		c.Failed++
	case model.StatusSkipped:
		c.Skipped++
	case model.StatusNoResults:
		c.NoResults++
	}
	c.OutputSize += r.OutputBytes
}

// JobStateInput moves a job to a new state in Redis.
type JobStateInput struct {
	Ident      string         `json:"ident"`
	State      model.JobState `json:"state"`
	WorkflowID string         `json:"workflow_id"`
	RunID      string         `json:"run_id"`
	// TaskQueue is the queue the snapshot's hooks run on (host queue once
	// claimed).
	TaskQueue string `json:"task_queue,omitempty"`
	// Key is the idempotency key of this transition.
	Key string `json:"key"`
}

// StepInput records the job's current step in Redis.
type StepInput struct {
	Ident string `json:"ident"`
	Step  int    `json:"step"`
	// HooksTotal is the number of hooks in the plan (absolute).
	HooksTotal int `json:"hooks_total"`
}

// ResultInput records one final hook result and the job's counters after it.
type ResultInput struct {
	Ident    string              `json:"ident"`
	Result   model.ArchiveResult `json:"result"`
	Counters Counters            `json:"counters"`
	// Key is the idempotency key: RUNID/step-S/PLUGIN/NAME. The same hook
	// is counted once per workflow run, even when a re-claim runs it again.
	Key string `json:"key"`
	// Responses of the final attempt feed the response counters. Only
	// RunHook, which holds them in memory, sets them; they never travel
	// through workflow history.
	Responses []model.Response `json:"-"`
	// CrawlPage: the hook belongs to a crawl's page snapshot; its
	// responses and output bytes are counted by the crawl (Job.CrawlPage).
	CrawlPage bool `json:"crawl_page,omitempty"`
}

// FinishInput records a job's final state, exactly once per Key.
type FinishInput struct {
	Ident    string         `json:"ident"`
	State    model.JobState `json:"state"`
	Error    string         `json:"error,omitempty"`
	Counters Counters       `json:"counters"`
	Key      string         `json:"key"`
	// Limit names the limit a crawl finished at (state finished;
	// model.PageLimitReached, …): written to the job hash and logged.
	Limit string `json:"limit,omitempty"`
}

// RetryAtInput indexes a running job as waiting for a later retry of its
// hooks, due At (the retry_at set); a zero At takes it out.
type RetryAtInput struct {
	Ident string    `json:"ident"`
	At    time.Time `json:"at"`
}

// ReopenInput takes a finished job back for a retry run (starter retry),
// exactly once per Key.
type ReopenInput struct {
	Ident string `json:"ident"`
	// Hooks is how many failed results the retry runs again: they leave
	// hooks_failed until the retry counts its own results. Bytes are their
	// output bytes, sent by the workflow and no longer used:
	// bytes_downloaded counts bytes fetched, and those fetches happened.
	Hooks int    `json:"hooks"`
	Bytes int64  `json:"bytes"`
	Key   string `json:"key"`
}

// SettingsInput applies changed job settings: the Redis job hash, the
// ignores set, a settings_age bump and a publish on archivebot:job:IDENT.
type SettingsInput struct {
	Ident    string         `json:"ident"`
	Settings model.Settings `json:"settings"`
	// Version is the workflow's settings generation (1 = first change);
	// with Key it makes the bump idempotent.
	Version int    `json:"version"`
	Key     string `json:"key"`
}

// LogKind is the type of one job log packet.
type LogKind string

// Job log packet kinds (ArchiveBot's log packet types).
const (
	LogStdout   LogKind = "stdout"
	LogDownload LogKind = "download"
	// LogIgnore is a URL a job ignore pattern kept out of a crawl
	// (ArchiveBot's ignore packet: url, pattern, source).
	LogIgnore LogKind = "ignore"
)

// LogEntry is one line of a job's log: a hook's stderr line, a Response,
// or an ignored URL.
type LogEntry struct {
	Kind     LogKind         `json:"kind"`
	Time     time.Time       `json:"ts"`
	Hook     string          `json:"hook"`
	Message  string          `json:"message,omitempty"`
	Response *model.Response `json:"response,omitempty"`
	// URL, Pattern and Source of an ignore entry.
	URL     string `json:"url,omitempty"`
	Pattern string `json:"pattern,omitempty"`
	Source  string `json:"source,omitempty"`
}

// SealInput is the host side of one snapshot's seal.
type SealInput struct {
	Job Job `json:"job"`
	// State is the job's final state and Error why it is not finished.
	State model.JobState `json:"state"`
	Error string         `json:"error,omitempty"`
	// Results are the final results of the plan's hooks, in plan order; a
	// hook the job never got to (stopped before it) has none.
	Results []model.ArchiveResult `json:"results"`
}

// ArchiveInput is where a job's WACZ was written at its seal.
type ArchiveInput struct {
	Ident string `json:"ident"`
	// WACZ is its absolute path on Host, Bytes its size; or Error why no
	// WACZ was written.
	WACZ  string `json:"wacz,omitempty"`
	Host  string `json:"host,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
	Error string `json:"error,omitempty"`
	// Missing counts the job's WARC files other hosts wrote that Host
	// could not see.
	Missing int `json:"missing_warcs,omitempty"`
}

// SealReport is what the host side of the seal did.
type SealReport struct {
	// Files are the index files written (absolute paths on the host).
	Files []string `json:"files"`
	// WACZ is the job's WACZ written at the seal (an absolute path on the
	// host), WACZBytes its size; or WACZError why none was written.
	WACZ      string `json:"wacz,omitempty"`
	WACZBytes int64  `json:"wacz_bytes,omitempty"`
	WACZError string `json:"wacz_error,omitempty"`
	WACZHost  string `json:"wacz_host,omitempty"`
}

// Archive is where the report says the job's WACZ is, for SetArchive.
func (r SealReport) Archive(ident string) ArchiveInput {
	return ArchiveInput{Ident: ident, WACZ: r.WACZ, Bytes: r.WACZBytes, Error: r.WACZError, Host: r.WACZHost}
}
