package rkeys

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pipeline is one worker process as seen in Redis (pipeline:ID).
type Pipeline struct {
	ID         string // lower-case hex; see PipelineID
	Hostname   string
	FQDN       string
	PID        int
	Nickname   string
	Version    string
	TaskQueues []string
	Status     string // e.g. "running", "draining"
	StartedAt  time.Time
	Stats      HostStats
	// LogOutbox, when set, is the backlog of the host's job-log outbox
	// (ARCHIVE_DIR/outbox): log batches spooled while Redis was unreachable
	// and not yet delivered, and batches refused for good and set aside.
	LogOutbox *OutboxBacklog
	// NotClaiming, when set, says why the process claims no work (the disk
	// guard: "archive disk low: …"), in the record's not_claiming field;
	// the field is absent while it claims.
	NotClaiming string
	// CriticalChecks, when set, is how many of the host's checks in the
	// fleet's health are critical (internal/fleethealth), in the record's
	// critical_checks field.
	CriticalChecks *int
	// WebUI is the Temporal Web UI the process's stack serves
	// (temporal.ui_url), published as the stack's (Keys.WebUI) with the
	// record; "" publishes nothing.
	WebUI string
}

// FieldNotClaiming is archiveflow's pipeline record field saying why the
// worker claims no work (Pipeline.NotClaiming).
const FieldNotClaiming = "not_claiming"

// OutboxBacklog is what a job-log outbox holds.
type OutboxBacklog struct {
	Pending, Rejected int
}

// PipelineID derives the hex id the way ArchiveBot's pipelines do:
// md5("HOSTNAME:FQDN:PID").
func PipelineID(hostname, fqdn string, pid int) string {
	sum := md5.Sum([]byte(fmt.Sprintf("%s:%s:%d", hostname, fqdn, pid)))
	return hex.EncodeToString(sum[:])
}

func (p Pipeline) validate() error {
	if p.ID == "" {
		return errors.New("pipeline id: must not be empty")
	}
	if _, err := hex.DecodeString(p.ID); err != nil {
		return fmt.Errorf("pipeline id %q: must be hex", p.ID)
	}
	if p.Hostname == "" {
		return fmt.Errorf("pipeline %s hostname: must not be empty", p.ID)
	}
	if p.PID <= 0 {
		return fmt.Errorf("pipeline %s pid %d: must be > 0", p.ID, p.PID)
	}
	return nil
}

// fields renders the record with ArchiveBot's field names and encodings
// (pid, byte counts and ts integers; percentages and load averages floats).
func (p Pipeline) fields(now time.Time) (map[string]any, error) {
	queues, err := json.Marshal(p.TaskQueues)
	if err != nil {
		return nil, err
	}
	if p.TaskQueues == nil {
		queues = []byte("[]")
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	fields := map[string]any{
		"id":               PipelineMember(p.ID),
		"hostname":         p.Hostname,
		"fqdn":             p.FQDN,
		"pid":              p.PID,
		"nickname":         p.Nickname,
		"version":          p.Version,
		"status":           p.Status,
		"mem_usage":        f(p.Stats.MemUsagePercent),
		"mem_available":    p.Stats.MemAvailable,
		"disk_usage":       f(p.Stats.DiskUsagePercent),
		"disk_available":   p.Stats.DiskAvailable,
		"load_average_1m":  f(p.Stats.Load1),
		"load_average_5m":  f(p.Stats.Load5),
		"load_average_15m": f(p.Stats.Load15),
		"ts":               now.Unix(),
		"task_queues":      string(queues),
		"started_at":       p.StartedAt.Unix(),
		"go":               runtime.Version(),
	}
	if p.NotClaiming != "" {
		fields[FieldNotClaiming] = p.NotClaiming
	}
	if p.CriticalChecks != nil {
		fields["critical_checks"] = *p.CriticalChecks
	}
	if p.LogOutbox != nil {
		fields["log_outbox_pending"] = p.LogOutbox.Pending
		fields["log_outbox_rejected"] = p.LogOutbox.Rejected
	}
	return fields, nil
}

// WebUI returns the Temporal Web UI address the stack's workers publish
// (Pipeline.WebUI), "" when none is.
func (s *Store) WebUI(ctx context.Context) (string, error) {
	v, err := s.rdb.Get(ctx, s.keys.WebUI()).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the stack's web ui address: %w", err)
	}
	return v, nil
}

// PublishWebUI publishes url as the stack's Temporal Web UI address (as a
// pipeline record does, for as long): `starter dev` does it before its
// workers register, so the first command's links are right.
func (s *Store) PublishWebUI(ctx context.Context, url string) error {
	if err := s.rdb.Set(ctx, s.keys.WebUI(), url, s.opts.PipelineTTL).Err(); err != nil {
		return fmt.Errorf("publish the stack's web ui address: %w", err)
	}
	return nil
}

