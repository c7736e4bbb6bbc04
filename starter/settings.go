package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/hostbudget"
	"github.com/archiveflow/archiveflow/internal/jobctl"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
)

func setCommand() *command {
	return &command{
		name:    "set",
		args:    "IDENT key=value...",
		summary: "change a running job's settings (concurrency, delay_min, delay_max, user_agent, rules, a crawl's limits) or its nice",
		details: `
Keys:
  concurrency=N    hooks (a crawl: pages) run at once, 0..1000 (0 pauses the job)
  delay_min=D      delay between fetches: milliseconds (250) or a duration (250ms, 2s)
  delay_max=D      >= delay_min
  user_agent=UA    User-Agent for hooks started from now on
  rules=@FILE      a crawl's rules: a JSON rule list (see: starter help rules)
  max_pages=N      a crawl's page limit (0 = none; counts every page fetched so far)
  max_bytes=SIZE   a crawl's byte limit (512MiB, 2GB; 0 = none; bytes_downloaded)
  max_duration=D   a crawl's duration limit (90m, 2h; 0 = none; from the crawl's start)
  nice=N           the job's priority, -20..19, lower runs first (as
                   submit --nice): work the job starts from now on (hooks,
                   crawl pages, a bot job's workflow when it is claimed)
                   waits behind higher-priority work on its pool's queues
  host:HOST=concurrency:N,delay:D
                   a target host's politeness limits for every worker and
                   job from now on (fleet-wide, not only IDENT's; they win
                   over crawl.per_host); host:HOST=default removes them
The workflow applies the change to every hook launched from now on and
writes it to Redis (settings_age, archivebot:job:IDENT) before this returns.`,
		examples: []string{
			"starter set 3mlbkdu1fpo7wt4lr2qf1mpsw concurrency=8",
			"starter set 3mlbkdu1fpo7wt4lr2qf1mpsw delay_min=250 delay_max=1s",
			"starter set 3mlbkdu1fpo7wt4lr2qf1mpsw concurrency=0   # pause",
			"starter set 3mlbkdu1fpo7wt4lr2qf1mpsw rules=@rules.json",
			"starter set 3mlbkdu1fpo7wt4lr2qf1mpsw max_pages=5000",
			"starter set 3mlbkdu1fpo7wt4lr2qf1mpsw nice=-10",
			"starter set 3mlbkdu1fpo7wt4lr2qf1mpsw host:example.com=concurrency:1,delay:2s",
		},
		run: runSet,
	}
}

// settingsChange is a parsed list of key=value pairs.
type settingsChange struct {
	concurrency, delayMin, delayMax *int
	userAgent                       *string
	rulesFile                       *string
	// limits are a crawl's limits to set (setLimit keys → values).
	limits map[string]string
	hosts  []hostChange
	// nice is the job's new niceness (nice=N).
	nice *int
}

// hostChange is one host:HOST= pair: new limits, or none (default).
type hostChange struct {
	host   string
	limits *hostbudget.Limits
}

// parseHostChange reads host:HOST=concurrency:N,delay:D or =default.
func parseHostChange(host, val string) (hostChange, error) {
	host = strings.ToLower(host)
	if host == "" || strings.ContainsAny(host, "/: ") {
		return hostChange{}, errors.New("must name a host without port: host:example.com=concurrency:1,delay:2s")
	}
	if val == "default" {
		return hostChange{host: host}, nil
	}
	l := hostbudget.Limits{Concurrency: -1}
	for _, part := range strings.Split(val, ",") {
		k, v, _ := strings.Cut(part, ":")
		switch k {
		case "concurrency":
			n, err := strconv.Atoi(v)
			if err != nil {
				return hostChange{}, fmt.Errorf("concurrency:%s: must be an integer 1..%d", v, hostbudget.MaxConcurrency)
			}
			l.Concurrency = n
		case "delay":
			ms, err := parseMillis(v)
			if err != nil {
				return hostChange{}, fmt.Errorf("delay:%s: %w", v, err)
			}
			l.Delay = time.Duration(ms) * time.Millisecond
		default:
			return hostChange{}, fmt.Errorf("%q: must be concurrency:N and delay:D, comma-separated, or default", part)
		}
	}
	if l.Concurrency == -1 {
		return hostChange{}, errors.New("must set concurrency:N (delay:D optional)")
	}
	if err := l.Validate("host " + host); err != nil {
		return hostChange{}, err
	}
	return hostChange{host: host, limits: &l}, nil
}

