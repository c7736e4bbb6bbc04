package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/urllist"
)

func submitCommand() *command {
	return &command{
		name:    "submit",
		args:    "URL... [-i FILE]",
		summary: "archive URLs: one job (Temporal workflow) per URL",
		details: `
Every input is checked before anything is started: URLs must be absolute
http(s) URLs, --queue a configured pool's task queue (or pool name), --ignore
patterns Go RE2 expressions, --concurrency 0..1000 (0 queues the job paused), --at in the future, the -i
file readable, and no URL may resolve to an address fetch.deny forbids
(link-local and cloud metadata addresses by default; the rule is named). A job whose ident is running (or retained after finishing)
is refused with exit 4; --force replaces a retained finished job. If
starting a workflow fails, the jobs of this submission are removed again:
nothing is half-submitted.

--tag T runs the job only on workers of the pool that have the tag T
(pools[].tags, workers --tag); a pool's match_only workers take only
tagged jobs. Nothing runs a tagged job until such a worker polls.

--nice maps to Temporal task priority: -20..19, lower runs first
(<= -10 → priority 1, -9..-1 → 2, 0 → 3, 1..9 → 4, >= 10 → 5).
--delay/--at start the workflow later (Temporal start delay); the job is
listed in Redis' "scheduled" index until it starts.

--depth inf crawls the site (a CrawlWorkflow: the start URL with every
plugin, every page it links within scope with crawl.page_plugins);
--depth N crawls pages up to N links from the start URL; --depth shallow
(the default) archives the one URL. --rules FILE gives a crawl its initial
rules: a JSON list [{"pattern": "RE2", "accept"|"skip": bool, "ua": "..."}],
for each setting the last matching rule wins (starter help rules).

` + limitsHelp + ``,
		examples: []string{
			"starter submit https://example.com/",
			"starter submit https://example.com/ https://example.org/ --wait",
			"starter submit -i urls.txt --queue archiveflow --nice 10",
			"starter submit https://example.com/ --delay 2h --ignore '\\.pdf$' --concurrency 2",
			"starter submit https://example.com/ --at 2030-01-01T00:00:00Z --json",
			"starter submit https://example.com/ --depth inf --concurrency 8",
			"starter submit https://example.com/ --depth 3 --rules rules.json --wait",
			"starter submit https://example.com/ --depth inf --max-pages 1000 --max-duration 2h",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringP("input", "i", "", "file with one URL per line (blank lines and # comments skipped; - = stdin)")
			fs.String("queue", "", "task queue (or pool name) to run on (default: job.task_queue)")
			fs.String("tag", "", "run only on the pool's workers with this tag (pools[].tags, workers --tag)")
			fs.Int("nice", 0, "priority: -20..19, lower runs first")
			fs.Int("concurrency", 0, "hooks run at once (0 queues the job paused; default: job.concurrency)")
			fs.Duration("delay", 0, "start after this long (e.g. 30m, 2h)")
			fs.String("at", "", "start at this time (RFC 3339, or \"2006-01-02 15:04\" local)")
			fs.StringArray("ignore", nil, "ignore pattern, Go RE2 (repeatable)")
			fs.String("user-agent", "", "User-Agent for the hooks (default: job.user_agent)")
			fs.String("depth", "", "shallow (one URL), inf (crawl the site) or N (crawl N links deep) (default: job.fetch_depth)")
			fs.String("rules", "", "a crawl's initial rules: JSON file (- = stdin)")
			fs.String("robots", "", "a crawl's robots.txt policy: obey (disallowed pages are not fetched, each reported as an ignore) or ignore (default: crawl.robots)")
			fs.Bool("sitemaps", false, "a crawl also starts from the start host's sitemaps (robots.txt Sitemap lines, /sitemap.xml): their pages at depth 1")
			fs.Bool("host-steps", false, "run each run of steps without a background hook as one activity on the host (bulk jobs of short hooks; default: job.host_steps, off: one activity per hook)")
			addLimitFlags(fs)
			fs.Bool("wait", false, "follow the jobs (live view on a terminal), show each one's hooks table; exit 1 if a job failed or was aborted")
			fs.Duration("wait-timeout", 0, "with --wait: stop waiting after this long (exit 6, the jobs keep running); 0 = until every job ends")
			fs.Bool("force", false, "replace a retained finished job with the same ident")
		},
		run: runSubmit,
	}
}

// target is one URL to submit with where it came from.
type target struct {
	Ident  string `json:"ident"`
	URL    string `json:"url"`
	Source string `json:"-"` // "argument 2", "urls.txt line 7"
}