// RegisterPipeline writes a fresh pipeline:ID record (replacing any old
// one), adds it to `pipelines`, publishes it on archivebot:pipeline_updates
// and writes executive_instance:HOST:PID {boot_time}; all in one MULTI.
func (s *Store) RegisterPipeline(ctx context.Context, p Pipeline) error {
	return s.reportPipeline(ctx, p, true)
}

// RefreshPipeline rewrites the record's fields and TTLs (call every few
// seconds with fresh Stats). Absolute values: repeat-safe.
func (s *Store) RefreshPipeline(ctx context.Context, p Pipeline) error {
	return s.reportPipeline(ctx, p, false)
}

func (s *Store) reportPipeline(ctx context.Context, p Pipeline, fresh bool) error {
	if err := p.validate(); err != nil {
		return err
	}
	now := s.now()
	if p.StartedAt.IsZero() {
		p.StartedAt = now
	}
	fields, err := p.fields(now)
	if err != nil {
		return fmt.Errorf("report pipeline %s: %w", p.ID, err)
	}
	key := s.keys.Pipeline(p.ID)
	inst := s.keys.ExecutiveInstance(p.Hostname, p.PID)
	_, err = s.rdb.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		if fresh {
			tx.Del(ctx, key)
		}
		tx.HSet(ctx, key, fields)
		if p.NotClaiming == "" {
			tx.HDel(ctx, key, FieldNotClaiming)
		}
		tx.Expire(ctx, key, s.opts.PipelineTTL)
		tx.SAdd(ctx, s.keys.Pipelines(), PipelineMember(p.ID))
		tx.HSet(ctx, inst, "boot_time", p.StartedAt.Unix(), "pipeline_id", PipelineMember(p.ID))
		tx.Expire(ctx, inst, s.opts.EventsTTL)
		tx.Publish(ctx, s.keys.PipelineChannel(), PipelineMember(p.ID))
		if p.WebUI != "" {
			tx.Set(ctx, s.keys.WebUI(), p.WebUI, s.opts.PipelineTTL)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("report pipeline %s (%s pid %d): %w", p.ID, p.Hostname, p.PID, err)
	}
	return nil
}

// UnregisterPipeline removes the record on clean exit (ArchiveBot's
// unregister: DEL, SREM, PUBLISH) and the executive instance.
func (s *Store) UnregisterPipeline(ctx context.Context, p Pipeline) error {
	_, err := s.rdb.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		tx.Del(ctx, s.keys.Pipeline(p.ID), s.keys.ExecutiveInstance(p.Hostname, p.PID))
		tx.SRem(ctx, s.keys.Pipelines(), PipelineMember(p.ID))
		tx.Publish(ctx, s.keys.PipelineChannel(), PipelineMember(p.ID))
		return nil
	})
	if err != nil {
		return fmt.Errorf("unregister pipeline %s: %w", p.ID, err)
	}
	return nil
}

// PipelineView is a pipeline record as read back.
type PipelineView struct {
	ID     string // hex id
	Fields map[string]string
	TS     time.Time
}

// ListPipelines reads every live pipeline record and prunes `pipelines`
// members whose record expired (a crashed worker).
func (s *Store) ListPipelines(ctx context.Context) ([]PipelineView, error) {
	members, err := s.rdb.SMembers(ctx, s.keys.Pipelines()).Result()
	if err != nil {
		return nil, fmt.Errorf("list pipelines: %w", err)
	}
	sort.Strings(members)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(members))
	for i, m := range members {
		cmds[i] = pipe.HGetAll(ctx, s.keys.Namespace()+m)
	}
	if len(members) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("list pipelines: %w", err)
		}
	}
	var out []PipelineView
	var stale []any
	for i, m := range members {
		h := cmds[i].Val()
		if len(h) == 0 {
			stale = append(stale, m)
			continue
		}
		v := PipelineView{ID: m[len(pipelinePrefix):], Fields: h}
		if ts, err := strconv.ParseInt(h["ts"], 10, 64); err == nil {
			v.TS = time.Unix(ts, 0)
		} else {
			return nil, fmt.Errorf("list pipelines: %s field ts = %q: %w: must be integer unix seconds", m, h["ts"], errMalformed)
		}
		out = append(out, v)
	}
	if len(stale) > 0 {
		if err := s.rdb.SRem(ctx, s.keys.Pipelines(), stale...).Err(); err != nil {
			return nil, fmt.Errorf("list pipelines: prune %d stale members: %w", len(stale), err)
		}
	}
	return out, nil
}
