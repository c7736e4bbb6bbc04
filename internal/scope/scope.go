package scope

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/archiveflow/archiveflow/internal/ident"
)

// Config is a crawl's URL scope (config crawl.scope, fixed per job).
type Config struct {
	// Subdomains also follows pages on subdomains of the start host.
	Subdomains bool `json:"subdomains"`
	// PathPrefix follows only pages below the start URL's directory
	// (wget's --no-parent).
	PathPrefix bool `json:"path_prefix"`
	// OffsiteOnce fetches pages on other hosts linked from followed pages
	// once, without following their links (ArchiveBot's default); without
	// it they are out of scope.
	OffsiteOnce bool `json:"offsite_once"`
	// StartURLs, when set, are the crawl's start URLs in place of the
	// job's URL (a URL-list crawl: the listed URLs as Starts keeps them):
	// each one's host (and with PathPrefix its directory) is in scope, as
	// wpull does for an input file.
	StartURLs []string `json:"start_urls,omitempty"`
}

// Scope is the URL scope of one crawl.
type Scope struct {
	cfg    Config
	start  string  // canonical start URL
	starts []where // the start hosts and directories
}

// where is a start URL's lower-case hostname and the directory of its
// path, ending in "/".
type where struct{ host, prefix string }

// whereOf is the host and directory of a URL.
func whereOf(raw string) (string, where, error) {
	u, err := Canonical(raw)
	if err != nil {
		return "", where{}, fmt.Errorf("crawl scope: start %w", err)
	}
	pu, err := url.Parse(u)
	if err != nil {
		return "", where{}, fmt.Errorf("crawl scope: start url %q: %w", u, err)
	}
	prefix := pu.EscapedPath()
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		prefix = prefix[:i+1]
	}
	return u, where{host: strings.ToLower(pu.Hostname()), prefix: prefix}, nil
}

// New returns the scope of a crawl of startURL (or of cfg.StartURLs).
func New(startURL string, cfg Config) (*Scope, error) {
	u, w, err := whereOf(startURL)
	if err != nil {
		return nil, err
	}
	s := &Scope{cfg: cfg, start: u, starts: []where{w}}
	if len(cfg.StartURLs) > 0 {
		s.starts = s.starts[:0]
		for _, raw := range cfg.StartURLs {
			_, w, err := whereOf(raw)
			if err != nil {
				return nil, err
			}
			s.starts = append(s.starts, w)
		}
	}
	return s, nil
}

// Starts keeps what Config.StartURLs needs of a list of start URLs under
// cfg, in order: one URL per host, or with PathPrefix one per host and
// directory. URLs that are not http(s) URLs are left out.
func Starts(urls []string, cfg Config) []string {
	var out []string
	seen := map[where]bool{}
	for _, raw := range urls {
		u, w, err := whereOf(raw)
		if !cfg.PathPrefix {
			w.prefix = ""
		}
		if err != nil || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, u)
	}
	return out
}

// Start is the canonical start URL.
func (s *Scope) Start() string { return s.start }

// Config is the scope's configuration.
func (s *Scope) Config() Config { return s.cfg }

// ErrNotHTTP marks a link that is not an http(s) URL (mailto:, javascript:,
// data:, ...): not a page, dropped without a report.
var ErrNotHTTP = errors.New("not an http(s) URL")

// Canonical is the form of a URL the crawl keys its pages by: the fragment
// dropped, then normalised as the ident is (internal/ident). A URL whose
// scheme is not http or https wraps ErrNotHTTP.
func Canonical(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		raw = raw[:i]
	}
	if i := strings.Index(raw, "://"); i > 0 {
		switch strings.ToLower(raw[:i]) {
		case "http", "https":
		default:
			return "", fmt.Errorf("url %.200q: %w", raw, ErrNotHTTP)
		}
	} else if i := strings.IndexByte(raw, ':'); i > 0 && !strings.ContainsAny(raw[:i], "/?") {
		return "", fmt.Errorf("url %.200q: %w", raw, ErrNotHTTP)
	}
	u, err := ident.Normalize(raw)
	if err != nil {
		return "", err
	}
	return u, nil
}

// verdict is the URL scope's answer for one canonical URL.
type verdict int

const (
	follow  verdict = iota // on the start host (or a subdomain): a page whose links are followed
	offsite                // another host: at most once, not followed
	outside                // not in the URL scope
)

