package rkeys

import (
	"context"
	"fmt"
	"strconv"
)

// SetRules stores version of a crawl's rules (rulesJSON, the rule list)
// in IDENT_rules and makes it the latest when it is newer. Repeating it is
// a no-op; an older version never replaces a newer latest.
func (s *Store) SetRules(ctx context.Context, ident string, version int64, rulesJSON string) error {
	if version < 0 {
		return fmt.Errorf("set rules of job %s: %w: version %d: must be >= 0", ident, ErrInvalid, version)
	}
	keys := map[string]string{"job": s.keys.Job(ident), "rules": s.keys.Rules(ident)}
	code, err := s.run(ctx, setRulesScript, keys, strconv.FormatInt(version, 10), rulesJSON).Int()
	if err != nil {
		return fmt.Errorf("set rules version %d of job %s: %w", version, ident, err)
	}
	return codeErr(code, "set rules version %d of job %s", version, ident)
}

// setRulesScript stores one rules version. ARGV: version rules_json
var setRulesScript = newScript([]string{"job", "rules"}, false, `
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
redis.call('HSET', rules, ARGV[1], ARGV[2])
local latest = tonumber(redis.call('HGET', rules, 'latest') or '-1')
if tonumber(ARGV[1]) > latest then redis.call('HSET', rules, 'latest', ARGV[1]) end
inherit_ttl(job, rules)
return CODE_APPLIED
`)

// CrawlLive is what a crawl's hosts read while it runs.
type CrawlLive struct {
	// Ignores are the members of IDENT_ignores.
	Ignores []string
	// SuppressIgnoreReports is ArchiveBot's per-job suppress_ignore_reports
	// flag (its !igoff).
	SuppressIgnoreReports bool
	// RulesVersion and RulesJSON are the latest rules (-1 and "" when none
	// were stored).
	RulesVersion int64
	RulesJSON    string
	// Concurrency, DelayMinMS and DelayMaxMS are the job hash's
	// concurrency, delay_min and delay_max (-1 when a field is absent or
	// not a number): a running page batch follows them.
	Concurrency, DelayMinMS, DelayMaxMS int
	// BytesDownloaded is the job's bytes_downloaded (a crawl's byte limit).
	BytesDownloaded int64
}

// CrawlLive reads a crawl's ignores, ignore-report flag and latest rules
// in one round trip. A job that does not exist is ErrJobNotFound.
func (s *Store) CrawlLive(ctx context.Context, ident string) (CrawlLive, error) {
	keys := map[string]string{"job": s.keys.Job(ident), "ignores": s.keys.Ignores(ident), "rules": s.keys.Rules(ident)}
	v, err := s.run(ctx, crawlLiveScript, keys).Slice()
	if err != nil {
		return CrawlLive{}, fmt.Errorf("read live settings of job %s: %w", ident, err)
	}
	if len(v) == 1 {
		return CrawlLive{}, codeErr(int(asInt(v[0])), "read live settings of job %s", ident)
	}
	if len(v) != 8 {
		return CrawlLive{}, fmt.Errorf("read live settings of job %s: %w: reply of %d parts", ident, errMalformed, len(v))
	}
	out := CrawlLive{RulesVersion: -1, Concurrency: liveInt(v[4]), DelayMinMS: liveInt(v[5]), DelayMaxMS: liveInt(v[6]),
		BytesDownloaded: max(int64(liveInt(v[7])), 0)}
	members, _ := v[0].([]any)
	for _, m := range members {
		if str, ok := m.(string); ok {
			out.Ignores = append(out.Ignores, str)
		}
	}
	flag, _ := v[1].(string)
	out.SuppressIgnoreReports = flag == "true" || flag == "1" || flag == "True"
	if ver, ok := v[2].(string); ok && ver != "" {
		n, err := strconv.ParseInt(ver, 10, 64)
		if err != nil {
			return CrawlLive{}, fmt.Errorf("read live settings of job %s: rules version %q: %w", ident, ver, errMalformed)
		}
		out.RulesVersion = n
		out.RulesJSON, _ = v[3].(string)
	}
	return out, nil
}

// crawlLiveScript reads the live settings (read-only).
var crawlLiveScript = newScript([]string{"job", "ignores", "rules"}, false, `
if redis.call('EXISTS', job) == 0 then return {CODE_NOT_FOUND} end
local latest = redis.call('HGET', rules, 'latest')
local list = false
if latest then list = redis.call('HGET', rules, latest) end
local pace = redis.call('HMGET', job, 'concurrency', 'delay_min', 'delay_max', 'bytes_downloaded')
return {redis.call('SMEMBERS', ignores), redis.call('HGET', job, 'suppress_ignore_reports') or '', latest or '', list or '',
  pace[1] or '', pace[2] or '', pace[3] or '', pace[4] or ''}
`)

// liveInt reads one of CrawlLive's job hash numbers (-1: absent or not a
// number).
func liveInt(v any) int {
	s, _ := v.(string)
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func asInt(v any) int64 {
	n, _ := v.(int64)
	return n
}
