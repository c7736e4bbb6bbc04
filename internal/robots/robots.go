// Package robots owns a crawl's robots.txt (issue 28 scope 3): what one
// fetch of a host's /robots.txt left (Record, kept in Redis once per host
// per crawl by internal/frontier), how it is read (RFC 9309 through
// github.com/temoto/robotstxt: 2xx parsed, 4xx or no usable answer allows
// everything, 5xx or no answer at all disallows everything), which group
// applies to the crawl's user agent (its product token), whether a URL is
// allowed (Rules.Check, naming the robots.txt and the group when not), the
// group's Crawl-delay and the file's Sitemap lines.
//
// The package does no I/O: internal/engine fetches and records the file,
// activities decide a discovered link with it.
package robots

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/temoto/robotstxt"
)

// MaxBytes is the most of a robots.txt read (RFC 9309 §2.5: a crawler
// must parse at least 500 KiB); the rest is left out.
const MaxBytes = 500 << 10

// MaxRedirects is how many redirects a robots.txt fetch follows (RFC 9309
// §2.3.1.2: at least five).
const MaxRedirects = 5

// Record is what one fetch of a host's robots.txt gave: the answer's
// status and body as fetched, and what it means for the crawl's agent.
// It is JSON in Redis (internal/frontier, IDENT_frontier_robots).
type Record struct {
	// URL is the robots.txt asked for (ORIGIN/robots.txt).
	URL string `json:"url"`
	// Status is the final answer's HTTP status; 0: no answer (Error says
	// why).
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
	// Body is the answer's body, at most MaxBytes.
	Body string `json:"body,omitempty"`
	// Fetched is when the fetch ended.
	Fetched time.Time `json:"fetched"`
	// Agent is the user agent whose group CrawlDelay is for.
	Agent string `json:"agent,omitempty"`
	// CrawlDelay is the Crawl-delay of the agent's group (0: none).
	CrawlDelay time.Duration `json:"crawl_delay,omitempty"`
}

// Origin is u's scheme://host[:port]: the unit a robots.txt governs.
func Origin(u string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	if pu.Scheme != "http" && pu.Scheme != "https" || pu.Host == "" {
		return "", fmt.Errorf("%q: not an http(s) URL", u)
	}
	return strings.ToLower(pu.Scheme) + "://" + strings.ToLower(pu.Host), nil
}

// URL is origin's robots.txt.
func URL(origin string) string { return origin + "/robots.txt" }

// Token is the product token of a user agent: its first word up to a
// '/', lower case ("ArchiveTeam ArchiveBot/2.0" → "archiveteam"). The
// group for it is the one robots.txt applies (RFC 9309 §2.2.1).
func Token(userAgent string) string {
	tok, _, _ := strings.Cut(strings.TrimSpace(userAgent), " ")
	tok, _, _ = strings.Cut(tok, "/")
	return strings.ToLower(tok)
}

// Rules are a parsed Record for one agent.
type Rules struct {
	rec   Record
	data  *robotstxt.RobotsData
	group *robotstxt.Group
	// all is the reason everything is allowed or disallowed ("" when the
	// group decides).
	all      string
	allowAll bool
	// agent names the group: the agent's token, or "*".
	agent string
}

// Parse reads rec for agent (a user agent; its Token picks the group).
func Parse(rec Record, agent string) *Rules {
	r := &Rules{rec: rec}
	switch {
	case rec.Status == 0:
		r.all = "robots.txt could not be fetched (" + rec.Error + "): RFC 9309 disallows everything"
	case rec.Status >= 500:
		r.all = fmt.Sprintf("robots.txt answered HTTP %d: RFC 9309 disallows everything", rec.Status)
	case rec.Status < 200 || rec.Status > 299:
		r.all, r.allowAll = fmt.Sprintf("robots.txt answered HTTP %d: no rules", rec.Status), true
	default:
		data, err := robotstxt.FromString(rec.Body)
		if err != nil {
			r.all, r.allowAll = "robots.txt does not parse: no rules", true
			return r
		}
		r.data = data
		r.group, r.agent = data.FindGroup(Token(agent)), "*"
		if r.group != data.FindGroup("") {
			r.agent = groupName(rec.Body, Token(agent)) // a group more specific than *
		}
	}
	return r
}

// Check reports whether u may be fetched; when not, rule names what
// forbids it: the robots.txt, the group and the path, or why the whole
// host is disallowed.
func (r *Rules) Check(u string) (rule string, allowed bool) {
	if r.all != "" {
		if r.allowAll {
			return "", true
		}
		return r.rec.URL + ": " + r.all, false
	}
	pu, err := url.Parse(u)
	if err != nil {
		return "", true
	}
	path := pu.EscapedPath()
	if path == "" {
		path = "/"
	}
	if pu.RawQuery != "" {
		path += "?" + pu.RawQuery
	}
	if r.group.Test(path) {
		return "", true
	}
	if line := disallowLine(r.rec.Body, r.agent, path); line != "" {
		return fmt.Sprintf("%s: User-agent %s, Disallow: %s (%s)", r.rec.URL, r.agent, line, path), false
	}
	return fmt.Sprintf("%s: User-agent %s disallows %s", r.rec.URL, r.agent, path), false
}

// The parser decides; these name what decided, for the ignore packet.
// robotstxt keeps its groups' rules to itself, so the file's lines are
// read again: the group is the longest User-agent name the agent's token
// starts with (FindGroup's choice), the rule the longest of its Disallow
// values that disallows the path on its own (the parser's precedence).

// fields calls fn with each "name: value" line of a robots.txt, the name
// lower case, comments and blanks around them removed.
func fields(body string, fn func(name, value string)) {
	for _, line := range strings.Split(body, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if name, value, ok := strings.Cut(line, ":"); ok {
			fn(strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value))
		}
	}
}

// groupName is the User-agent name whose group applies to token.
func groupName(body, token string) string {
	best := token
	found := false
	fields(body, func(name, value string) {
		v := strings.ToLower(value)
		if name == "user-agent" && v != "*" && v != "" && strings.HasPrefix(token, v) && (!found || len(v) > len(best)) {
			best, found = v, true
		}
	})
	return best
}

// disallowLine is the Disallow value of group's lines (User-agent group,
// or several lines naming it) that disallows path; "" when none alone
// does.
func disallowLine(body, group, path string) string {
	best, in, agents := "", false, false
	fields(body, func(name, value string) {
		if name == "user-agent" {
			if !agents {
				in = false // a new group starts
			}
			agents = true
			in = in || strings.ToLower(value) == group
			return
		}
		agents = false
		if name != "disallow" || !in || value == "" || len(value) <= len(best) {
			return
		}
		if one, err := robotstxt.FromString("User-agent: *\nDisallow: " + value + "\n"); err == nil && !one.TestAgent(path, "*") {
			best = value
		}
	})
	return best
}

// CrawlDelay is the Crawl-delay of the agent's group (0: none).
func (r *Rules) CrawlDelay() time.Duration {
	if r.group == nil {
		return 0
	}
	return r.group.CrawlDelay
}

// Sitemaps are the file's Sitemap lines, as written.
func (r *Rules) Sitemaps() []string {
	if r.data == nil {
		return nil
	}
	return r.data.Sitemaps
}
