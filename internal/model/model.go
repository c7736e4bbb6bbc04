// Package model holds the vocabulary shared by the hook runner, the workflows,
// the activities and the Redis layout: hook result statuses, the ArchiveResult
// record of one hook run, the Response record of one HTTP fetch, job states
// and job settings. It has no behaviour beyond validation of its own values
// and no dependencies outside the standard library, so every layer can import it.
package model

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
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
	// Host is the worker host that ran the hook (its pipeline nickname),
	// so whoever records the result (the host, or the workflow after the
	// host's write failed) credits the fleet health's check of that host.
	Host string `json:"host,omitempty"`
	// Title is the snapshot title the hook set (its last Snapshot record
	// without a url), "" if none; Tags are the names of its Tag records.
	// Both become the job's (job hash title, IDENT_tags) when the result
	// is recorded, and the snapshot index's at the seal.
	Title string   `json:"title,omitempty"`
	Tags  []string `json:"tags,omitempty"`
	// Unknown counts the records of a type archiveflow does not know the
	// hook printed: kept in its stdout log, counted here (unknown_records
	// in the job hash and the index).
	Unknown int64 `json:"unknown_records,omitempty"`
	// RetryAt, on a failed result, says the hook waits for a later retry
	// due then (hooks.retry_later, the ArchiveBox plan's retry_at): the
	// result is not final yet.
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// TitleAndTags is what the hooks' records say of the snapshot itself: the
// title of the result that ended last among those that set one (the one
// the job hash kept, results being recorded as they end), and every Tag
// name, sorted, each once.
func TitleAndTags(results []ArchiveResult) (string, []string) {
	var title string
	var at time.Time
	seen := map[string]bool{}
	var tags []string
	for _, r := range results {
		if r.Title != "" && !r.EndedAt.Before(at) {
			title, at = r.Title, r.EndedAt
		}
		for _, t := range r.Tags {
			if !seen[t] {
				seen[t] = true
				tags = append(tags, t)
			}
		}
	}
	sort.Strings(tags)
	return title, tags
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

// JobStateNames lists the job states for messages: "pending, active, …".
func JobStateNames() string {
	names := make([]string, len(JobStates))
	for i, st := range JobStates {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

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
	return "", fmt.Errorf("job state %q: must be one of %s", s, JobStateNames())
}
