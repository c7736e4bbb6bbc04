package workflows

import (
	"cmp"
	"errors"
	"maps"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Later retries (the ArchiveBox plan's retry_at, hooks.retry_later): a
// foreground hook whose attempts all ended transiently (its retry policy
// ran out) while later-retry delays are left for its plugin is not failed
// for good: its result is failed with RetryAt, is not written to Redis
// (it is not final, so no counter moves) and shows as waiting. Once the
// run's other hooks and its seal are done, the run indexes the job in the
// retry_at set (SetRetryAt), shows as waiting (showWaiting), waits on a
// durable timer until the earliest
// hook is due (an abort ends the wait) and continues as new with a Rerun
// that runs the due hooks again and keeps every other result (Waiting: the
// job never ended, nothing is reopened). Each later retry is a new run:
// one run's history holds one wait, however long the list of delays. When
// a hook has no delay left its result is failed and final as before.

// laterRetry is when h, whose activity ended with err, is retried later;
// false when it is not (no delay left, not a transient end, a background
// hook, a crawl's page, a stop).
func (s *snapshot) laterRetry(h activities.HookSpec, err error) (time.Time, bool) {
	if s.in.RetryLater == nil || h.Background || s.in.Job.CrawlPage || s.stopping() || !transientEnd(err) {
		return time.Time{}, false
	}
	delays := s.in.RetryLater.For(h.Plugin)
	n := 0 // the later retries h ran before this run
	if s.in.Rerun != nil {
		n = s.in.Rerun.Later[h.Key()]
	}
	if n >= len(delays) {
		return time.Time{}, false
	}
	return workflow.Now(s.dctx).Add(delays[n]), true
}

// transientEnd reports that a hook's activity gave up on transient
// failures: its attempts ran out failing, or timing out.
func transientEnd(err error) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type() == activities.ErrTypeTransient
	}
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout)
}

// waiting reports that res waits for a later retry.
func waiting(res model.ArchiveResult) bool { return res.RetryAt != nil }

// waitForLater waits until this run's earliest waiting hook is due and
// returns the input of the run that retries the due ones. It returns
// false when nothing waits or the job stopped: the waiting results are
// then failed for good and written, and the job finishes.
func (s *snapshot) waitForLater() (SnapshotInput, bool) {
	var due time.Time
	for _, h := range s.plan.Hooks {
		if res, ok := s.claim.results[h.Key()]; ok && waiting(res) && (due.IsZero() || res.RetryAt.Before(due)) {
			due = *res.RetryAt
		}
	}
	if due.IsZero() {
		return SnapshotInput{}, false
	}
	if !s.stopping() && s.job.failure == "" {
		s.setRetryAt(due)
		if s.showWaiting(due) {
			s.showNow()
			workflow.SetCurrentDetails(s.dctx, s.details())
		}
		s.log().Info("hooks wait for a later retry", "retry_at", due)
		_, _ = workflow.AwaitWithTimeout(s.dctx, due.Sub(workflow.Now(s.dctx)), s.stopping)
	}
	if s.stopping() || s.job.failure != "" {
		s.failWaiting()
		return SnapshotInput{}, false
	}
	next := s.in
	next.Settings = s.settings.current
	next.Rerun = s.laterRerun()
	s.setRetryAt(time.Time{})
	return next, true
}

// laterRerun is the Rerun of the due waiting hooks; every other result is
// kept, a waiting one not yet due with its RetryAt.
func (s *snapshot) laterRerun() *Rerun {
	r := &Rerun{PreviousRunID: s.runID, Waiting: true, Later: map[string]int{}}
	if s.in.Rerun != nil {
		maps.Copy(r.Later, s.in.Rerun.Later)
	}
	now := workflow.Now(s.dctx)
	for _, h := range s.plan.Hooks {
		res, ok := s.claim.results[h.Key()]
		switch {
		case !ok:
			continue // never ran: it runs in the next run
		case waiting(res) && !res.RetryAt.After(now):
			r.Hooks = append(r.Hooks, h.Key())
			r.Later[h.Key()]++
		default:
			r.Kept = append(r.Kept, res)
		}
	}
	return r
}

// failWaiting makes every waiting result failed for good and writes it
// (it was not written while it waited).
func (s *snapshot) failWaiting() {
	for _, h := range s.plan.Hooks {
		res, ok := s.claim.results[h.Key()]
		if !ok || !waiting(res) {
			continue
		}
		res.RetryAt = nil
		res.Error = "later retry not run (" + cmp.Or(s.job.stopReason, s.job.failure, "host lost") + "): " + res.Error
		s.claim.results[h.Key()] = res
		s.hash.result(activities.ResultInput{Ident: s.in.Job.Ident, Result: res, Counters: s.claim.counters, Key: s.runKey(h)})
	}
}

// setRetryAt indexes the job in the retry_at set, due at; a zero at takes
// it out.
func (s *snapshot) setRetryAt(at time.Time) {
	in := activities.RetryAtInput{Ident: s.in.Job.Ident, At: at}
	s.write("set retry_at", poolActs.SetRetryAt, in)
}
