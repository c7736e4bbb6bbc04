package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// baseResult is a hook's result with status, started and ended now.
func baseResult(h activities.HookSpec, status model.Status, now time.Time) model.ArchiveResult {
	return model.ArchiveResult{Plugin: h.Plugin, Hook: h.Name, Step: h.Step, Background: h.Background, Status: status, StartedAt: now, EndedAt: now}
}

// skippedResult records a hook that never ran, saying why: a disabled
// hook, or a background hook that the seal (or a stop) reached before it
// started (activities.NotStartedBeforeSeal): skipped, never succeeded.
func skippedResult(h activities.HookSpec, now time.Time, why string) model.ArchiveResult {
	r := baseResult(h, model.StatusSkipped, now)
	r.OutputStr = why
	return r
}

// configFailedResult records a hook whose plugin configuration is invalid.
func configFailedResult(h activities.HookSpec, now time.Time) model.ArchiveResult {
	r := baseResult(h, model.StatusFailed, now)
	r.Error = "configuration error: " + h.ConfigError
	return r
}

// resultFromError turns the error of a hook's activity (after the retry
// policy gave up) into the hook's final failed result: the last attempt's
// record when the activity reported one, else what the error says.
func resultFromError(h activities.HookSpec, r Retry, err error, now time.Time) model.ArchiveResult {
	res := baseResult(h, model.StatusFailed, now)
	var appErr *temporal.ApplicationError
	var canceled *temporal.CanceledError
	var timeout *temporal.TimeoutError
	switch {
	case errors.As(err, &appErr) && appErr.HasDetails():
		var last model.ArchiveResult
		if derr := appErr.Details(&last); derr == nil {
			res = last
		}
		res.Error = cmp.Or(appErr.Message(), appErr.Error())
	case errors.As(err, &canceled):
		var last model.ArchiveResult
		if canceled.HasDetails() && canceled.Details(&last) == nil {
			res = last
		}
		res.Error = "cancelled before the hook reported a result"
	case errors.As(err, &timeout):
		res.Attempts = int(r.MaximumAttempts)
		res.Error = fmt.Sprintf("activity %s timeout after %d attempts", timeoutName(timeout.TimeoutType()), r.MaximumAttempts)
	case errors.As(err, &appErr):
		res.Attempts = 1
		if !appErr.NonRetryable() {
			res.Attempts = int(r.MaximumAttempts)
		}
		res.Error = appErr.Error()
	default:
		res.Error = err.Error()
	}
	res.Plugin, res.Hook, res.Step, res.Background = h.Plugin, h.Name, h.Step, h.Background
	res.Status = model.StatusFailed
	if res.StartedAt.IsZero() {
		res.StartedAt = now
	}
	if res.EndedAt.IsZero() {
		res.EndedAt = now
	}
	return res
}

func timeoutName(t enumspb.TimeoutType) string {
	switch t {
	case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
		return "start-to-close"
	case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
		return "schedule-to-start"
	case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE:
		return "schedule-to-close"
	case enumspb.TIMEOUT_TYPE_HEARTBEAT:
		return "heartbeat"
	default:
		return "unspecified"
	}
}
