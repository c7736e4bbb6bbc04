package fleethealth

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Check is the current state of one check.
type Check struct {
	Entity     string    `json:"entity"`
	Check      string    `json:"check"`
	State      string    `json:"state"`
	LastChange time.Time `json:"last_change"`
	LastUpdate time.Time `json:"last_update"`
	// FailingSince is its failed_checks score (zero when not in it).
	FailingSince time.Time `json:"failing_since,omitzero"`
	// Maintenance is the maintenance in force, "" when none.
	Maintenance string `json:"maintenance,omitempty"`
	// Summary is why a check that is not ok changed into its state: the
	// summary of its last change ("" for an ok check).
	Summary string `json:"summary,omitempty"`
}

// Matrix is every host × plugin check, failing ones first (critical, then
// warning, then ok), then by host and plugin.
func (h *Health) Matrix(ctx context.Context) ([]Check, error) {
	rdb := h.store.Client()
	hosts, err := rdb.ZRange(ctx, h.HealthHosts(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet health: hosts: %w", err)
	}
	var out []Check
	for _, host := range hosts {
		plugins, err := rdb.ZRange(ctx, h.ns+"all_checks:"+host, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("fleet health of %s: %w", host, err)
		}
		for _, p := range plugins {
			c, err := h.check(ctx, host, p)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	rank := map[string]int{StateCritical: 0, StateWarning: 1, StateOK: 2}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if rank[a.State] != rank[b.State] {
			return rank[a.State] < rank[b.State]
		}
		if a.Entity != b.Entity {
			return a.Entity < b.Entity
		}
		return a.Check < b.Check
	})
	return out, nil
}

// check reads check:ENTITY:CHECK, its failed_checks score and maintenance.
func (h *Health) check(ctx context.Context, entity, check string) (Check, error) {
	rdb := h.store.Client()
	f, err := rdb.HMGet(ctx, h.CheckKey(entity, check), "state", "last_change", "last_update").Result()
	if err != nil {
		return Check{}, fmt.Errorf("fleet health of %s:%s: %w", entity, check, err)
	}
	c := Check{Entity: entity, Check: check}
	c.State, _ = f[0].(string)
	c.LastChange = unixField(f[1])
	c.LastUpdate = unixField(f[2])
	score, err := rdb.ZScore(ctx, h.FailedChecks(), entity+":"+check).Result()
	switch {
	case err == nil:
		c.FailingSince = time.Unix(int64(score), 0)
	case !errors.Is(err, redis.Nil):
		return Check{}, fmt.Errorf("fleet health of %s:%s: %w", entity, check, err)
	}
	m, ok, err := h.Active(ctx, entity, check)
	if err != nil {
		return Check{}, err
	}
	if ok {
		c.Maintenance = m.Reason()
	}
	if c.State != StateOK && !c.LastChange.IsZero() {
		key := h.prefix(entity, check) + ":" + strconv.FormatInt(c.LastChange.Unix(), 10) + ":summary"
		c.Summary, err = rdb.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Check{}, fmt.Errorf("fleet health of %s:%s: %w", entity, check, err)
		}
	}
	return c, nil
}

