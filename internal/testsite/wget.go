package testsite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// WgetUserAgent is the User-Agent RunWget gives wget; its requests are the
// log entries carrying it.
const WgetUserAgent = "archiveflow-testsite-wget-baseline"

// EnvWget names the wget executable RunWget uses instead of "wget" on PATH.
const EnvWget = "ARCHIVEFLOW_WGET"

// ErrNoWget is returned (wrapped) by RunWget when no wget is installed.
var ErrNoWget = errors.New("wget is not installed")

// BaselineArgs returns the wget options of the baseline for a depth limit:
// ArchiveBot's wpull options (pipeline/archivebot/seesaw/wpull.py) in wget's
// spelling, minus what wget has no equivalent for (the database, WARC,
// host spanning "linked-pages").
//
//	--recursive --level=N   recursion with wget's depth limit (1..; 0 would mean inf)
//	--page-requisites       fetch every page's requisites, even at the limit (wpull: --page-requisites)
//	--no-parent             as ArchiveBot (no effect from "/")
//	-e robots=off           ArchiveBot's --no-robots
//	--tries=3 --waitretry=5 --timeout=20   ArchiveBot's retry and timeout options
//	--inet4-only            ArchiveBot's --inet4-only
//	--delete-after          ArchiveBot keeps WARCs, not files
//	--no-verbose            one line per fetch in wget's own log
//
// No --span-hosts: with it wget would recurse into the other host, which
// ArchiveBot does not do (it fetches offsite pages once); without it wget
// stays on the start host, requisites included.
func BaselineArgs(level int) []string {
	return []string{
		"--recursive", "--level=" + strconv.Itoa(level),
		"--page-requisites", "--no-parent", "-e", "robots=off",
		"--tries=3", "--waitretry=5", "--timeout=20", "--inet4-only",
		"--delete-after", "--no-verbose",
	}
}

// WgetOptions tune RunWget.
type WgetOptions struct {
	// Binary is the wget to run; empty means $ARCHIVEFLOW_WGET or "wget" on
	// PATH.
	Binary string
	// ExtraArgs go after BaselineArgs (e.g. --retry-on-http-error=500).
	ExtraArgs []string
}

// WgetRun is one run of the wget baseline.
type WgetRun struct {
	Args []string // the full command line
	// ExitCode is 0, 8 when the server answered errors (as it does), or 4
	// when retries of a failing page ran out (with --retry-on-http-error).
	ExitCode int
	Elapsed  time.Duration
	// Fetched is what wget requested, from the server's log.
	*Fetched
}

