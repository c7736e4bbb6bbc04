// Package abpipeline owns making a pool act as an ArchiveBot pipeline
// (DESIGN §9, pools[].archivebot): claiming the jobs ArchiveBot's bot
// queues, in ArchiveBot's queue order and exactly once (a claim carries a
// lease; a job whose workflow never started goes back to its queue),
// starting one workflow per job from the job hash the bot wrote, and
// obeying what the bot writes while the job runs (abort_requested, a raised
// settings_age) through the workflow's own abort signal and set_settings
// update. Keys and scripts stay in internal/rkeys; workflow inputs are
// built by internal/submit.
package abpipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Job is one ArchiveBot job as its bot wrote it (lib/job.rb register,
// set_delay, set_concurrency, toggle_ignores, add_ignore_pattern).
type Job struct {
	Ident      string
	URL        string
	FetchDepth string // shallow or inf
	// URLFile is the URL of a list of URLs (`!a <` / `!ao <` jobs); then
	// URL is that same URL.
	URLFile   string
	StartedBy string
	StartedIn string
	Queue     string
	Settings  model.Settings
	// SettingsAge is the bot's settings_age the settings were read at.
	SettingsAge int64
	// Nice is the job's niceness (`starter set IDENT nice=N` while it
	// waited in the bot's queue; 0 when never set): its workflow's
	// priority (model.PriorityKey).
	Nice int
}

// ErrBadJob marks a job hash archiveflow cannot run (a missing URL, an
// unknown fetch_depth, a malformed number): the job ends failed with the
// reason in its log, as ArchiveBot's `fail` would.
var ErrBadJob = errors.New("ArchiveBot job cannot be run")

// JobFromView reads the job the bot wrote. Ignore patterns archiveflow
// cannot apply (Python-only syntax) are kept as unapplied, each named in
// notes, so the job still runs with the others.
func JobFromView(v rkeys.JobView) (j Job, notes []string, err error) {
	j = Job{
		Ident: v.Ident, URL: v.URL, FetchDepth: v.FetchDepth, URLFile: v.Raw["url_file"],
		StartedBy: v.StartedBy, StartedIn: v.StartedIn, Queue: v.Raw["claim_queue"],
		Settings: v.Settings, SettingsAge: v.SettingsAge, Nice: v.Nice,
	}
	if j.URL == "" {
		return j, nil, fmt.Errorf("%w: job %s: url: must be set", ErrBadJob, v.Ident)
	}
	if err := model.ValidateFetchDepth(j.FetchDepth); err != nil {
		return j, nil, fmt.Errorf("%w: job %s: %w", ErrBadJob, v.Ident, err)
	}
	if err := model.ValidateNice(j.Nice); err != nil {
		return j, nil, fmt.Errorf("%w: job %s: %w", ErrBadJob, v.Ident, err)
	}
	j.Settings = BotSettings(v)
	for _, p := range j.Settings.UnappliedIgnores {
		notes = append(notes, fmt.Sprintf("ignore pattern %q is not applied by archiveflow: %v", p, model.ValidateIgnore(p)))
	}
	if err := j.Settings.Validate(); err != nil {
		return j, notes, fmt.Errorf("%w: job %s settings: %w", ErrBadJob, v.Ident, err)
	}
	return j, notes, nil
}

// BotSettings are the settings of a job as the bot keeps them in Redis
// (what ArchiveBot's pipeline re-reads when settings_age rises): the
// ignore set split into the patterns archiveflow applies and those it
// cannot, sorted so two reads compare equal, marked BotOwned (the
// workflow does not write them back) with the settings_age they were read
// at (model.Settings.BotAge). A missing concurrency is 1,
// as ArchiveBot's pipeline takes it (the bot always writes one).
func BotSettings(v rkeys.JobView) model.Settings {
	s := v.Settings
	if v.Raw["concurrency"] == "" {
		s.Concurrency = 1
	}
	all := slices.Clone(s.Ignores)
	slices.Sort(all)
	s.Ignores, s.UnappliedIgnores, _ = model.SplitIgnores(all)
	s.BotOwned, s.BotAge = true, v.SettingsAge
	return s
}

// SameSettings reports whether a and b are the same settings, ignore
// patterns compared as sets (BotOwned and BotAge are not settings).
func SameSettings(a, b model.Settings) bool {
	norm := func(s model.Settings) model.Settings {
		s.Ignores = slices.Sorted(slices.Values(s.Ignores))
		s.UnappliedIgnores = slices.Sorted(slices.Values(s.UnappliedIgnores))
		return s
	}
	a, b = norm(a), norm(b)
	return a.Concurrency == b.Concurrency && a.DelayMinMS == b.DelayMinMS && a.DelayMaxMS == b.DelayMaxMS &&
		a.UserAgent == b.UserAgent && a.SuppressIgnoreReports == b.SuppressIgnoreReports &&
		slices.Equal(a.Ignores, b.Ignores) && slices.Equal(a.UnappliedIgnores, b.UnappliedIgnores)
}

// CandidateQueues are the queues a pipeline takes jobs from, in
// ArchiveBot's order (pipeline/archivebot/control.py candidate_queues):
// ao_only with large serves pending-ao then pending-large; ao_only alone
// pending-ao; otherwise the named queues pending:NAME whose NAME is part
// of the nickname, pending-large when large, pending, pending-ao. named
// are the existing pending:NAME queues.
func CandidateQueues(named []string, nickname string, aoOnly, large bool) []string {
	switch {
	case aoOnly && large:
		return []string{rkeys.QueuePendingAO, rkeys.QueuePendingLarge}
	case aoOnly:
		return []string{rkeys.QueuePendingAO}
	}
	var out []string
	for _, q := range named {
		if name, ok := strings.CutPrefix(q, rkeys.NamedQueuePrefix); ok && strings.Contains(nickname, name) {
			out = append(out, q)
		}
	}
	if large {
		out = append(out, rkeys.QueuePendingLarge)
	}
	return append(out, rkeys.QueuePending, rkeys.QueuePendingAO)
}