func unixField(v any) time.Time {
	s, _ := v.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// Change is one state change of a check.
type Change struct {
	Time         time.Time `json:"time"`
	State        string    `json:"state"`
	Summary      string    `json:"summary"`
	Count        int64     `json:"count"`
	CheckLatency float64   `json:"check_latency"` // whole seconds; 0 when the change has no check_latency key
}

// History is a check's current state and its last limit state changes,
// the newest first. A check never seen is an error naming it.
func (h *Health) History(ctx context.Context, entity, check string, limit int) (Check, []Change, error) {
	rdb := h.store.Client()
	n, err := rdb.Exists(ctx, h.CheckKey(entity, check)).Result()
	if err != nil {
		return Check{}, nil, fmt.Errorf("fleet health of %s:%s: %w", entity, check, err)
	}
	if n == 0 {
		return Check{}, nil, fmt.Errorf("fleet health of %s %s: %w: no such check (no outcome of that plugin on that host yet)", entity, check, ErrInvalid)
	}
	c, err := h.check(ctx, entity, check)
	if err != nil {
		return Check{}, nil, err
	}
	p := h.prefix(entity, check)
	ts, err := rdb.LRange(ctx, p+":states", int64(-limit), -1).Result()
	if err != nil {
		return Check{}, nil, fmt.Errorf("fleet health of %s:%s: %w", entity, check, err)
	}
	var out []Change
	for i := len(ts) - 1; i >= 0; i-- {
		t := ts[i]
		v, err := rdb.MGet(ctx, p+":"+t+":state", p+":"+t+":summary", p+":"+t+":count", p+":"+t+":check_latency").Result()
		if err != nil {
			return Check{}, nil, fmt.Errorf("fleet health of %s:%s: %w", entity, check, err)
		}
		ch := Change{Time: unixField(t)}
		ch.State, _ = v[0].(string)
		ch.Summary, _ = v[1].(string)
		cs, _ := v[2].(string)
		ch.Count, _ = strconv.ParseInt(cs, 10, 64)
		ls, _ := v[3].(string)
		ch.CheckLatency, _ = strconv.ParseFloat(ls, 64)
		out = append(out, ch)
	}
	return c, out, nil
}

// Critical counts host's critical checks (the pipeline:ID record says it).
func (h *Health) Critical(ctx context.Context, host string) (int, error) {
	rdb := h.store.Client()
	plugins, err := rdb.ZRange(ctx, h.ns+"all_checks:"+host, 0, -1).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range plugins {
		st, err := rdb.HGet(ctx, h.CheckKey(host, p), "state").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, err
		}
		if st == StateCritical {
			n++
		}
	}
	return n, nil
}

// FailedJobs lists the jobs with a failed hook in failed_checks (ENTITY an
// ident: the job × hook checks), each with its failed hooks.
func (h *Health) FailedJobs(ctx context.Context) (map[string][]string, error) {
	rdb := h.store.Client()
	members, err := rdb.ZRange(ctx, h.FailedChecks(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("failed checks: %w", err)
	}
	hosts, err := rdb.ZRange(ctx, h.HealthHosts(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("failed checks: %w", err)
	}
	isHost := map[string]bool{}
	for _, x := range hosts {
		isHost[x] = true
	}
	out := map[string][]string{}
	for _, m := range members {
		for i := 0; i < len(m); i++ {
			if m[i] == ':' {
				e, c := m[:i], m[i+1:]
				if !isHost[e] {
					out[e] = append(out[e], c)
				}
				break
			}
		}
	}
	return out, nil
}

// PurgeJob removes the job × hook checks of ident, its entity and its
// failed_checks members (the purge calls it with the job's own keys), in
// one script; it returns how many keys it deleted.
func (h *Health) PurgeJob(ctx context.Context, ident string) (int, error) {
	if ident == "" {
		return 0, fmt.Errorf("purge health of a job: %w: ident must not be empty", ErrInvalid)
	}
	n, err := h.store.RunScript(ctx, purgeScript, nil, nil, h.ns, h.opts.Now().Unix(), ident, h.FailedChecks()).Int()
	if err != nil {
		return 0, fmt.Errorf("purge health of job %s: %w", ident, err)
	}
	return n, nil
}

// purgeScript: ARGV 1 ns, 2 now, 3 ident, 4 failed_checks.
var purgeScript = rkeys.NewScript(nil, luaCommon+`
local e = ARGV[3]
local n = 0
for _, c in ipairs(redis.call('ZRANGE', NS .. 'all_checks:' .. e, 0, -1)) do
  local k = ck(e, c)
  for _, t in ipairs(redis.call('LRANGE', k .. ':states', 0, -1)) do
    n = n + redis.call('DEL', k .. ':' .. t .. ':state', k .. ':' .. t .. ':summary', k .. ':' .. t .. ':count', k .. ':' .. t .. ':check_latency')
  end
  n = n + redis.call('DEL', hk(e, c), k .. ':states', k .. ':sorted_state_timestamps')
  redis.call('ZREM', ARGV[4], e .. ':' .. c)
end
n = n + redis.call('DEL', NS .. 'all_checks:' .. e, NS .. 'current_checks:' .. e)
redis.call('ZREM', NS .. 'current_entities', e)
redis.call('HDEL', NS .. 'all_entity_names_by_id', e)
redis.call('HDEL', NS .. 'all_entity_ids_by_name', e)
return n
`)
