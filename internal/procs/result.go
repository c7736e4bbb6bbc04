package procs

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"time"

	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/model"
)

// ErrTransient marks a hook attempt that ended without a final status
// (non-zero exit without a record, crash, timeout, cancellation): the
// caller retries it under its retry policy.
var ErrTransient = errors.New("transient hook failure")

// TransientError is returned by Result.Err for a transient outcome.
type TransientError struct {
	Hook      string
	AttemptID string
	Reason    string
	// StderrTail holds the last stderr lines of the attempt, for the error log.
	StderrTail []string
}

func (e *TransientError) Error() string {
	return fmt.Sprintf("hook %s attempt %s: %s", e.Hook, e.AttemptID, transientReason(e.Reason, e.StderrTail))
}

// transientReason says why an attempt ended transiently, cause first: the
// hook's last stderr line (its error, for the built-ins), then the
// runner's reason in parentheses.
func transientReason(reason string, stderrTail []string) string {
	if n := len(stderrTail); n > 0 && strings.TrimSpace(stderrTail[n-1]) != "" {
		return stderrTail[n-1] + " (" + reason + ")"
	}
	return reason
}

// Unwrap makes errors.Is(err, ErrTransient) true.
func (e *TransientError) Unwrap() error { return ErrTransient }

// IsPermanent reports whether an error returned by Run means retrying the
// same spec cannot help: an invalid spec, or an executable that is missing,
// not executable or not in an executable format. Other Run errors (I/O,
// resource limits at start) are worth a retry.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrInvalidSpec) || errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC)
}

// Counts are the per-attempt line counters of the hook's stdout and stderr.
type Counts struct {
	Records     int64 // valid typed records (all types)
	Ignored     int64 // non-JSON lines and JSON without "type" (blank lines are not counted)
	Unknown     int64 // JSON objects of a record type archiveflow does not know (kept in the stdout log)
	Invalid     int64 // records of a known type breaking a rule (logged, ignored)
	Oversize    int64 // stdout lines longer than LineCap, dropped unread
	StderrLines int64 // non-blank stderr lines
}

// ResponseSummary aggregates the Response records of one attempt: the
// counters by class and the bytes fetched (model.ResponseCounts, which
// owns ArchiveBot's bucketing).
type ResponseSummary struct {
	model.ResponseCounts
}

func (s *ResponseSummary) add(r model.Response) { s.ResponseCounts.Add(r) }

// Result is the outcome of one hook attempt. Exactly one of Status (final)
// and Transient is set.
type Result struct {
	AttemptID string
	// Status is the final status when Transient is false.
	Status model.Status
	// Transient is true when the attempt should be retried (see Err).
	Transient bool
	// Reason says in words how the status or the failure was decided.
	Reason string
	// ExitCode is the leader's exit code; 128+N when killed by signal N.
	ExitCode int
	// Signal is the signal that killed the leader, 0 if it exited.
	Signal     syscall.Signal
	TimedOut   bool // the Timeout expired and the group was stopped
	Canceled   bool // the context ended and the group was stopped
	SoftFailed bool // the hook printed status failed and exited 0: final, not retried
	// Last is the last valid ArchiveResult record, nil if none.
	Last *jsonl.ArchiveResult
	// Title is the last non-empty title of the hook's Snapshot records
	// without a url (updates of the current snapshot). Tags are the names
	// of its Tag records, sorted, each once (at most MaxTags).
	Title      string
	Tags       []string
	Counts     Counts
	Responses  ResponseSummary
	StderrTail []string // last StderrTailLines stderr lines
	// Outputs are the files left in Dir (runner files excluded), sorted.
	Outputs     []model.OutputFile
	OutputBytes int64
	// Leftovers counts processes found alive after the leader exited (group
	// members and marked daemons); all were terminated.
	Leftovers int
	// Limit names the resource limit the hook ran into (LimitMemory,
	// LimitProcesses, LimitCPUTime), "" if none; LimitError says how.
	Limit      string
	LimitError string

	StartedAt time.Time
	EndedAt   time.Time // when the leader exited
	Files     Files
}

// Err returns a *TransientError for a transient outcome, nil for a final one.
func (r Result) Err() error {
	if !r.Transient {
		return nil
	}
	hook := ""
	if r.Files.Stdout != "" {
		hook = hookFromRunnerFile(r.Files.Stdout)
	}
	return &TransientError{Hook: hook, AttemptID: r.AttemptID, Reason: r.Reason, StderrTail: r.StderrTail}
}

// TransientReason says why a transient attempt ended, cause first (the
// hook's last stderr line, then the runner's reason): the text a result
// records. The hook and the attempt are the record's own fields.
func (r Result) TransientReason() string { return transientReason(r.Reason, r.StderrTail) }

