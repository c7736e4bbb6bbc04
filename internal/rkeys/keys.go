package rkeys

import (
	"fmt"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/model"
)

// Channel and key names without namespace. ArchiveBot's names are kept
// verbatim so its bot, dashboard and cogs read what archiveflow writes.
const (
	chanLogUpdates      = "updates"                     // ArchiveBot shared_config channels.log
	chanPipelineUpdates = "archivebot:pipeline_updates" // channels.pipeline
	chanJobPrefix       = "archivebot:job:"             // channels.job_prefix + IDENT

	keyPending             = "pending"
	keyWorking             = "working"
	keyJobsCompleted       = "jobs_completed"
	keyJobsAborted         = "jobs_aborted"
	keyJobsFailed          = "jobs_failed"
	keyFinishNotifications = "finish_notifications"
	keyPipelines           = "pipelines"
	keyTimeIndex           = "time-index"
	keyScheduled           = "scheduled"
	keyScheduledPurge      = "scheduled-purge"
	keyRetryAt             = "retry_at"
	keyEventCounters       = "event_counters"
	keyWebUI               = "archiveflow:web_ui"

	pipelinePrefix = "pipeline:"
)

// Keys computes every key and channel name under one namespace. The zero
// value is the un-namespaced ArchiveBot layout.
type Keys struct {
	ns string
}

// NewKeys returns the key set for namespace ns (used verbatim as a prefix,
// e.g. "archiveflow:"; empty = no prefix).
func NewKeys(ns string) (Keys, error) {
	if strings.ContainsAny(ns, " \t\r\n") {
		return Keys{}, fmt.Errorf("redis namespace %q: must not contain whitespace", ns)
	}
	return Keys{ns: ns}, nil
}

// Namespace returns the prefix.
func (k Keys) Namespace() string { return k.ns }

// Job is the IDENT hash.
func (k Keys) Job(ident string) string { return k.ns + ident }

// Log is the IDENT_log sorted set (ArchiveBot's log_key).
func (k Keys) Log(ident string) string { return k.ns + ident + "_log" }

// Ignores is the IDENT_ignores set (ArchiveBot's ignore_patterns_set_key).
func (k Keys) Ignores(ident string) string { return k.ns + ident + "_ignores" }

// Ops is archiveflow's IDENT_ops set of applied idempotency keys.
func (k Keys) Ops(ident string) string { return k.ns + ident + "_ops" }

// LogBatches is archiveflow's IDENT_logbatches zset: recently applied log
// batch ids scored by the log score they ended at.
func (k Keys) LogBatches(ident string) string { return k.ns + ident + "_logbatches" }

// Rules is archiveflow's IDENT_rules hash of a crawl's rules versions
// (field VERSION → the rule list as JSON, field latest → VERSION).
func (k Keys) Rules(ident string) string { return k.ns + ident + "_rules" }

// Tags is archiveflow's IDENT_tags set: the names of the Tag records the
// job's hooks printed (ArchiveBox's tags of the snapshot; not the worker
// tags of `submit --tag`, which only pick a task queue).
func (k Keys) Tags(ident string) string { return k.ns + ident + "_tags" }

// JobKeys lists every key belonging to one job (all expire together). A
// crawl's frontier keys hang off Job(ident) too; internal/frontier lists
// and expires them.
func (k Keys) JobKeys(ident string) []string {
	return []string{k.Job(ident), k.Log(ident), k.Ignores(ident), k.Ops(ident), k.LogBatches(ident), k.Rules(ident), k.Tags(ident)}
}

// HostBudget is archiveflow's hostbudget:HOST hash: a target host's
// politeness state shared by every worker and job (internal/hostbudget).
func (k Keys) HostBudget(host string) string { return k.ns + "hostbudget:" + host }

// HostBudgetPrefix is HostBudget's prefix, for scripts that derive a
// host's keys themselves (the frontier's claim).
func (k Keys) HostBudgetPrefix() string { return k.ns + "hostbudget:" }

// HostInflight is archiveflow's hostbudget:HOST:inflight zset: the fetch
// leases a host holds (member a lease token, score its expiry in ms).
func (k Keys) HostInflight(host string) string { return k.HostBudget(host) + ":inflight" }

