package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Names of SnapshotWorkflow's query, signals and update.
const (
	// QueryStatus returns Status (a crawl's: CrawlStatus). Its name is
	// activities.QueryStatus, which RunSteps uses to read the settings.
	QueryStatus = activities.QueryStatus
	// SignalAbort stops the job: SIGTERM to running hooks, background
	// children cancelled, final state aborted. Payload: AbortRequest.
	SignalAbort = "abort"
	// UpdateSetSettings replaces the job's settings and returns the new
	// settings version once Redis has them. Payload: model.Settings.
	UpdateSetSettings = "set_settings"
	// SignalSetSettings is the fire-and-forget form of UpdateSetSettings;
	// invalid settings are logged and ignored.
	SignalSetSettings = "set_settings"
	// SignalHookReady says a background hook is ready (InputV3); payload:
	// the key the snapshot gave it (RunHookInput.ReadyKey).
	SignalHookReady = activities.SignalHookReady
)

// AbortRequest is the payload of SignalAbort.
type AbortRequest struct {
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// HookPhase is where a hook of the plan is.
type HookPhase string

// Hook phases.
const (
	PhasePending HookPhase = "pending"
	PhaseRunning HookPhase = "running"
	PhaseDone    HookPhase = "done"
	// PhaseWaiting: the hook waits for a later retry (its result's
	// RetryAt).
	PhaseWaiting HookPhase = "waiting"
)

// HookStatus is one hook of the plan in the status query.
type HookStatus struct {
	Plugin     string               `json:"plugin"`
	Hook       string               `json:"hook"`
	Step       int                  `json:"step"`
	Background bool                 `json:"background,omitempty"`
	Phase      HookPhase            `json:"phase"`
	Result     *model.ArchiveResult `json:"result,omitempty"`
	// Transient: a foreground hook whose in-run attempts all ended
	// transiently (its result is failed, or waits): a crawl's start page
	// with such a hook waits for a later retry (crawlstartlater.go).
	Transient bool `json:"transient,omitempty"`
}

// Status is the answer of QueryStatus and the workflow's result.
type Status struct {
	Ident           string              `json:"ident"`
	URL             string              `json:"url"`
	State           model.JobState      `json:"state"`
	CurrentStep     int                 `json:"current_step"`
	Settings        model.Settings      `json:"settings"`
	SettingsVersion int                 `json:"settings_version"`
	HostQueue       string              `json:"host_queue,omitempty"`
	Claims          int                 `json:"claims"`
	Error           string              `json:"error,omitempty"`
	Counters        activities.Counters `json:"counters"`
	Hooks           []HookStatus        `json:"hooks"`
	// RetryAt is when the earliest hook waiting for a later retry is due
	// while the job only waits for it (State is then StateWaiting).
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// status builds the Status in plan order.
func (s *snapshot) status() Status {
	st := Status{
		Ident:           s.in.Job.Ident,
		URL:             s.in.Job.URL,
		State:           s.shownState(),
		RetryAt:         s.shownRetryAt(),
		CurrentStep:     s.claim.step,
		Settings:        s.settings.current,
		SettingsVersion: s.settings.version,
		HostQueue:       s.claim.hostQueue,
		Claims:          s.claim.n,
		Error:           cmp.Or(s.job.failure, s.job.stopReason),
		Counters:        s.claim.counters,
		Hooks:           make([]HookStatus, 0, len(s.plan.Hooks)),
	}
	for _, h := range s.plan.Hooks {
		hs := HookStatus{Plugin: h.Plugin, Hook: h.Name, Step: h.Step, Background: h.Background, Phase: PhasePending}
		if res, ok := s.claim.results[h.Key()]; ok {
			hs.Phase, hs.Result = PhaseDone, &res
			if waiting(res) {
				hs.Phase = PhaseWaiting
			}
			hs.Transient = s.claim.transient[h.Key()]
		} else if s.claim.running[h.Key()] {
			hs.Phase = PhaseRunning
		}
		st.Hooks = append(st.Hooks, hs)
	}
	return st
}

// reason is the job's error after the abort.
func (req AbortRequest) reason() string {
	reason := "aborted"
	if req.Reason != "" {
		reason = "aborted: " + req.Reason
	}
	if req.By != "" {
		reason += " (by " + req.By + ")"
	}
	return reason
}

// applySettings installs set and queues its Redis write (nextSettings).
// It returns the write's sequence number and the new settings version.
func (s *snapshot) applySettings(set model.Settings) (seq, version int) {
	in := s.nextSettings(set)
	workflow.SetCurrentDetails(s.dctx, s.details())
	return s.hash.settings(in), in.Version
}

// ErrTypeJobFailed is the ApplicationError type of a SnapshotWorkflow whose
// job failed (InputV2); its details are the final Status.
const ErrTypeJobFailed = "JobFailed"

// endError is how the workflow of a job that did not finish ends (InputV2):
// failed with a non-retryable ErrTypeJobFailed error, aborted as canceled,
// each carrying st as details, so Temporal's status, Failures view and
// metrics say what the job's state says. A finished job has none.
func endError(st Status) error {
	switch st.State {
	case model.StateFailed:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("job %s failed: %s", st.Ident, st.Error), ErrTypeJobFailed, nil, st)
	case model.StateAborted:
		return temporal.NewCanceledError(st)
	}
	return nil
}

// EndStatus reads the final Status of a SnapshotWorkflow from the error its
// run returned: a job that failed or was aborted ends its workflow failed
// or canceled with the Status as the error's details (InputV2). ok is
// false when err carries no Status (any other error, or none).
func EndStatus(err error) (st Status, ok bool) {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == ErrTypeJobFailed && appErr.HasDetails() {
		return st, appErr.Details(&st) == nil
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) && canceled.HasDetails() {
		return st, canceled.Details(&st) == nil
	}
	return Status{}, false
}
