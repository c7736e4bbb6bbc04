// Package model holds the vocabulary shared by the hook runner, the workflows,
// the activities and the Redis layout: hook result statuses, the ArchiveResult
// record of one hook run, the Response record of one HTTP fetch, job states
// and job settings. It has no behaviour beyond validation of its own values
// and no dependencies outside the standard library, so every layer can import it.
package model

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status is the final status of one hook run (DESIGN.md §3).
type Status string

// Hook statuses, in the vocabulary of ArchiveBox's ArchiveResult.
const (
	StatusSucceeded Status = "succeeded"
	StatusNoResults Status = "noresults"
	StatusSkipped   Status = "skipped"
	StatusFailed    Status = "failed"
)

// Statuses lists every valid Status in a fixed order (used for counters).
var Statuses = []Status{StatusSucceeded, StatusNoResults, StatusSkipped, StatusFailed}

// ParseStatus validates s as a hook status.
func ParseStatus(s string) (Status, error) {
	for _, st := range Statuses {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("status %q: must be one of succeeded, noresults, skipped, failed", s)
}

// OutputFile is one file a hook left in its directory (runner files excluded).
type OutputFile struct {
	Path string `json:"path"` // relative to the hook's working directory
	Size int64  `json:"size"`
}

// Response is one HTTP fetch reported by a hook with a `Response` JSONL record.
type Response struct {
	URL    string `json:"url"`
	Status int    `json:"status"` // HTTP status; 0 = no response (network error)
	Bytes  int64  `json:"bytes"`
	// WgetCode is the fetcher's own result code when it has one (ArchiveBot's
	// `wget_code` field, e.g. "RETRFINISHED" or "NETWORK_ERROR").
	WgetCode string `json:"wget_code,omitempty"`
}

// ResponseCounts summarises the Response records of one hook run: how many,
// by status class (anything outside 100..599 is Runk) and how many were
// errors, as ArchiveBot's counters r1xx..r5xx, runk and error_count count
// them. It travels in the ArchiveResult so the workflow can write the
// counters itself, with retries, whatever happens to the hook's worker.
type ResponseCounts struct {
	Count int64 `json:"count"`
	R1xx  int64 `json:"r1xx,omitempty"`
	R2xx  int64 `json:"r2xx,omitempty"`
	R3xx  int64 `json:"r3xx,omitempty"`
	R4xx  int64 `json:"r4xx,omitempty"`
	R5xx  int64 `json:"r5xx,omitempty"`
	Runk  int64 `json:"runk,omitempty"`
	// Errors counts responses that ArchiveBot marks is_error.
	Errors int64 `json:"errors,omitempty"`
}

// ArchiveResult is the record of one hook's run, final after retries.
type ArchiveResult struct {
	Plugin     string          `json:"plugin"`
	Hook       string          `json:"hook"` // file name of the hook
	Step       int             `json:"step"`
	Background bool            `json:"background,omitempty"`
	Status     Status          `json:"status"`
	OutputStr  string          `json:"output_str,omitempty"`
	OutputJSON json.RawMessage `json:"output_json,omitempty"`
	Error      string          `json:"error,omitempty"`
	Attempts   int             `json:"attempts"`
	ExitCode   int             `json:"exit_code"`
	StartedAt  time.Time       `json:"started_at"`
	EndedAt    time.Time       `json:"ended_at"`
	Outputs    []OutputFile    `json:"outputs,omitempty"`
	// OutputBytes is the sum of Outputs' sizes; it feeds bytes_downloaded.
	OutputBytes int64 `json:"output_bytes"`
	// Responses summarises the hook's Response records (nil: none).
	Responses *ResponseCounts `json:"responses,omitempty"`
	// Limit names the resource limit the hook ran into ("memory",
	// "processes", "cpu_time"); Error then says which and how.
	Limit string `json:"limit,omitempty"`
}

// JobState is the lifecycle state of a job (DESIGN.md §4, kickq-style indexes).
type JobState string

// Job states: pending → active → draining → finished | aborted | failed.
const (
	StatePending  JobState = "pending"
	StateActive   JobState = "active"
	StateDraining JobState = "draining"
	StateFinished JobState = "finished"
	StateAborted  JobState = "aborted"
	StateFailed   JobState = "failed"
)

// JobStates lists every JobState in lifecycle order.
var JobStates = []JobState{StatePending, StateActive, StateDraining, StateFinished, StateAborted, StateFailed}

// Final reports whether s is a terminal state.
func (s JobState) Final() bool {
	return s == StateFinished || s == StateAborted || s == StateFailed
}

// ParseJobState validates s as a job state.
func ParseJobState(s string) (JobState, error) {
	for _, st := range JobStates {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("job state %q: must be one of pending, active, draining, finished, aborted, failed", s)
}

// Settings are the job settings that may change while a job runs
// (ArchiveBot's `set` commands and archiveflow's set_settings signal).
type Settings struct {
	Concurrency int      `json:"concurrency"` // 0 pauses the job
	DelayMinMS  int      `json:"delay_min"`   // milliseconds, as ArchiveBot stores them
	DelayMaxMS  int      `json:"delay_max"`
	UserAgent   string   `json:"user_agent,omitempty"`
	Ignores     []string `json:"ignores,omitempty"` // RE2 patterns
}

// Validate checks the settings' ranges.
func (s Settings) Validate() error {
	switch {
	case s.Concurrency < 0:
		return fmt.Errorf("concurrency %d: must be >= 0", s.Concurrency)
	case s.DelayMinMS < 0:
		return fmt.Errorf("delay_min %d ms: must be >= 0", s.DelayMinMS)
	case s.DelayMaxMS < s.DelayMinMS:
		return fmt.Errorf("delay_max %d ms: must be >= delay_min (%d ms)", s.DelayMaxMS, s.DelayMinMS)
	}
	return nil
}
