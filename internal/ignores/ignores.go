// Package ignores owns job ignore patterns: validating them as Go RE2
// regular expressions (with a clear word when a pattern uses Python-only
// syntax, as ArchiveBot's ignore sets may), expanding ArchiveBot's
// {primary_url} and {primary_netloc} placeholders against the seed URL, and
// matching URLs against a job's set.
package ignores

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// pythonOnly lists constructs Python's re accepts and RE2 does not.
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

// Error is an invalid ignore pattern.
type Error struct {
	Pattern string
	Rule    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("ignore pattern %q: %s", e.Pattern, e.Rule)
}

// Validate checks that pattern compiles as Go RE2 syntax (placeholders
// allowed), naming Python-only constructs when that is why it does not.
func Validate(pattern string) error {
	_, err := compile(pattern, expand(pattern, "", ""))
	return err
}

// Compile expands ArchiveBot's placeholders against seed and compiles.
func Compile(pattern, seed string) (*regexp.Regexp, error) {
	primaryURL, netloc := "", ""
	if u, err := url.Parse(seed); err == nil {
		primaryURL, netloc = seed, u.Host
	}
	return compile(pattern, expand(pattern, primaryURL, netloc))
}

func expand(pattern, primaryURL, netloc string) string {
	r := strings.NewReplacer(
		"{primary_url}", regexp.QuoteMeta(primaryURL),
		"{primary_netloc}", regexp.QuoteMeta(netloc),
	)
	return r.Replace(pattern)
}

func compile(original, expanded string) (*regexp.Regexp, error) {
	if strings.TrimSpace(original) == "" {
		return nil, &Error{Pattern: original, Rule: "must not be empty"}
	}
	re, err := regexp.Compile(expanded)
	if err == nil {
		return re, nil
	}
	for _, p := range pythonOnly {
		if strings.Contains(original, p.token) {
			return nil, &Error{Pattern: original, Rule: fmt.Sprintf("uses %s %q, which is Python-only syntax: archiveflow patterns are Go RE2 (https://github.com/google/re2/wiki/Syntax)", p.what, p.token)}
		}
	}
	if backref.MatchString(original) {
		return nil, &Error{Pattern: original, Rule: "uses a backreference (\\1…), which is Python-only syntax: archiveflow patterns are Go RE2"}
	}
	return nil, &Error{Pattern: original, Rule: "not a valid Go RE2 regular expression: " + err.Error()}
}

// Set is a compiled set of ignore patterns for one job.
type Set struct {
	patterns []string
	res      []*regexp.Regexp
}

// NewSet compiles patterns against the job's seed URL.
func NewSet(patterns []string, seed string) (*Set, error) {
	s := &Set{}
	for _, p := range patterns {
		re, err := Compile(p, seed)
		if err != nil {
			return nil, err
		}
		s.patterns = append(s.patterns, p)
		s.res = append(s.res, re)
	}
	return s, nil
}

// Match returns the first pattern matching u, if any.
func (s *Set) Match(u string) (string, bool) {
	for i, re := range s.res {
		if re.MatchString(u) {
			return s.patterns[i], true
		}
	}
	return "", false
}
