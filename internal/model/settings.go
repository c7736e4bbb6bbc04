package model

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// MaxConcurrency is the most hooks (a crawl: pages) a job runs at once:
// a crawl claims that many pages from its frontier in one call
// (frontier.MaxClaim), and no worker pool runs more.
const MaxConcurrency = 1000

// ValidateConcurrency checks a job's concurrency: 0..MaxConcurrency, 0
// pausing the job (Settings.Validate's rule, for a CLI checking one flag).
func ValidateConcurrency(n int) error {
	if n < 0 || n > MaxConcurrency {
		return fmt.Errorf("concurrency %d: must be 0..%d (0 pauses the job)", n, MaxConcurrency)
	}
	return nil
}

// Settings are the job settings that may change while a job runs
// (ArchiveBot's `set` commands and archiveflow's set_settings signal).
type Settings struct {
	Concurrency int      `json:"concurrency"` // 0 pauses the job
	DelayMinMS  int      `json:"delay_min"`   // milliseconds, as ArchiveBot stores them
	DelayMaxMS  int      `json:"delay_max"`
	UserAgent   string   `json:"user_agent,omitempty"`
	Ignores     []string `json:"ignores,omitempty"` // RE2 patterns (ValidateIgnore)
	// SuppressIgnoreReports is ArchiveBot's suppress_ignore_reports flag
	// (the bot's !igoff / !igon): ignored URLs are not reported as
	// `ignore` log packets.
	SuppressIgnoreReports bool `json:"suppress_ignore_reports,omitempty"`
	// UnappliedIgnores are patterns ArchiveBot's bot put into the job's
	// ignore set that archiveflow cannot apply (ValidateIgnore refuses
	// them, e.g. Python-only lookarounds): they stay in IDENT_ignores, so
	// the bot and dashboard still list them, but match nothing here.
	UnappliedIgnores []string `json:"unapplied_ignores,omitempty"`
	// BotOwned marks settings read from the job's hash, which ArchiveBot's
	// bot owns (internal/abpipeline): Redis has them already, so they are
	// not written back — a write-back could undo a change the bot made
	// after they were read.
	BotOwned bool `json:"bot_owned,omitempty"`
	// BotAge is the bot's settings_age at which BotOwned settings were
	// read. Several pipelines watch a job and each applies what it read,
	// so a read can reach the workflow after a newer one: a job never goes
	// back to bot settings older than those it has (OlderThan).
	BotAge int64 `json:"bot_age,omitempty"`
	// Crawl limits (0 = none): a crawl that reaches one stops claiming
	// pages, lets the pages in flight end and finishes with the limit
	// named (docs/crawls.md, "Limits"); its unfetched pages stay READY for
	// `starter retry --continue`. MaxPages is exact (the frontier's page
	// budget); MaxBytes (bytes_downloaded) and MaxDuration (from the start
	// of the crawl's run) may be passed by the pages in flight.
	MaxPages    int64         `json:"max_pages,omitempty"`
	MaxBytes    int64         `json:"max_bytes,omitempty"`
	MaxDuration time.Duration `json:"max_duration,omitempty"`
}

// OlderThan reports whether s are the bot's settings read at a lower
// settings_age than cur's: applying them would undo a newer change of the
// bot's. Settings without an age (the CLI's, or read before ages were
// kept) are never older.
func (s Settings) OlderThan(cur Settings) bool {
	return s.BotOwned && s.BotAge > 0 && s.BotAge < cur.BotAge
}

// HasLimits reports whether any crawl limit is set.
func (s Settings) HasLimits() bool { return s.MaxPages > 0 || s.MaxBytes > 0 || s.MaxDuration > 0 }

// validateLimits checks the crawl limits: each >= 0 (0 = none), a
// duration in whole seconds (the job hash stores seconds).
func (s Settings) validateLimits() error {
	switch {
	case s.MaxPages < 0:
		return fmt.Errorf("max_pages %d: must be >= 0 (0 = no page limit)", s.MaxPages)
	case s.MaxBytes < 0:
		return fmt.Errorf("max_bytes %d: must be >= 0 (0 = no byte limit)", s.MaxBytes)
	case s.MaxDuration < 0:
		return fmt.Errorf("max_duration %s: must be >= 0 (0 = no duration limit)", s.MaxDuration)
	case s.MaxDuration%time.Second != 0:
		return fmt.Errorf("max_duration %s: must be whole seconds", s.MaxDuration)
	}
	return nil
}