// submission is a fully validated submit command line.
type submission struct {
	targets     []target
	pool        config.Pool
	settings    model.Settings
	depth       string
	crawlDepth  int // -1 = no limit; used when depth is inf
	rules       scope.Rules
	robots      string // "" = config crawl.robots
	sitemaps    bool
	tag         string // "" = any worker of the pool that takes untagged jobs
	nice        int
	priorityKey int
	startDelay  time.Duration
	notBefore   time.Time
	force, wait bool
	// waitTimeout bounds --wait (0: none).
	waitTimeout time.Duration
}

// parseSubmission validates every input and returns what to submit. It
// reads the -i file but touches no backend. All problems are reported at
// once.
func parseSubmission(a *app, inv *invocation) (*submission, error) {
	fs, cfg := inv.fs, inv.cfg
	var errs []error
	fail := func(err error) { errs = append(errs, err) }

	s := &submission{settings: model.Settings{
		Concurrency: cfg.Job.Concurrency,
		DelayMinMS:  int(cfg.Job.DelayMin / time.Millisecond),
		DelayMaxMS:  int(cfg.Job.DelayMax / time.Millisecond),
		UserAgent:   cfg.Job.UserAgent,
	}}
	if fs.Changed("host-steps") {
		cfg.Job.HostSteps, _ = fs.GetBool("host-steps")
	}
	s.wait, _ = fs.GetBool("wait")
	s.force, _ = fs.GetBool("force")
	s.waitTimeout, _ = fs.GetDuration("wait-timeout")
	switch {
	case s.waitTimeout < 0:
		fail(fmt.Errorf("--wait-timeout %s: must be 0 (wait until the jobs end) or more", s.waitTimeout))
	case s.waitTimeout > 0 && !s.wait:
		fail(errors.New("--wait-timeout: only with --wait"))
	}

	targets, err := collectTargets(a, inv)
	if err != nil {
		fail(err)
	}
	if err := a.checkFetchPolicy(cfg, targets); err != nil {
		fail(err)
	}
	s.targets = targets

	queue, _ := fs.GetString("queue")
	pool, err := poolFor(cfg, queue)
	if err != nil {
		fail(err)
	}
	s.pool = pool
	if s.tag, _ = fs.GetString("tag"); fs.Changed("tag") {
		if err := config.ValidateTag(s.tag); err != nil {
			fail(fmt.Errorf("--tag: %w", err))
		}
	}

	if fs.Changed("concurrency") {
		n, _ := fs.GetInt("concurrency")
		if err := model.ValidateConcurrency(n); err != nil {
			fail(fmt.Errorf("--%w", err))
		}
		s.settings.Concurrency = n
	}
	s.nice, _ = fs.GetInt("nice")
	key, err := priorityKey(s.nice)
	if err != nil {
		fail(err)
	}
	s.priorityKey = key

	patterns, _ := fs.GetStringArray("ignore")
	for _, p := range patterns {
		if err := model.ValidateIgnore(p); err != nil {
			fail(fmt.Errorf("--ignore: %w", err))
			patterns = nil // reported once, not again by the settings check
		}
	}
	s.settings.Ignores = patterns

	if fs.Changed("user-agent") {
		ua, _ := fs.GetString("user-agent")
		if err := validateUserAgent(ua); err != nil {
			fail(err)
		}
		s.settings.UserAgent = ua
	}

	s.depth, s.crawlDepth = cfg.Job.FetchDepth, -1
	if fs.Changed("depth") {
		raw, _ := fs.GetString("depth")
		depth, limit, err := parseDepth(raw)
		if err != nil {
			fail(err) // one message for one bad flag
			depth = model.FetchShallow
		}
		s.depth, s.crawlDepth = depth, limit
	} else if err := model.ValidateFetchDepth(s.depth); err != nil {
		fail(fmt.Errorf("job.fetch_depth (the default of --depth): %w", err))
	}
	if file, _ := fs.GetString("rules"); fs.Changed("rules") {
		rules, err := readRules(a, "--rules", file)
		switch {
		case err != nil:
			fail(err)
		case s.depth != model.FetchInf:
			fail(fmt.Errorf("--rules: rules are for crawls: give --depth inf or --depth N"))
		}
		s.rules = rules
	}

	if fs.Changed("robots") {
		s.robots, _ = fs.GetString("robots")
		switch err := model.ValidateRobots(s.robots); {
		case err != nil:
			fail(fmt.Errorf("--%w", err))
		case s.depth != model.FetchInf:
			fail(errors.New("--robots: robots.txt is for crawls: give --depth inf or --depth N"))
		}
	}
	if s.sitemaps, _ = fs.GetBool("sitemaps"); s.sitemaps && s.depth != model.FetchInf {
		fail(errors.New("--sitemaps: sitemaps are for crawls: give --depth inf or --depth N"))
	}
	if anyLimitFlag(fs) && s.depth != model.FetchInf {
		fail(errors.New("--max-pages, --max-bytes, --max-duration: limits are for crawls: give --depth inf or --depth N"))
	}
	errs = append(errs, applyLimitFlags(fs, &s.settings)...)

	delay, notBefore, err := parseStart(fs, a.now())
	if err != nil {
		fail(err)
	}
	s.startDelay, s.notBefore = delay, notBefore

	if err := s.settings.Validate(); err != nil {
		fail(fmt.Errorf("job settings: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, withCode(exitUsage, err)
	}
	return s, nil
}

// maxCrawlDepth is the largest --depth N (the frontier keeps depths as
// 32-bit numbers; no site is that deep).
const maxCrawlDepth = 1_000_000

// parseDepth reads --depth: shallow, inf, or N (a crawl N links deep).
func parseDepth(raw string) (depth string, limit int, err error) {
	switch raw {
	case model.FetchShallow, model.FetchInf:
		return raw, -1, nil
	}
	n, convErr := strconv.Atoi(raw)
	if convErr != nil || n < 0 || n > maxCrawlDepth {
		return raw, -1, fmt.Errorf("--depth %q: must be shallow (one URL), inf (crawl the site) or a number of links 0..%d (a crawl that deep)", raw, maxCrawlDepth)
	}
	return model.FetchInf, n, nil
}

// readRules reads a JSON rule list from file ("-" = stdin).
func readRules(a *app, what, file string) (scope.Rules, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(io.LimitReader(a.stdin, 16<<20))
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: cannot read the rules file: %w", what, file, err)
	}
	rules, err := scope.ParseRules(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, file, err)
	}
	return rules, nil
}