// HostOverrides is archiveflow's hostbudget_overrides hash: HOST → the
// live per-host limits (`starter set IDENT host:HOST=...`).
func (k Keys) HostOverrides() string { return k.ns + "hostbudget_overrides" }

// Pending is ArchiveBot's pending list of idents.
func (k Keys) Pending() string { return k.ns + keyPending }

// Working is ArchiveBot's working list of idents.
func (k Keys) Working() string { return k.ns + keyWorking }

// JobsCounter is jobs_completed, jobs_aborted or jobs_failed for a final state.
func (k Keys) JobsCounter(s model.JobState) string {
	switch s {
	case model.StateAborted:
		return k.ns + keyJobsAborted
	case model.StateFailed:
		return k.ns + keyJobsFailed
	default:
		return k.ns + keyJobsCompleted
	}
}

// FinishNotifications is ArchiveBot's finish_notifications list.
func (k Keys) FinishNotifications() string { return k.ns + keyFinishNotifications }

// State is the kickq-style state:STATE set.
func (k Keys) State(s model.JobState) string { return k.ns + "state:" + string(s) }

// TimeIndex is the kickq-style time-index zset (score: queued_at).
func (k Keys) TimeIndex() string { return k.ns + keyTimeIndex }

// Scheduled is the zset of delayed jobs (score: not-before time).
func (k Keys) Scheduled() string { return k.ns + keyScheduled }

// ScheduledPurge is the zset of finished jobs (score: purge time).
func (k Keys) ScheduledPurge() string { return k.ns + keyScheduledPurge }

// RetryAt is the sorted set of jobs whose hooks wait for a later retry
// (kickq-style), scored by the due time in Unix seconds.
func (k Keys) RetryAt() string { return k.ns + keyRetryAt }

// EventsArchive is the Flapjack-style hourly events_archive:YYYYMMDDHH list.
func (k Keys) EventsArchive(t time.Time) string {
	return k.ns + "events_archive:" + t.UTC().Format("2006010215")
}

// EventCounters is the global event_counters hash.
func (k Keys) EventCounters() string { return k.ns + keyEventCounters }

// InstanceEventCounters is event_counters:HOST:PID.
func (k Keys) InstanceEventCounters(host string, pid int) string {
	return fmt.Sprintf("%s%s:%s:%d", k.ns, keyEventCounters, host, pid)
}

// WebUI is the Temporal Web UI address the stack's workers publish (a
// string, renewed with their pipeline records).
func (k Keys) WebUI() string { return k.ns + keyWebUI }

// ExecutiveInstance is executive_instance:HOST:PID.
func (k Keys) ExecutiveInstance(host string, pid int) string {
	return fmt.Sprintf("%sexecutive_instance:%s:%d", k.ns, host, pid)
}

// Pipeline is the pipeline:ID hash of one worker process.
func (k Keys) Pipeline(id string) string { return k.ns + PipelineMember(id) }

// PipelineLock is the claim lock of pipeline id (pipeline_lock:ID): the
// job it is pinned to (LockPipeline).
func (k Keys) PipelineLock(id string) string { return k.ns + "pipeline_lock:" + id }

// Pipelines is the set of pipeline members ("pipeline:ID").
func (k Keys) Pipelines() string { return k.ns + keyPipelines }

// PipelineMember is the value stored in the pipelines set and published on
// the pipeline channel: "pipeline:ID", as ArchiveBot's pipelines do.
func PipelineMember(id string) string { return pipelinePrefix + id }

// LogChannel is the channel ("updates") that carries the ident of a job
// whose log grew or whose state changed.
func (k Keys) LogChannel() string { return k.ns + chanLogUpdates }

// JobChannel is archivebot:job:IDENT, carrying the new settings_age.
func (k Keys) JobChannel(ident string) string { return k.ns + chanJobPrefix + ident }

// PipelineChannel is archivebot:pipeline_updates.
func (k Keys) PipelineChannel() string { return k.ns + chanPipelineUpdates }
