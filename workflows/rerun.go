package workflows

import (
	"fmt"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Rerun makes a SnapshotWorkflow run a retry of its job (`starter retry`):
// a new run of the same workflow ID that runs only the hooks whose final
// status was failed and keeps every other result of the previous run. An
// input without it (every recorded history) runs every hook.
type Rerun struct {
	// PreviousRunID is the run whose results are retried.
	PreviousRunID string `json:"previous_run_id"`
	// Hooks are the keys (PLUGIN/NAME) of the hooks that run again: those
	// whose final status was failed. A hook of the plan with no previous
	// result at all (added since) runs too.
	Hooks []string `json:"hooks"`
	// Kept are the previous final results of the other hooks: they are
	// the run's results as they are, neither run nor counted again.
	Kept []model.ArchiveResult `json:"kept,omitempty"`
	// FailedBytes is the output bytes of the failed results: the retry's
	// own results are counted instead.
	FailedBytes int64 `json:"failed_bytes,omitempty"`
	// Waiting: this run is a later retry the previous run waited for
	// (retrylater.go): the job never ended, so it is not reopened; its
	// waiting results were never written to Redis.
	Waiting bool `json:"waiting,omitempty"`
	// Later counts the later retries each hook (PLUGIN/NAME) ran so far.
	Later map[string]int `json:"later,omitempty"`
}

// Validate checks that the rerun has something to run.
func (r Rerun) Validate() error {
	switch {
	case r.PreviousRunID == "":
		return fmt.Errorf("rerun: previous_run_id must not be empty")
	case len(r.Hooks) == 0:
		return fmt.Errorf("rerun of run %s: no hook to run again (none failed)", r.PreviousRunID)
	case r.FailedBytes < 0:
		return fmt.Errorf("rerun of run %s: failed_bytes %d: must be >= 0", r.PreviousRunID, r.FailedBytes)
	}
	return nil
}

// RerunOf builds the Rerun of a finished run from its final Status: the
// hooks whose result is failed run again, the others keep their results.
// It fails when no hook failed.
func RerunOf(previousRunID string, st Status) (*Rerun, error) {
	r := &Rerun{PreviousRunID: previousRunID}
	for _, h := range st.Hooks {
		if h.Result == nil {
			continue // never ran: it runs in the retry (no kept result)
		}
		if h.Result.Status == model.StatusFailed {
			r.Hooks = append(r.Hooks, h.Plugin+"/"+h.Hook)
			r.FailedBytes += h.Result.OutputBytes
			continue
		}
		r.Kept = append(r.Kept, *h.Result)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("job %s: %w", st.Ident, err)
	}
	return r, nil
}

// rerunState is the Rerun in the form the run looks it up in.
type rerunState struct {
	run  map[string]bool                // hook key → runs again
	kept map[string]model.ArchiveResult // hook key → previous result
}

func newRerunState(r *Rerun) rerunState {
	st := rerunState{run: map[string]bool{}, kept: map[string]model.ArchiveResult{}}
	if r == nil {
		return st
	}
	for _, k := range r.Hooks {
		st.run[k] = true
	}
	for _, res := range r.Kept {
		st.kept[res.Plugin+"/"+res.Hook] = res
	}
	return st
}

// keptResult is h's result from the previous run when this run is a
// retry that does not run h.
func (s *snapshot) keptResult(h activities.HookSpec) (model.ArchiveResult, bool) {
	if s.in.Rerun == nil || s.rerun.run[h.Key()] {
		return model.ArchiveResult{}, false
	}
	res, ok := s.rerun.kept[h.Key()]
	return res, ok
}

// keep makes a kept result h's result in this run. Redis counted it in
// the previous run, so nothing is written.
func (s *snapshot) keep(h activities.HookSpec, res model.ArchiveResult) {
	s.claim.results[h.Key()] = res
	s.claim.counters.Add(res)
}

// reopen takes the finished job back in Redis before a retry runs: its
// final state, retention and jobs_* count, and the failed results that
// run again (ReopenJob, once per run).
func (s *snapshot) reopen() {
	s.write("reopen job", poolActs.ReopenJob, activities.ReopenInput{
		Ident: s.in.Job.Ident, Hooks: len(s.in.Rerun.Hooks), Bytes: s.in.Rerun.FailedBytes, Key: s.runID + "/reopen",
	})
}