// collectTargets validates the URL arguments and the -i file's lines;
// every bad one is reported with where it came from.
func collectTargets(a *app, inv *invocation) ([]target, error) {
	var out []target
	var errs []error
	for i, raw := range inv.args {
		out, errs = addTarget(out, errs, raw, fmt.Sprintf("argument %d", i+1))
	}
	if file, _ := inv.fs.GetString("input"); inv.fs.Changed("input") {
		lines, err := readURLFile(a, inv.cfg, file)
		if err != nil {
			errs = append(errs, err)
		}
		for _, l := range lines {
			out, errs = addTarget(out, errs, l.Text, fmt.Sprintf("%s line %d", file, l.Line))
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no URL given: pass URLs as arguments or in a file with -i FILE"))
	}
	return out, errors.Join(errs...)
}

func addTarget(out []target, errs []error, raw, source string) ([]target, []error) {
	id, norm, err := ident.FromURL(raw)
	if err != nil {
		return out, append(errs, fmt.Errorf("%s: %w", source, err))
	}
	for _, t := range out {
		if t.Ident == id {
			return out, append(errs, fmt.Errorf("%s: url %q: is the same job as %s (%s, ident %s): give each URL once", source, raw, t.Source, t.URL, id))
		}
	}
	return append(out, target{Ident: id, URL: norm, Source: source}), errs
}

// policyLookups bounds the DNS lookups the fetch policy check runs at once.
const policyLookups = 16

// policyTimeout bounds the fetch policy check of one host.
const policyTimeout = 10 * time.Second

// checkFetchPolicy refuses the targets the fetch policy (config
// fetch.deny) denies, after DNS resolution, naming the rule; each host is
// resolved once. A host that does not resolve here is let through: the
// workers may resolve it, and their fetch proxy checks every connection
// again.
func (a *app) checkFetchPolicy(cfg *config.Config, targets []target) error {
	pol, err := netpolicy.Parse(cfg.Fetch.Deny)
	if err != nil || pol.Empty() {
		return err
	}
	if a.resolve != nil {
		pol = pol.WithLookup(a.resolve)
	}
	type hostPort struct {
		host string
		port int
	}
	decisions := map[hostPort]*netpolicy.Decision{}
	keys := make([]hostPort, len(targets))
	for i, t := range targets {
		host, port, err := netpolicy.HostPort(t.URL)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Source, err)
		}
		keys[i] = hostPort{host, port}
		decisions[keys[i]] = &netpolicy.Decision{}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, policyLookups)
	for k, d := range decisions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), policyTimeout)
			defer cancel()
			_, *d, _ = pol.Resolve(ctx, k.host, k.port)
		}()
	}
	wg.Wait()
	var errs []error
	for i, t := range targets {
		if d := decisions[keys[i]]; d.Denied {
			errs = append(errs, fmt.Errorf("%s: url %q: %s: the workers would refuse to fetch it", t.Source, t.URL, d.Reason()))
		}
	}
	return errors.Join(errs...)
}

