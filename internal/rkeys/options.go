package rkeys

import (
	"fmt"
	"os"
	"time"

	"github.com/archiveflow/archiveflow/internal/model"
)

// minPacketCap is the smallest packet cap that fits a download packet.
const minPacketCap = 512

// Retention is how long a finished job's keys stay in Redis, per final state.
type Retention struct {
	Completed time.Duration // state finished (ArchiveBot: 48 h)
	Aborted   time.Duration // state aborted (ArchiveBot: 5 s)
	Failed    time.Duration // state failed
}

// Of is how long a job's keys are kept once it ended in state.
func (r Retention) Of(state model.JobState) time.Duration {
	switch state {
	case model.StateAborted:
		return r.Aborted
	case model.StateFailed:
		return r.Failed
	default:
		return r.Completed
	}
}

// Options configure a Store. The layout's values are required (they come
// from the resolved configuration, see internal/backend); only Host, PID and
// Now default to this process and the real clock.
type Options struct {
	// Namespace prefixes every key and channel; empty by default because
	// ArchiveBot's tools assume full control of the database.
	Namespace string
	// LogCap is the maximum number of entries kept in each IDENT_log; the
	// oldest are trimmed on every append.
	LogCap int
	// PacketCap is the maximum size in bytes of one encoded log packet;
	// longer messages/URLs are truncated with a marker.
	PacketCap int
	// Retention of finished jobs.
	Retention Retention
	// EventsTTL is the expiry of an events_archive hour list after its last
	// event, and of executive_instance records.
	EventsTTL time.Duration
	// AllPageEvents: every crawl page hook result goes into events_archive
	// (RecordPageEvents); false: only those that are not ok.
	AllPageEvents bool
	// PipelineTTL is the expiry of pipeline:ID records, refreshed on every
	// report, so a crashed worker disappears by itself.
	PipelineTTL time.Duration
	// LogBatchWindow is how many recent log batch ids are remembered per job
	// to make a repeated AppendLog a no-op.
	LogBatchWindow int
	// OwnResponseCounters (required): when true archiveflow writes r1xx..r5xx,
	// runk and error_count from hook Responses and moves
	// last_analyzed_log_entry past its own download packets so ArchiveBot's
	// log analyzer never counts them again; when false archiveflow never
	// touches those fields and leaves them to ArchiveBot's analyzer.
	OwnResponseCounters *bool
	// Host and PID identify this process in event_counters:HOST:PID and
	// executive_instance:HOST:PID (default: os.Hostname, os.Getpid).
	Host string
	PID  int
	// Now is the clock (default time.Now); tests pin it.
	Now func() time.Time
}

// Bool returns a pointer to b, for Options.OwnResponseCounters.
func Bool(b bool) *bool { return &b }

// withDefaults fills Host, PID and Now and validates the result.
func (o Options) withDefaults() (Options, error) {
	if o.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return o, fmt.Errorf("redis options: hostname: %w", err)
		}
		o.Host = h
	}
	if o.PID == 0 {
		o.PID = os.Getpid()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.LogCap < 1:
		return o, fmt.Errorf("redis log cap %d: must be >= 1", o.LogCap)
	case o.PacketCap < minPacketCap:
		return o, fmt.Errorf("redis packet cap %d bytes: must be >= %d", o.PacketCap, minPacketCap)
	case o.Retention.Completed < time.Second:
		return o, fmt.Errorf("redis retention completed %s: must be >= 1s", o.Retention.Completed)
	case o.Retention.Aborted < time.Second:
		return o, fmt.Errorf("redis retention aborted %s: must be >= 1s", o.Retention.Aborted)
	case o.Retention.Failed < time.Second:
		return o, fmt.Errorf("redis retention failed %s: must be >= 1s", o.Retention.Failed)
	case o.EventsTTL < time.Second:
		return o, fmt.Errorf("redis events ttl %s: must be >= 1s", o.EventsTTL)
	case o.PipelineTTL < time.Second:
		return o, fmt.Errorf("redis pipeline ttl %s: must be >= 1s", o.PipelineTTL)
	case o.LogBatchWindow < 1:
		return o, fmt.Errorf("redis log batch window %d: must be >= 1", o.LogBatchWindow)
	case o.OwnResponseCounters == nil:
		return o, fmt.Errorf("redis own response counters: must be set (true or false)")
	}
	return o, nil
}

// seconds renders a duration as whole seconds for EXPIRE (at least 1).
func seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}