// ArchiveResult fills the fields of a model.ArchiveResult this attempt
// knows; the caller sets Plugin, Hook, Step, Background and Attempts. For a
// transient outcome Status is empty and Error holds the reason.
func (r Result) ArchiveResult() model.ArchiveResult {
	ar := model.ArchiveResult{
		Status:      r.Status,
		ExitCode:    r.ExitCode,
		StartedAt:   r.StartedAt,
		EndedAt:     r.EndedAt,
		Outputs:     r.Outputs,
		OutputBytes: r.OutputBytes,
		Limit:       r.Limit,
		Title:       r.Title,
		Tags:        r.Tags,
		Unknown:     r.Counts.Unknown,
	}
	if r.Last != nil {
		ar.OutputStr = r.Last.OutputStr
		ar.OutputJSON = r.Last.OutputJSON
		ar.Error = r.Last.Error
	}
	switch {
	case r.Transient:
		ar.Error = r.TransientReason()
	case r.Status == model.StatusFailed && r.Last == nil:
		ar.Error = r.Reason
	}
	if r.Limit != "" && ar.Status == model.StatusFailed && ar.Error == "" {
		ar.Error = r.LimitError
	}
	return ar
}

func hookFromRunnerFile(path string) string {
	f, _ := ParseRunnerFile(path)
	return f.Stem
}

// exitSkipped is the exit code of a hook that skipped itself (with or
// without a record saying so): never a failure.
const exitSkipped = 10

// exitSIGTERM is the exit code of a process killed by SIGTERM (128+15):
// how a background hook that obeyed the seal's SIGTERM usually ends.
const exitSIGTERM = 128 + int(syscall.SIGTERM)

// decide applies the status mapping of DESIGN.md §3, in order. It is the
// only mapping of an exit to a status: callers take Status and Transient as
// they are.
//  1. the last ArchiveResult record's status wins when the hook exited 0
//     or 10 (skipped) or was stopped by cancellation; another exit or a
//     death by signal after a record is a partial success: transient, the
//     record kept (Last) for the result, the hook retried;
//  2. a background hook stopped by its context (the seal) without a record
//     succeeded when it exited 0 or by the SIGTERM (143), and failed
//     otherwise (it needed SIGKILL, or crashed): final either way, there is
//     no retry after the seal;
//  3. timeout or cancellation without a record: transient;
//  4. no record: exit 0 → noresults, exit 10 → skipped;
//  5. anything else (other exit, death by signal): transient.
//
// A resource limit the hook ran into turns a transient outcome of its own
// (a timeout, 5; not a cancellation) into a final failed: the same hook
// would run into it again.
func decide(r *Result, background bool, timeout time.Duration) {
	switch {
	case r.Last != nil && !r.Canceled && (r.Signal != 0 || (r.ExitCode != 0 && r.ExitCode != exitSkipped)):
		// Partial success (the ArchiveBox plan's case 3): what the hook
		// emitted stays (Last, its outputs, its other records in its
		// stdout log), and the hook is tried again.
		r.Transient = true
		r.Reason = fmt.Sprintf("partial: ArchiveResult record status %s, then exit %d", r.Last.Status, r.ExitCode)
		if r.Signal != 0 {
			r.Reason = fmt.Sprintf("partial: ArchiveResult record status %s, then killed by signal %d (%s)", r.Last.Status, int(r.Signal), r.Signal)
		}
	case r.Last != nil:
		r.Status = r.Last.Status
		r.Reason = fmt.Sprintf("ArchiveResult record status %s (exit %d)", r.Status, r.ExitCode)
		r.SoftFailed = r.Status == model.StatusFailed && r.ExitCode == 0
	case background && r.Canceled && (r.ExitCode == 0 || r.ExitCode == exitSIGTERM):
		r.Status = model.StatusSucceeded
		r.Reason = fmt.Sprintf("background hook stopped by the seal, no record, exit %d", r.ExitCode)
	case background && r.Canceled:
		r.Status = model.StatusFailed
		r.Reason = fmt.Sprintf("background hook stopped by the seal, no record, exit %d (not by the SIGTERM)", r.ExitCode)
	case r.TimedOut:
		r.Transient = true
		r.Reason = fmt.Sprintf("timed out after %s (exit %d)", timeout, r.ExitCode)
	case r.Canceled:
		r.Transient = true
		r.Reason = fmt.Sprintf("canceled (exit %d)", r.ExitCode)
	case r.Signal == 0 && r.ExitCode == 0:
		r.Status = model.StatusNoResults
		r.Reason = "exit 0 without ArchiveResult record"
	case r.Signal == 0 && r.ExitCode == exitSkipped:
		r.Status = model.StatusSkipped
		r.Reason = "exit 10 without ArchiveResult record"
	case r.Signal != 0:
		r.Transient = true
		r.Reason = fmt.Sprintf("killed by signal %d (%s) without ArchiveResult record", int(r.Signal), r.Signal)
	default:
		r.Transient = true
		r.Reason = fmt.Sprintf("exit %d without ArchiveResult record", r.ExitCode)
	}
	if r.Transient && r.Limit != "" && !r.Canceled {
		r.Transient = false
		r.Status = model.StatusFailed
		r.Reason = r.LimitError + "; " + r.Reason
	}
}
