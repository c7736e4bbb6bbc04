package scope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Limits of a rule list (they keep a ruleset small enough to travel in
// workflow history and Redis).
const (
	MaxRules         = 1000
	MaxPatternBytes  = 4096
	MaxUserAgentSize = 1024
)

// ErrInvalidRules marks a rule list that breaks a rule of its format.
var ErrInvalidRules = errors.New("invalid rules")

// Rule is one mnbot rule: a URL pattern (Go RE2, searched anywhere in the
// URL as Python's re.search does) and the settings it sets for the URLs it
// matches. A nil setting is left to earlier rules (or the default).
type Rule struct {
	Pattern string `json:"pattern"`
	// Accept true puts a URL in scope (fetched and followed) whatever the
	// URL scope says; false keeps it out.
	Accept *bool `json:"accept,omitempty"`
	// Skip true moves a queued page to SKIPPED when it is dequeued.
	Skip *bool `json:"skip,omitempty"`
	// UA is the User-Agent the page is fetched with.
	UA *string `json:"ua,omitempty"`
}

// Rules is an ordered rule list; for each setting the last matching rule
// wins.
type Rules []Rule

// Versioned is a rule list with the version the workflow gave it (0 = the
// job's initial rules).
type Versioned struct {
	Version int64 `json:"version"`
	Rules   Rules `json:"rules"`
}

// ParseRules decodes a JSON rule list ([{"pattern": "...", "skip": true},
// ...]) and validates it. Unknown fields are refused, so a typo (e.g.
// "skipp") does not silently do nothing.
func ParseRules(data []byte) (Rules, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rs Rules
	if err := dec.Decode(&rs); err != nil {
		return nil, fmt.Errorf("%w: decode JSON rule list ([{\"pattern\": \"RE2\", \"accept\"|\"skip\": bool, \"ua\": \"string\"}, ...]): %v", ErrInvalidRules, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON value: want one rule list", ErrInvalidRules)
	}
	if err := rs.Validate(); err != nil {
		return nil, err
	}
	return rs, nil
}

// Validate checks every rule: a non-empty RE2 pattern, at least one
// setting, a user agent without control characters. The error names the
// rule by its position (1-based) and pattern.
func (rs Rules) Validate() error {
	_, err := rs.Compile()
	return err
}

// RuleSet is a compiled rule list.
type RuleSet struct {
	rules Rules
	res   []*regexp.Regexp
}

// Compile validates and compiles the rules.
func (rs Rules) Compile() (*RuleSet, error) {
	if len(rs) > MaxRules {
		return nil, fmt.Errorf("%w: %d rules: at most %d", ErrInvalidRules, len(rs), MaxRules)
	}
	set := &RuleSet{rules: rs, res: make([]*regexp.Regexp, len(rs))}
	for i, r := range rs {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: rule %d (pattern %q): %s", ErrInvalidRules, i+1, shorten(r.Pattern), fmt.Sprintf(format, args...))
		}
		switch {
		case strings.TrimSpace(r.Pattern) == "":
			return nil, bad("pattern must not be empty")
		case len(r.Pattern) > MaxPatternBytes:
			return nil, bad("pattern of %d bytes: at most %d", len(r.Pattern), MaxPatternBytes)
		case r.Accept == nil && r.Skip == nil && r.UA == nil:
			return nil, bad("sets nothing: give accept, skip or ua")
		}
		if r.UA != nil {
			if err := checkUA(*r.UA); err != nil {
				return nil, bad("%v", err)
			}
		}
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, bad("not a valid Go RE2 regular expression: %v", err)
		}
		set.res[i] = re
	}
	return set, nil
}

func checkUA(ua string) error {
	if strings.TrimSpace(ua) == "" {
		return errors.New("ua must not be empty (leave it out to keep the job's user agent)")
	}
	if len(ua) > MaxUserAgentSize {
		return fmt.Errorf("ua of %d bytes: at most %d", len(ua), MaxUserAgentSize)
	}
	for _, r := range ua {
		if unicode.IsControl(r) {
			return errors.New("ua must not contain control characters (it becomes an HTTP header)")
		}
	}
	return nil
}

// MustCompile compiles rules known to be valid (tests, constants).
func MustCompile(rs Rules) *RuleSet {
	set, err := rs.Compile()
	if err != nil {
		panic(err)
	}
	return set
}

// Len is the number of rules.
func (s *RuleSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// PageRule is what the rules say about one URL.
type PageRule struct {
	// Accept is the last matching accept setting (nil: no rule sets it).
	Accept *bool
	// Skip is the last matching skip setting (false when none).
	Skip bool
	// UA is the last matching user agent ("" when none).
	UA string
	// SkipRule is the 1-based position of the rule that decided Skip (0:
	// none), for the page's note.
	SkipRule int
}

// Eval evaluates every rule against url; for each setting the last match
// wins. A nil RuleSet matches nothing.
func (s *RuleSet) Eval(url string) PageRule {
	var out PageRule
	if s == nil {
		return out
	}
	for i, re := range s.res {
		r := s.rules[i]
		if !re.MatchString(url) {
			continue
		}
		if r.Accept != nil {
			v := *r.Accept
			out.Accept = &v
		}
		if r.Skip != nil {
			out.Skip, out.SkipRule = *r.Skip, i+1
		}
		if r.UA != nil {
			out.UA = *r.UA
		}
	}
	if !out.Skip {
		out.SkipRule = 0
	}
	return out
}

// Pattern returns the pattern of rule n (1-based).
func (s *RuleSet) Pattern(n int) string {
	if s == nil || n < 1 || n > len(s.rules) {
		return ""
	}
	return s.rules[n-1].Pattern
}

func shorten(s string) string {
	if len(s) <= 120 {
		return s
	}
	return s[:120] + "…"
}

// Bool returns a pointer to b (for building rules).
func Bool(b bool) *bool { return &b }

// String returns a pointer to s (for building rules).
func String(s string) *string { return &s }
