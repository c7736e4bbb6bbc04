package scope

import (
	"net/url"
	"regexp"
	"strings"
)

// Ignores are a job's ignore patterns (IDENT_ignores) compiled for one
// start URL. As in ArchiveBot's pipeline (archivebot/wpull/ignoracle.py),
// {primary_url} and {primary_netloc} in a pattern are replaced by the
// escaped start URL and its host[:port] before the pattern is searched in
// a URL, the first matching pattern is reported as written, and a pattern
// that does not compile is skipped (Invalid lists them).
type Ignores struct {
	raw     []string
	res     []*regexp.Regexp
	invalid []string
}

// CompileIgnores compiles patterns for the crawl of primaryURL. Patterns
// are matched in the order given (sort them for a stable report).
func CompileIgnores(patterns []string, primaryURL string) *Ignores {
	netloc := ""
	if u, err := url.Parse(primaryURL); err == nil {
		netloc = u.Host
	}
	repl := strings.NewReplacer("{primary_url}", regexp.QuoteMeta(primaryURL), "{primary_netloc}", regexp.QuoteMeta(netloc))
	ig := &Ignores{}
	for _, p := range patterns {
		if strings.TrimSpace(p) == "" {
			continue
		}
		re, err := regexp.Compile(repl.Replace(p))
		if err != nil {
			ig.invalid = append(ig.invalid, p)
			continue
		}
		ig.raw = append(ig.raw, p)
		ig.res = append(ig.res, re)
	}
	return ig
}

// Match returns the first pattern (as written) found in u.
func (ig *Ignores) Match(u string) (string, bool) {
	if ig == nil {
		return "", false
	}
	for i, re := range ig.res {
		if re.MatchString(u) {
			return ig.raw[i], true
		}
	}
	return "", false
}

// Invalid lists the patterns that did not compile (and are not applied).
func (ig *Ignores) Invalid() []string {
	if ig == nil {
		return nil
	}
	return ig.invalid
}

// Len is the number of patterns applied.
func (ig *Ignores) Len() int {
	if ig == nil {
		return 0
	}
	return len(ig.res)
}