// settings reports whether the change touches the settings (not only rules).
func (c settingsChange) settings() bool {
	return c.concurrency != nil || c.delayMin != nil || c.delayMax != nil || c.userAgent != nil || len(c.limits) > 0
}

// parseSettingsChange validates every pair, reporting all problems.
func parseSettingsChange(pairs []string) (settingsChange, error) {
	var c settingsChange
	var errs []error
	if len(pairs) == 0 {
		return c, usageErr("nothing to set: give key=value pairs (concurrency, delay_min, delay_max, user_agent, rules, max_pages, max_bytes, max_duration, nice, host:HOST)")
	}
	for _, p := range pairs {
		key, val, ok := strings.Cut(p, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%q: must be key=value", p))
			continue
		}
		if host, ok := strings.CutPrefix(key, "host:"); ok {
			h, err := parseHostChange(host, val)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%s: %w", key, val, err))
				continue
			}
			c.hosts = append(c.hosts, h)
			continue
		}
		switch key {
		case "concurrency":
			n, err := strconv.Atoi(val)
			if err == nil {
				err = model.ValidateConcurrency(n)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("concurrency=%s: must be an integer 0..%d (0 pauses the job)", val, model.MaxConcurrency))
				continue
			}
			c.concurrency = &n
		case "delay_min", "delay_max":
			ms, err := parseMillis(val)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%s: %w", key, val, err))
				continue
			}
			if key == "delay_min" {
				c.delayMin = &ms
			} else {
				c.delayMax = &ms
			}
		case "user_agent":
			if err := validateUserAgent(val); err != nil {
				errs = append(errs, fmt.Errorf("user_agent=%s: %w", val, err))
				continue
			}
			c.userAgent = &val
		case "rules":
			file, ok := strings.CutPrefix(val, "@")
			if !ok || file == "" {
				errs = append(errs, fmt.Errorf("rules=%s: must be @FILE (a JSON rule list; @- reads stdin)", val))
				continue
			}
			c.rulesFile = &file
		case "nice":
			n, err := strconv.Atoi(val)
			if err == nil {
				err = model.ValidateNice(n)
			} else {
				err = fmt.Errorf("must be an integer %d..%d (lower runs first)", model.MinNice, model.MaxNice)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("nice=%s: %w", val, err))
				continue
			}
			c.nice = &n
		case "max_pages", "max_bytes", "max_duration":
			if err := setLimit(&model.Settings{}, key, val); err != nil {
				errs = append(errs, fmt.Errorf("%s=%s: %w", key, val, err))
				continue
			}
			if c.limits == nil {
				c.limits = map[string]string{}
			}
			c.limits[key] = val
		default:
			errs = append(errs, fmt.Errorf("%q: unknown key %q: must be one of concurrency, delay_min, delay_max, user_agent, rules, max_pages, max_bytes, max_duration, nice, host:HOST", p, key))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, withCode(exitUsage, err)
	}
	return c, nil
}

// parseMillis reads milliseconds as an integer or a Go duration.
func parseMillis(v string) (int, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, errors.New("must be >= 0")
		}
		return n, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New("must be milliseconds >= 0 (250) or a duration (250ms, 2s)")
	}
	return int(d / time.Millisecond), nil
}

// apply returns s with the change applied.
func (c settingsChange) apply(s model.Settings) model.Settings {
	if c.concurrency != nil {
		s.Concurrency = *c.concurrency
	}
	if c.delayMin != nil {
		s.DelayMinMS = *c.delayMin
	}
	if c.delayMax != nil {
		s.DelayMaxMS = *c.delayMax
	}
	if c.userAgent != nil {
		s.UserAgent = *c.userAgent
	}
	for k, v := range c.limits {
		_ = setLimit(&s, k, v) // checked by parseSettingsChange
	}
	return s
}

