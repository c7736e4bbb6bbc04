package rkeys

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/archiveflow/archiveflow/internal/model"
)

// SetSettings writes the job's settings as absolute values (concurrency,
// delay_min, delay_max, user_agent, suppress_ignore_reports — present
// only when true, as ArchiveBot's bot writes it —, a crawl's limits
// (limitFields, present only when set) and the whole
// IDENT_ignores set: the applied and the unapplied patterns). When
// anything changed, settings_age is bumped and published on
// archivebot:job:IDENT; an identical repeat changes nothing. It returns the
// new settings_age, or 0 when nothing changed. Settings that
// model.Settings.Validate refuses are ErrInvalid and never written.
// Settings read from the bot's hash (BotOwned) are Redis' own: nothing is
// written.
func (s *Store) SetSettings(ctx context.Context, ident string, st model.Settings) (int64, error) {
	if err := st.Validate(); err != nil {
		return 0, fmt.Errorf("set settings of job %s: %w: %w", ident, ErrInvalid, err)
	}
	if st.BotOwned {
		return 0, nil
	}
	fields := []string{
		"concurrency", strconv.Itoa(st.Concurrency),
		"delay_min", strconv.Itoa(st.DelayMinMS),
		"delay_max", strconv.Itoa(st.DelayMaxMS),
		"user_agent", st.UserAgent,
		"suppress_ignore_reports", suppressFlag(st.SuppressIgnoreReports),
	}
	fields = append(fields, limitFields(st)...)
	args := []any{s.keys.JobChannel(ident), unixInt(s.now()), len(fields) / 2}
	for _, f := range fields {
		args = append(args, f)
	}
	for _, p := range st.Ignores {
		args = append(args, p)
	}
	for _, p := range st.UnappliedIgnores {
		args = append(args, p)
	}
	keys := map[string]string{"job": s.keys.Job(ident), "ignores": s.keys.Ignores(ident)}
	age, err := s.run(ctx, setSettingsScript, keys, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("set settings of job %s: %w", ident, err)
	}
	if age < 0 {
		return 0, codeErr(int(age), "set settings of job %s", ident)
	}
	return age, nil
}

// setSettingsScript writes absolute settings and bumps settings_age only
// when something changed.
// ARGV: job_channel ts n_fields name value ... ignores...
var setSettingsScript = newScript([]string{"job", "ignores"}, false, `
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
local changed = false
local n = tonumber(ARGV[3])
local pos = 4
for i = 1, n do
  local name, value = ARGV[pos], ARGV[pos + 1]
  pos = pos + 2
  local cur = redis.call('HGET', job, name)
  if value == '' then
    if cur then redis.call('HDEL', job, name); changed = true end
  elseif cur ~= value then
    redis.call('HSET', job, name, value); changed = true
  end
end
local want = {}
local nwant = 0
for i = pos, #ARGV do
  if not want[ARGV[i]] then want[ARGV[i]] = true; nwant = nwant + 1 end
end
local have = redis.call('SMEMBERS', ignores)
local same = #have == nwant
if same then
  for _, m in ipairs(have) do if not want[m] then same = false; break end end
end
if not same then
  redis.call('DEL', ignores)
  for m in pairs(want) do redis.call('SADD', ignores, m) end
  inherit_ttl(job, ignores)
  changed = true
end
if not changed then return CODE_NOOP end
local age = redis.call('HINCRBY', job, 'settings_age', 1)
redis.call('HSET', job, 'ts', ARGV[2])
redis.call('PUBLISH', ARGV[1], age)
return age
`)

// suppressFlag is suppress_ignore_reports as ArchiveBot's bot writes it:
// "true" when set, absent (empty here: the field is deleted) otherwise.
func suppressFlag(on bool) string {
	if on {
		return "true"
	}
	return ""
}

// limitFields are a crawl's limits as job hash fields (FieldMaxPages,
// FieldMaxBytes, FieldMaxDuration in seconds), each "" (absent) when 0.
func limitFields(st model.Settings) []string {
	num := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	return []string{
		FieldMaxPages, num(st.MaxPages),
		FieldMaxBytes, num(st.MaxBytes),
		FieldMaxDuration, num(int64(st.MaxDuration / time.Second)),
	}
}