// readURLFile reads FILE (or stdin for "-") by the rules of
// internal/urllist; every bad line is an error naming FILE and the line.
func readURLFile(a *app, cfg *config.Config, file string) ([]urllist.Entry, error) {
	var r io.Reader
	if file == "-" {
		r = a.stdin
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("-i %s: cannot read the URL file: %w", file, err)
		}
		defer f.Close()
		r = f
	}
	l, err := urllist.Parse(r, urllist.LimitsOf(cfg.Crawl.URLList))
	if err != nil {
		return nil, fmt.Errorf("-i %s: %w", file, err)
	}
	errs := make([]error, 0, len(l.Bad))
	for _, b := range l.Bad {
		errs = append(errs, fmt.Errorf("%s %w", file, b))
	}
	return l.URLs, errors.Join(errs...)
}

// poolFor resolves --queue (a task queue or a pool name) to a configured
// pool; "" means job.task_queue.
func poolFor(cfg *config.Config, queue string) (config.Pool, error) {
	want := queue
	if want == "" {
		want = cfg.Job.TaskQueue
	}
	for _, p := range cfg.Pools {
		if p.TaskQueue == want {
			return p, nil
		}
	}
	for _, p := range cfg.Pools {
		if p.Name == want {
			return p, nil
		}
	}
	known := make([]string, 0, len(cfg.Pools))
	for _, p := range cfg.Pools {
		known = append(known, fmt.Sprintf("%s (pool %s)", p.TaskQueue, p.Name))
	}
	what := "--queue"
	if queue == "" {
		what = "job.task_queue"
	}
	return config.Pool{}, fmt.Errorf("%s %q: must be the task queue or name of a configured pool (configured: %s)", what, want, strings.Join(known, ", "))
}

// priorityKey maps --nice to Temporal's priority key (model.PriorityKey).
func priorityKey(nice int) (int, error) {
	if err := model.ValidateNice(nice); err != nil {
		return 0, fmt.Errorf("--%w", err)
	}
	return model.PriorityKey(nice), nil
}

func validateUserAgent(ua string) error {
	if strings.TrimSpace(ua) == "" {
		return fmt.Errorf("--user-agent %q: must not be empty", ua)
	}
	for _, r := range ua {
		if unicode.IsControl(r) {
			return fmt.Errorf("--user-agent %q: must not contain control characters (it becomes an HTTP header)", ua)
		}
	}
	return nil
}

// atLayouts are the accepted --at formats besides RFC 3339.
var atLayouts = []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04"}

// parseStart reads --delay and --at into a start delay and the time the
// job may start (zero when it starts now).
func parseStart(fs *pflag.FlagSet, now time.Time) (time.Duration, time.Time, error) {
	delaySet, atSet := fs.Changed("delay"), fs.Changed("at")
	switch {
	case delaySet && atSet:
		return 0, time.Time{}, errors.New("--delay and --at: give one or the other, not both")
	case delaySet:
		d, _ := fs.GetDuration("delay")
		if d <= 0 {
			return 0, time.Time{}, fmt.Errorf("--delay %s: must be > 0", d)
		}
		return d, now.Add(d), nil
	case atSet:
		raw, _ := fs.GetString("at")
		at, err := parseAt(raw)
		if err != nil {
			return 0, time.Time{}, err
		}
		if !at.After(now) {
			return 0, time.Time{}, fmt.Errorf("--at %s: is in the past (now is %s): must be in the future", raw, now.Format(time.RFC3339))
		}
		return at.Sub(now), at, nil
	}
	return 0, time.Time{}, nil
}

func parseAt(raw string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, raw); err == nil {
		return t, nil
	}
	for _, l := range atLayouts {
		if t, err := time.ParseInLocation(l, raw, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--at %q: must be RFC 3339 (2030-01-02T15:04:05Z) or local \"2030-01-02 15:04[:05]\"", raw)
}

// startedBy is ArchiveBot's started_by for CLI submissions.
func startedBy() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if v := os.Getenv("USER"); v != "" {
		return v
	}
	return "uid:" + strconv.Itoa(os.Getuid())
}

func runSubmit(ctx context.Context, a *app, inv *invocation) error {
	s, err := parseSubmission(a, inv)
	if err != nil {
		return err
	}
	b, err := a.connect(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	sub := &submitter{app: a, inv: inv, b: b, s: s}
	done, err := sub.submitAll(ctx)
	if err != nil {
		return err
	}
	if err := a.printSubmitted(inv, s, done); err != nil {
		return err
	}
	if !s.wait {
		return nil
	}
	if s.waitTimeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		t := time.AfterFunc(s.waitTimeout, func() { cancel(fmt.Errorf("--wait-timeout %s passed", s.waitTimeout)) })
		defer t.Stop()
	}
	return a.waitJobs(ctx, inv, b, done)
}