func runSet(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) == 0 {
		return usageErr("want IDENT key=value... (see: starter help set)")
	}
	id, err := parseIdent(inv.args[0])
	if err != nil {
		return err
	}
	change, err := parseSettingsChange(inv.args[1:])
	if err != nil {
		return err
	}
	// A change that is wrong on its own (delay_max < delay_min) needs no backend.
	if change.delayMin != nil && change.delayMax != nil && *change.delayMax < *change.delayMin {
		return usageErr("delay_max=%d ms: must be >= delay_min (%d ms)", *change.delayMax, *change.delayMin)
	}
	var rules scope.Rules
	if change.rulesFile != nil {
		if rules, err = readRules(a, "rules=@", *change.rulesFile); err != nil {
			return withCode(exitUsage, err)
		}
	}
	b, err := a.connect(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	if len(change.hosts) > 0 {
		if err := setHosts(ctx, a, inv, b, change.hosts); err != nil {
			return err
		}
		if change.rulesFile == nil && !change.settings() {
			return nil
		}
	}
	if change.nice != nil {
		if err := setNice(ctx, a, inv, b, id, *change.nice); err != nil {
			return err
		}
		if change.rulesFile == nil && !change.settings() {
			return nil
		}
	}
	if change.rulesFile != nil {
		if _, err := liveJob(ctx, b, id, "change its rules"); err != nil {
			return err
		}
		version, err := applyRules(ctx, b, id, rules)
		if err != nil {
			return err
		}
		if !inv.json || !change.settings() {
			if inv.json {
				return writeJSON(a.stdout, map[string]any{"ident": id, "rules": scope.Versioned{Version: version, Rules: rules}})
			}
			fmt.Fprintf(a.stdout, "%s rules (version %d): %d rule(s)\n", id, version, len(rules))
		}
		if !change.settings() {
			return nil
		}
	}
	if len(change.limits) > 0 {
		v, err := liveJob(ctx, b, id, "change its limits")
		if err != nil {
			return err
		}
		if v.FetchDepth != model.FetchInf {
			return withCode(exitConflict, fmt.Errorf("job %s is not a crawl: max_pages, max_bytes and max_duration are a crawl's limits", id))
		}
	}
	return changeSettings(ctx, a, inv, b, id, func(s model.Settings) (model.Settings, error) {
		next := change.apply(s)
		if err := next.Validate(); err != nil {
			return s, withCode(exitUsage, fmt.Errorf("job %s: %w", id, err))
		}
		return next, nil
	})
}

// changeSettings reads the job's settings from its workflow, applies edit
// and sends the result, then prints the new settings.
func changeSettings(ctx context.Context, a *app, inv *invocation, b *backend.Backend, id string, edit func(model.Settings) (model.Settings, error)) error {
	if _, err := liveJob(ctx, b, id, "change its settings"); err != nil {
		return err
	}
	st, err := currentSettings(ctx, b, id)
	if err != nil {
		return err
	}
	next, err := edit(st.Settings)
	if err != nil {
		return err
	}
	// A change made here is the CLI's, not read from ArchiveBot's bot:
	// the workflow writes it to Redis.
	next.BotOwned = false
	version, err := applySettings(ctx, b, id, next)
	if err != nil {
		return err
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"ident": id, "settings": next, "settings_version": version})
	}
	fmt.Fprintf(a.stdout, "%s settings (version %d): concurrency %d, delay %d-%d ms", id, version, next.Concurrency, next.DelayMinMS, next.DelayMaxMS)
	if next.UserAgent != "" {
		fmt.Fprintf(a.stdout, ", user agent %q", next.UserAgent)
	}
	fmt.Fprintf(a.stdout, ", %d ignore pattern(s)", len(next.Ignores))
	if l := limitsLine(next); l != "" {
		fmt.Fprintf(a.stdout, ", limits %s", l)
	}
	fmt.Fprintln(a.stdout)
	return nil
}

func ignoreCommand() *command {
	return &command{
		name:    "ignore",
		args:    "add|rm IDENT PATTERN",
		summary: "add or remove an ignore pattern (Go RE2) of a running job",
		details: `
Patterns are Go RE2 regular expressions; ArchiveBot's {primary_url} and
{primary_netloc} placeholders are allowed. Python-only syntax (lookaround,
backreferences, atomic groups, ...) is refused with the construct named.`,
		examples: []string{
			`starter ignore add 3mlbkdu1fpo7wt4lr2qf1mpsw '\.(jpe?g|png)$'`,
			`starter ignore rm 3mlbkdu1fpo7wt4lr2qf1mpsw '\.(jpe?g|png)$'`,
			`starter ignore add 3mlbkdu1fpo7wt4lr2qf1mpsw '^{primary_url}calendar/'`,
		},
		run: runIgnore,
	}
}