func (s *Scope) classify(u string) (verdict, string) {
	pu, err := url.Parse(u)
	if err != nil {
		return outside, "unparsable"
	}
	h := strings.ToLower(pu.Hostname())
	onHost, prefix := false, ""
	for _, w := range s.starts {
		if h != w.host && !(s.cfg.Subdomains && strings.HasSuffix(h, "."+w.host)) {
			continue
		}
		if onHost, prefix = true, w.prefix; !s.cfg.PathPrefix || strings.HasPrefix(pu.EscapedPath(), w.prefix) {
			return follow, ""
		}
	}
	switch {
	case onHost:
		return outside, "outside the start URL's directory " + prefix
	case s.cfg.OffsiteOnce:
		return offsite, ""
	case len(s.starts) == 1:
		return outside, "host " + h + " is not the start host " + s.starts[0].host
	}
	return outside, "host " + h + " is not a start host"
}

// Denier is a URL deny policy (issue 17's fetch.deny): it reports the rule
// that keeps a URL from being fetched. internal/netpolicy implements it;
// the crawl checks it before a URL is queued.
type Denier interface {
	Deny(ctx context.Context, url string) (rule string, denied bool)
}

// Reason says why a link is not queued.
type Reason string

// Reasons a link is not queued.
const (
	Queued          Reason = ""
	ReasonNotHTTP   Reason = "not-http"     // mailto:, javascript:, ... (silent)
	ReasonInvalid   Reason = "invalid"      // does not normalise (logged)
	ReasonNoRecurse Reason = "no-recurse"   // the page's links are not followed (offsite page)
	ReasonOutside   Reason = "out-of-scope" // the URL scope or an accept=false rule
	ReasonDenied    Reason = "denied"       // the deny policy
	ReasonIgnored   Reason = "ignored"      // a job ignore pattern (ignore packet)
)

// Link is one URL found on a page.
type Link struct {
	URL string
	// Requisite: the page needs it to render (stylesheet, image, script):
	// taken from any host, never followed.
	Requisite bool
}

// Decision is the judgement on one link.
type Decision struct {
	// URL is the canonical URL ("" when it is not one).
	URL string
	// Reason is Queued ("") for a link to queue.
	Reason Reason
	// NoRecurse: queue the page but do not follow its links.
	NoRecurse bool
	Requisite bool
	// Pattern is the ignore pattern (as written), the deny rule or the
	// deciding rule's pattern; Detail says more for ReasonOutside and
	// ReasonInvalid.
	Pattern string
	Detail  string
}

// Judge decides which links of a page become pages of the job.
type Judge struct {
	Scope   *Scope
	Rules   *RuleSet // may be nil
	Ignores *Ignores // may be nil
	Deny    Denier   // may be nil
}

// Link judges one link of a page. parentNoRecurse is the page's own flag:
// the links of a page fetched once (offsite) are not followed.
func (j *Judge) Link(ctx context.Context, parentNoRecurse bool, l Link) Decision {
	u, err := Canonical(l.URL)
	switch {
	case errors.Is(err, ErrNotHTTP):
		return Decision{Reason: ReasonNotHTTP}
	case err != nil:
		return Decision{Reason: ReasonInvalid, Detail: err.Error()}
	}
	d := Decision{URL: u, Requisite: l.Requisite}
	if parentNoRecurse {
		d.Reason = ReasonNoRecurse
		return d
	}
	if j.Deny != nil {
		if rule, denied := j.Deny.Deny(ctx, u); denied {
			d.Reason, d.Pattern = ReasonDenied, rule
			return d
		}
	}
	v, why := j.Scope.classify(u)
	if l.Requisite && v != follow {
		v = offsite // requisites come from any host, fetched once
	}
	pr := j.Rules.Eval(u)
	switch {
	case pr.Accept != nil && !*pr.Accept:
		d.Reason, d.Detail = ReasonOutside, "an accept=false rule"
		return d
	case pr.Accept != nil && *pr.Accept && !l.Requisite:
		v = follow // in scope by a rule: fetched and followed
	case v == outside:
		d.Reason, d.Detail = ReasonOutside, why
		return d
	}
	if p, ok := j.Ignores.Match(u); ok {
		d.Reason, d.Pattern = ReasonIgnored, p
		return d
	}
	d.NoRecurse = v != follow || l.Requisite
	return d
}