// SplitIgnores separates patterns ValidateIgnore accepts (applied) from
// those it refuses (unapplied, each with its reason), keeping their order.
func SplitIgnores(patterns []string) (applied, unapplied []string, reasons []error) {
	for _, p := range patterns {
		if err := ValidateIgnore(p); err != nil {
			unapplied = append(unapplied, p)
			reasons = append(reasons, err)
			continue
		}
		applied = append(applied, p)
	}
	return applied, unapplied, reasons
}

// Validate checks the settings' ranges and every ignore pattern. It is the
// one check of job settings: the starter, the workflow's set_settings
// handlers, the activities and the Redis store all call it, so a value it
// refuses is refused before a job starts or a running job changes, and
// the running job keeps its settings.
func (s Settings) Validate() error {
	switch {
	case ValidateConcurrency(s.Concurrency) != nil:
		return ValidateConcurrency(s.Concurrency)
	case s.DelayMinMS < 0:
		return fmt.Errorf("delay_min %d ms: must be >= 0", s.DelayMinMS)
	case s.DelayMaxMS < s.DelayMinMS:
		return fmt.Errorf("delay_max %d ms: must be >= delay_min (%d ms)", s.DelayMaxMS, s.DelayMinMS)
	}
	if err := s.validateLimits(); err != nil {
		return err
	}
	for _, p := range s.Ignores {
		if err := ValidateIgnore(p); err != nil {
			return err
		}
	}
	for _, p := range s.UnappliedIgnores {
		if p == "" {
			return fmt.Errorf("unapplied ignore pattern %q: must not be empty", p)
		}
	}
	return nil
}

// ignorePlaceholders are ArchiveBot's ignore pattern placeholders, replaced
// by the (quoted) seed URL and its host before a pattern is compiled.
var ignorePlaceholders = strings.NewReplacer("{primary_url}", "", "{primary_netloc}", "")

// pythonOnly lists constructs Python's re accepts and RE2 does not:
// ArchiveBot's ignore sets may use them.
var pythonOnly = []struct{ token, what string }{
	{"(?<=", "lookbehind"},
	{"(?<!", "negative lookbehind"},
	{"(?=", "lookahead"},
	{"(?!", "negative lookahead"},
	{"(?>", "atomic group"},
	{"(?P=", "named backreference"},
	{"(?#", "inline comment"},
	{"(?(", "conditional group"},
}

var backref = regexp.MustCompile(`\\[1-9]`)

// ValidateIgnore checks one ignore pattern: not blank, and a Go RE2
// regular expression once ArchiveBot's {primary_url} and {primary_netloc}
// placeholders are expanded. A pattern that fails because of Python-only
// syntax says so.
func ValidateIgnore(pattern string) error {
	if strings.TrimSpace(pattern) == "" {
		return fmt.Errorf("ignore pattern %q: must not be empty", pattern)
	}
	_, err := regexp.Compile(ignorePlaceholders.Replace(pattern))
	if err == nil {
		return nil
	}
	for _, p := range pythonOnly {
		if strings.Contains(pattern, p.token) {
			return fmt.Errorf("ignore pattern %q: uses %s %q, which is Python-only syntax: archiveflow patterns are Go RE2 (https://github.com/google/re2/wiki/Syntax)", pattern, p.what, p.token)
		}
	}
	if backref.MatchString(pattern) {
		return fmt.Errorf("ignore pattern %q: uses a backreference (\\1…), which is Python-only syntax: archiveflow patterns are Go RE2", pattern)
	}
	return fmt.Errorf("ignore pattern %q: not a valid Go RE2 regular expression: %w", pattern, err)
}

// Fetch depths (ArchiveBot's fetch_depth): one page, or the whole site.
const (
	FetchShallow = "shallow"
	FetchInf     = "inf"
)

// FetchDepths lists every fetch depth.
var FetchDepths = []string{FetchShallow, FetchInf}

// ValidateFetchDepth checks an ArchiveBot fetch_depth value.
func ValidateFetchDepth(depth string) error {
	if !slices.Contains(FetchDepths, depth) {
		return fmt.Errorf("fetch_depth %q: must be %s or %s", depth, FetchShallow, FetchInf)
	}
	return nil
}