// RunWget resets the 500-once pages (Reset), runs wget with
// BaselineArgs(level) and opts.ExtraArgs on the site in a temporary
// directory, and returns what it requested according to the server's log
// (entries with WgetUserAgent). level must be at least 1: the calendar trap
// would keep an unlimited wget busy forever. Do not run a crawl on the same
// server at the same time: Reset would hand it fresh failures.
func (s *Server) RunWget(ctx context.Context, level int, opts WgetOptions) (*WgetRun, error) {
	if err := checkLevel("wget baseline", level); err != nil {
		return nil, err
	}
	bin := opts.Binary
	if bin == "" {
		bin = os.Getenv(EnvWget)
	}
	if bin == "" {
		bin = "wget"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("testsite: wget baseline: %w (%v)", ErrNoWget, err)
	}
	dir, err := os.MkdirTemp("", "testsite-wget-")
	if err != nil {
		return nil, fmt.Errorf("testsite: wget baseline: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	logFile := filepath.Join(dir, "wget.log")
	args := append(BaselineArgs(level), "--user-agent="+WgetUserAgent, "--directory-prefix="+filepath.Join(dir, "files"), "--output-file="+logFile)
	args = append(append(args, opts.ExtraArgs...), s.StartURL())

	mark := s.RequestCount()
	s.Reset()
	start := time.Now()
	cmd := exec.CommandContext(ctx, path, args...)
	runErr := cmd.Run()
	run := &WgetRun{Args: append([]string{path}, args...), Elapsed: time.Since(start)}
	if runErr != nil {
		var exit *exec.ExitError
		if !errors.As(runErr, &exit) || exit.ExitCode() != 4 && exit.ExitCode() != 8 {
			out, _ := os.ReadFile(logFile)
			return nil, fmt.Errorf("testsite: wget baseline: %s: %w; log ends: %s", path, runErr, tail(out, 800))
		}
		run.ExitCode = exit.ExitCode()
	}
	run.Fetched = Requested(s.RequestsSince(mark), func(r Request) bool { return r.UserAgent == WgetUserAgent })
	return run, nil
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// wgetModel switches off the behaviours behind wget's misses, to tell
// which one explains a miss.
type wgetModel struct {
	flakyOK    bool // 500-once pages answer 200 at once (as with --retry-on-http-error=500)
	redirectOK bool // wget parses a redirect's target even when it is queued already
}

// PredictWget returns what RunWget(level) requests, computed from the
// graph by a model of wget 1.21's recursion (src/recur.c, retrieve_tree):
// a first-in first-out queue of (URL, depth) and a blacklist of every URL
// ever queued; a dequeued page is fetched once (HTTP 500 is final); its
// links are queued at depth+1 if it answered 200 with HTML and depth <
// level (at depth == level only its requisites, --page-requisites); links
// to another host are dropped (no --span-hosts); a redirect is followed
// inside the fetch, and the target's links are read only if the target was
// not queued already. Statuses are those of the last answer. level must be
// at least 1, as for RunWget.
func (s *Server) PredictWget(level int) (*Fetched, error) {
	if err := checkLevel("predict wget", level); err != nil {
		return nil, err
	}
	return s.predict(level, wgetModel{}), nil
}

func checkLevel(what string, level int) error {
	if level < 1 {
		return fmt.Errorf("testsite: %s: level %d: must be at least 1 (wget reads 0 as unlimited, and the calendar is infinite)", what, level)
	}
	return nil
}

func (s *Server) predict(level int, m wgetModel) *Fetched {
	pages, reqs := s.site.predictWget(level, m)
	f := newFetched()
	for k, st := range pages {
		f.Pages[s.url(k)] = st
	}
	for id, st := range reqs {
		f.Requisites[s.url(key(id))] = st
	}
	return f
}

func (s *Site) predictWget(level int, m wgetModel) (pages map[key]int, reqs map[int32]int) {
	type item struct {
		k     key
		depth int
		page  bool
	}
	pages, reqs = map[key]int{}, map[int32]int{}
	queued := map[key]bool{s.home: true}
	queue := []item{{s.home, 0, true}}
	served := map[key]int{}
	status := func(k key) int {
		served[k]++
		switch s.kind(k) {
		case KindFlaky:
			if served[k] == 1 && !m.flakyOK {
				return 500
			}
		case KindError:
			return 500
		case KindMissing:
			return 404
		case KindRedirect:
			return 301
		}
		return 200
	}
	for head := 0; head < len(queue); head++ {
		it := queue[head]
		if !it.page {
			reqs[int32(it.k)] = 200
			continue
		}
		st := status(it.k)
		pages[it.k] = st
		doc := it.k
		if st == 301 {
			doc = key(s.nodes[it.k].target)
			st = status(doc)
			pages[doc] = st
		}
		if st != 200 || !s.kind(doc).hasLinks() {
			continue // wget descends only into a 200 HTML answer
		}
		// At the level only requisites are queued (dash_p_leaf_HTML); a
		// redirect's target is parsed only if it is not blacklisted
		// (descend_redirect → download_child).
		leaf := it.depth >= level
		if it.depth > level+1 || doc != it.k && queued[doc] && !m.redirectOK {
			continue
		}
		for _, r := range s.reqs(doc) {
			if s.nodes[r].host == hostMain && !queued[key(r)] {
				queued[key(r)] = true
				queue = append(queue, item{key(r), it.depth + 1, false})
			}
		}
		if leaf {
			continue
		}
		for _, l := range s.links(doc) {
			if s.host(l) == hostMain && !queued[l] {
				queued[l] = true
				queue = append(queue, item{l, it.depth + 1, true})
			}
		}
	}
	return pages, reqs
}

// Diff is the difference between two URL sets.
type Diff struct {
	Missing []string // in want, not in got (sorted)
	Extra   []string // in got, not in want (sorted)
}

// Compare returns what got lacks and adds compared with want.
func Compare[A, B any](want map[string]A, got map[string]B) Diff {
	var d Diff
	for u := range want {
		if _, ok := got[u]; !ok {
			d.Missing = append(d.Missing, u)
		}
	}
	for u := range got {
		if _, ok := want[u]; !ok {
			d.Extra = append(d.Extra, u)
		}
	}
	slices.Sort(d.Missing)
	slices.Sort(d.Extra)
	return d
}

// Why wget misses a page (Miss.Cause).
const (
	// CauseOffsite: the page is on the other host; wget without
	// --span-hosts never leaves the start host.
	CauseOffsite = "offsite"
	// CauseFailedOnce: a 500-once page on the page's shortest path
	// answered wget's only request with 500, so wget never read its links.
	CauseFailedOnce = "failed-once"
	// CauseRedirectIntoQueue: a redirect on the page's shortest path led to
	// a page wget had queued one level deeper already, so wget did not read
	// the target's links at the redirect's depth.
	CauseRedirectIntoQueue = "redirect-into-queue"
	// CauseBoth: both of the above are on its shortest paths.
	CauseBoth = "failed-once+redirect-into-queue"
	// CauseUnexplained: the model of wget does not miss it.
	CauseUnexplained = "unexplained"
)

// Miss explains one page wget did not request.
type Miss struct {
	URL   string
	Depth int // its depth in the expectation (-1 when not in it)
	Cause string
	// TooDeep is true when wget fetched a page linking to it, but at a
	// deeper level than that page's own depth (at the level, where wget
	// stops following links); false when wget never reached any page
	// linking to it within the level, and for offsite pages.
	TooDeep bool
}

// ExplainMisses classifies the pages wget missed (missing, e.g. the Missing
// of Compare(Expected(...).Pages, RunWget(level).Pages)) by rerunning the
// wget model with each cause switched off. exp gives the depths.
func (s *Server) ExplainMisses(level int, exp *Expectation, missing []string) ([]Miss, error) {
	if err := checkLevel("explain wget misses", level); err != nil {
		return nil, err
	}
	base := s.predict(level, wgetModel{})
	noFlaky := s.predict(level, wgetModel{flakyOK: true})
	noRedirect := s.predict(level, wgetModel{redirectOK: true})
	neither := s.predict(level, wgetModel{flakyOK: true, redirectOK: true})
	// pages linked from a page wget fetched with HTML (through redirects)
	linked := map[string]bool{}
	for u, st := range base.Pages {
		k, ok := s.lookupURL(u)
		if !ok || st != 200 || !s.site.kind(k).hasLinks() {
			continue
		}
		for _, l := range s.site.links(k) {
			linked[s.url(l)] = true
		}
	}
	out := make([]Miss, 0, len(missing))
	for _, u := range missing {
		m := Miss{URL: u, Depth: -1}
		if d, ok := exp.Pages[u]; ok {
			m.Depth = d
		}
		_, inFlaky := noFlaky.Pages[u]
		_, inRedirect := noRedirect.Pages[u]
		_, inNeither := neither.Pages[u]
		switch k, ok := s.lookupURL(u); {
		case ok && s.site.host(k) == hostOther:
			m.Cause = CauseOffsite
			out = append(out, m)
			continue
		case inFlaky && !inRedirect:
			m.Cause = CauseFailedOnce
		case inRedirect && !inFlaky:
			m.Cause = CauseRedirectIntoQueue
		case inNeither:
			m.Cause = CauseBoth
		default:
			m.Cause = CauseUnexplained
		}
		m.TooDeep = linked[u]
		out = append(out, m)
	}
	return out, nil
}

// CountCauses returns how many misses each cause has, with a " (too deep)"
// suffix for those whose parent wget fetched too deep.
func CountCauses(misses []Miss) map[string]int {
	counts := map[string]int{}
	for _, m := range misses {
		c := m.Cause
		if m.TooDeep {
			c += " (too deep)"
		}
		counts[c]++
	}
	return counts
}
