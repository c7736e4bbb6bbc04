// Package fleethealth owns the fleet's health in Flapjack's Redis layout
// (../shared/seeds/flapjack-redis.txt): from every final hook outcome it
// keeps two kinds of check — host × plugin (ENTITY the worker host's
// pipeline nickname, CHECK the plugin; its state derived from that host's
// recent outcomes of the plugin against the thresholds of config flapjack.*)
// and job × hook (ENTITY the job's IDENT, CHECK the hook; its state the
// hook's final status, expiring and purged with the job) — in Flapjack's key
// shapes (check:ENTITY:CHECK, ENTITY:CHECK:states and the per-change
// TIMESTAMP keys, sorted_state_timestamps, current_checks:ENTITY,
// current_entities, all_checks, all_checks:ENTITY, all_entity_*), the exact
// failed_checks sorted set, Flapjack-style maintenances (unscheduled ones
// acknowledge a problem; a host-wide one, CHECK "*", drains the host's
// workers) and notifications on problem, recovery and acknowledgement.
//
// Every outcome is written in one round trip (one Lua script run through
// rkeys' script framework), exactly once per outcome id (the job's
// IDENT_ops set), so activity retries and the workflow's fallback write
// change nothing. With flapjack.feed on, an outcome is pushed to Flapjack's
// events queue instead, and the structures Flapjack's processor owns are
// left to it.
package fleethealth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Flapjack states.
const (
	StateOK       = "ok"
	StateWarning  = "warning"
	StateCritical = "critical"
)

// HostWide is the CHECK of a maintenance of a whole host.
const HostWide = "*"

// MaintenancePrefix starts the output of a hook skipped because its plugin
// is in maintenance on the host; such an outcome leaves the check's state
// as it is.
const MaintenancePrefix = "in maintenance: "

// CannotRunPrefix starts the output of a hook skipped because it cannot run
// on the host that planned it: a required binary or plugin is missing, or
// its plugin's files are malformed (engine's plan sets it). Such an outcome
// is a soft failure of the host × plugin check, a warning naming the
// reason: the host lacks something an operator installs, but nothing broke
// at run time, so it is not critical and notifies no one. A hook disabled
// by configuration, or one that skips itself, stays ok.
const CannotRunPrefix = "cannot run on this host: "

// Class is what one final outcome says about a host × plugin check.
type Class byte

// Outcome classes.
const (
	ClassOK      Class = 'o' // succeeded, noresults, skipped by its config
	ClassSoft    Class = 'w' // the hook reported its own failure (exit 0), or cannot run on this host
	ClassHard    Class = 'c' // failed hard: exit != 0, a limit, could not start
	ClassNeutral Class = 'n' // skipped by a maintenance: says nothing
)

// Classify is the class of a final result.
func Classify(r model.ArchiveResult) Class {
	switch r.Status {
	case model.StatusSucceeded, model.StatusNoResults:
		return ClassOK
	case model.StatusSkipped:
		switch {
		case strings.HasPrefix(r.OutputStr, MaintenancePrefix):
			return ClassNeutral
		case strings.HasPrefix(r.OutputStr, CannotRunPrefix):
			return ClassSoft
		}
		return ClassOK
	}
	if r.ExitCode == 0 && r.Limit == "" {
		return ClassSoft
	}
	return ClassHard
}

// Options configure a Health.
type Options struct {
	// OKAfter: a host × plugin check is ok when its last OKAfter outcomes
	// were ok (config flapjack.ok_after).
	OKAfter int
	// CriticalAfter: it is critical when its last CriticalAfter outcomes
	// failed hard (flapjack.critical_after); any other mix is warning.
	CriticalAfter int
	// HistoryCap bounds each check's state history and notification lists
	// (flapjack.history_cap).
	HistoryCap int
	// JobTTL is the expiry of a job × hook check's keys while the job has
	// none (a running job); a finished job's keys give theirs
	// (flapjack.job_ttl). The purge removes them with the job.
	JobTTL time.Duration
	// Queue is the list notifications are pushed to (flapjack.notifications).
	Queue string
	// Webhook: notifications also go to the webhook outbox (WebhookOutbox)
	// that the workers POST from (flapjack.webhook set).
	Webhook bool
	// Feed: push outcomes to Flapjack's events queue and leave its
	// structures to its processor (flapjack.feed).
	Feed bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (o Options) validate() error {
	switch {
	case o.OKAfter < 1:
		return fmt.Errorf("fleet health ok_after %d: must be >= 1", o.OKAfter)
	case o.CriticalAfter < 1:
		return fmt.Errorf("fleet health critical_after %d: must be >= 1", o.CriticalAfter)
	case o.HistoryCap < 1:
		return fmt.Errorf("fleet health history_cap %d: must be >= 1", o.HistoryCap)
	case o.JobTTL < time.Second:
		return fmt.Errorf("fleet health job_ttl %s: must be >= 1s", o.JobTTL)
	case o.Queue == "":
		return errors.New("fleet health notification queue: must not be empty")
	}
	return nil
}

// Health reads and writes the fleet's health on the Redis of an rkeys
// Store (its namespace prefixes every key).
type Health struct {
	store *rkeys.Store
	ns    string
	opts  Options
}

// New returns the fleet health over store.
func New(store *rkeys.Store, opts Options) (*Health, error) {
	if store == nil {
		return nil, errors.New("fleet health: store is required")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Health{store: store, ns: store.Keys().Namespace(), opts: opts}, nil
}

// ErrInvalid marks bad input: an unknown host or plugin, a duration <= 0,
// an empty summary.
var ErrInvalid = errors.New("invalid")

// Key names (without namespace) of Flapjack's layout and archiveflow's own.
const (
	keyFailedChecks  = "failed_checks"
	keyHealthHosts   = "archiveflow:health_hosts"
	keyWebhookOutbox = "archiveflow:webhook_outbox"
	keyEvents        = "events" // Flapjack's event queue
)

// CheckKey is check:ENTITY:CHECK, the current state hash.
func (h *Health) CheckKey(entity, check string) string {
	return h.ns + "check:" + entity + ":" + check
}

// prefix is ENTITY:CHECK, which Flapjack's per-check keys start with.
func (h *Health) prefix(entity, check string) string { return h.ns + entity + ":" + check }

// FailedChecks is the failed_checks sorted set.
func (h *Health) FailedChecks() string { return h.ns + keyFailedChecks }

// HealthHosts is archiveflow's zset of host entities (score: last outcome).
func (h *Health) HealthHosts() string { return h.ns + keyHealthHosts }

// WebhookOutbox is archiveflow's list of notifications still to POST.
func (h *Health) WebhookOutbox() string { return h.ns + keyWebhookOutbox }

// QueueKey is the notification queue.
func (h *Health) QueueKey() string { return h.ns + h.opts.Queue }

// EventsKey is Flapjack's events queue.
func (h *Health) EventsKey() string { return h.ns + keyEvents }

// FromConfig is the fleet health of config flapjack.* over store; nil
// when flapjack.enabled is false.
func FromConfig(store *rkeys.Store, cfg *config.Config) (*Health, error) {
	f := cfg.Flapjack
	if !f.Enabled {
		return nil, nil
	}
	return New(store, Options{OKAfter: f.OKAfter, CriticalAfter: f.CriticalAfter, HistoryCap: f.HistoryCap,
		JobTTL: f.JobTTL, Queue: f.Notifications, Webhook: f.Webhook != "", Feed: f.Feed})
}