func runIgnore(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) != 3 {
		return usageErr("want add|rm IDENT PATTERN, got %d argument(s) (see: starter help ignore)", len(inv.args))
	}
	op, pattern := inv.args[0], inv.args[2]
	if op != "add" && op != "rm" {
		return usageErr("%q: must be add or rm", op)
	}
	id, err := parseIdent(inv.args[1])
	if err != nil {
		return err
	}
	// A pattern to add must be valid; one to remove must at least not be blank.
	if op == "add" || strings.TrimSpace(pattern) == "" {
		if err := model.ValidateIgnore(pattern); err != nil {
			return withCode(exitUsage, err)
		}
	}
	b, err := a.connect(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	return changeSettings(ctx, a, inv, b, id, func(s model.Settings) (model.Settings, error) {
		has := slices.Contains(s.Ignores, pattern)
		switch {
		case op == "add" && has:
			return s, withCode(exitConflict, fmt.Errorf("job %s: ignore pattern %q is already set", id, pattern))
		case op == "rm" && !has:
			return s, withCode(exitNotFound, fmt.Errorf("job %s: ignore pattern %q is not set (set: %q)", id, pattern, s.Ignores))
		case op == "add":
			s.Ignores = append(slices.Clone(s.Ignores), pattern)
		default:
			s.Ignores = slices.DeleteFunc(slices.Clone(s.Ignores), func(p string) bool { return p == pattern })
		}
		return s, nil
	})
}

// setHosts writes live per-host limits (internal/hostbudget): every
// worker's next fetch on the host obeys them.
func setHosts(ctx context.Context, a *app, inv *invocation, b *backend.Backend, hosts []hostChange) error {
	keys := b.Store.Keys()
	var out []map[string]any
	for _, h := range hosts {
		if h.limits == nil {
			if err := hostbudget.ClearOverride(ctx, b.Redis, keys, h.host); err != nil {
				return err
			}
			out = append(out, map[string]any{"host": h.host, "limits": "default"})
			if !inv.json {
				fmt.Fprintf(a.stdout, "host %s: back to the configured limits (crawl.per_host)\n", h.host)
			}
			continue
		}
		if err := hostbudget.SetOverride(ctx, b.Redis, keys, h.host, *h.limits); err != nil {
			return err
		}
		out = append(out, map[string]any{"host": h.host, "concurrency": h.limits.Concurrency, "delay_ms": h.limits.Delay.Milliseconds()})
		if !inv.json {
			fmt.Fprintf(a.stdout, "host %s: concurrency %d, delay %s for every worker and job\n", h.host, h.limits.Concurrency, h.limits.Delay)
		}
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"hosts": out})
	}
	return nil
}

// setNice changes a job's niceness: the priority of its workflow (when it
// has one; a job waiting in ArchiveBot's queue starts with it when
// claimed), then its hash's nice, which status and list show.
func setNice(ctx context.Context, a *app, inv *invocation, b *backend.Backend, id string, nice int) error {
	v, err := liveJob(ctx, b, id, "change its nice")
	if err != nil {
		return err
	}
	key := model.PriorityKey(nice)
	if v.WorkflowID != "" {
		cctx, cancel := context.WithTimeout(ctx, controlTimeout)
		defer cancel()
		if err := jobctl.SetPriority(cctx, b.Temporal, inv.cfg.Temporal.Namespace, v.WorkflowID, key); err != nil {
			return temporalErr(id, "set nice of", err)
		}
	}
	if err := b.Store.SetNice(ctx, id, nice); err != nil {
		return withCode(exitUnavailable, err)
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"ident": id, "nice": nice, "priority_key": key})
	}
	fmt.Fprintf(a.stdout, "%s nice %d (priority %d): work it starts from now on\n", id, nice, key)
	return nil
}
