package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/builtin"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/steprun"
)

// setupTimeout bounds the foreground crawl setup hooks of one host.
const setupTimeout = 10 * time.Minute

// crawlDir is the crawl's directory on this worker (CRAWL_DIR,
// archivedir.Setup), where its setup hooks work.
func (e *Engine) crawlDir(ident string) string {
	return archivedir.Setup(e.cfg.ArchiveDir, ident, e.cfg.Instance)
}

// crawlHost is one crawl on this worker: its setup and the background
// setup hooks that live until the crawl ends here.
type crawlHost struct {
	ready    chan struct{} // closed once setup is done
	dir      string
	cancelBG context.CancelFunc
	bg       sync.WaitGroup
	failed   []string // setup hooks that did not succeed
}

// ensureSetup runs the crawl's on_CrawlSetup__ hooks on this worker once
// (DESIGN.md §8; abx-dl's CrawlSetupEvent): in NN order with the hook
// contract, cwd CRAWL_DIR/PLUGIN, argv --url=START_URL; foreground ones
// run to their end, background (.bg) ones are started and live until
// TeardownCrawl. Concurrent callers wait for the first one's setup. A
// setup hook that fails is logged (its status stays in its runner files):
// the crawl goes on and the hooks that need it fail on their own. A crawl
// without setup hooks runs none; that too is discovered once per crawl
// here.
func (e *Engine) ensureSetup(ctx context.Context, job activities.Job) error {
	e.crawls.mu.Lock()
	ch, ok := e.crawls.m[job.Ident]
	if ok {
		e.crawls.mu.Unlock()
		select {
		case <-ch.ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	found, err := hooks.DiscoverEvent(e.cfg.PluginDirs, hooks.EventCrawlSetup, e.log)
	if err != nil {
		e.crawls.mu.Unlock()
		return fmt.Errorf("discover crawl setup hooks in %v: %w", e.cfg.PluginDirs, err)
	}
	ch = &crawlHost{ready: make(chan struct{}), dir: e.crawlDir(job.Ident), cancelBG: func() {}}
	e.crawls.m[job.Ident] = ch
	if len(found.Hooks) == 0 {
		// Kept as a setup that is done, as the page plan is (pagePlan):
		// the crawl's later pages here do not discover the plugins again.
		close(ch.ready)
		e.crawls.mu.Unlock()
		return nil
	}
	bgCtx, cancel := context.WithCancel(context.Background())
	ch.cancelBG = cancel
	e.crawls.mu.Unlock()
	defer close(ch.ready)

	log := e.log.With(logging.Ident(job.Ident), zap.String("crawl_dir", ch.dir))
	if err := os.MkdirAll(ch.dir, 0o755); err != nil {
		return fmt.Errorf("create crawl dir: %w", err)
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
	defer scancel()
	plan := e.plan(found, job.Overrides, ch.dir)
	specs, hooks, bad := runnable(plan)
	for _, h := range bad {
		ch.failed = append(ch.failed, h.Key())
		log.Warn("crawl setup hook not run: configuration error", logging.Hook(h.Key()), zap.String("error", h.ConfigError))
	}
	var mu sync.Mutex // guards ch.failed
	// In NN order, one at a time; a failed hook does not stop the others;
	// background hooks live until TeardownCrawl (ch.cancelBG).
	policy := e.readiness(steprun.Policy{KeepGoing: true, Background: bgCtx, BackgroundDone: &ch.bg}, specs, log)
	steprun.Run(sctx, hooks, policy, func(ctx context.Context, i int, ready func()) steprun.Class {
		h := specs[i]
		inv := invocation{job: job, hook: h, attempt: 1, snapDir: ch.dir, crawlDir: ch.dir, noSnapshotArg: true}
		res, err := e.attempt(ctx, inv, attemptIO{onReady: ready})
		class := steprun.Classify(steprun.Ending{Err: err, ConfigErr: errors.Is(err, activities.ErrConfig),
			Transient: res.Transient, Cancelled: ctx.Err() != nil, Background: h.Background})
		failed := class != steprun.Final || res.Status == model.StatusFailed
		switch {
		case err != nil:
			log.Warn("crawl setup hook did not run", logging.Hook(h.Key()), zap.Error(err))
		case h.Background:
			log.Info("crawl setup background hook ended", logging.Hook(h.Key()), zap.String("status", string(res.Status)), zap.String("reason", res.Reason))
			failed = false // it ran until it was told to stop, or on its own
		case failed:
			log.Warn("crawl setup hook failed; the crawl goes on", logging.Hook(h.Key()), zap.String("reason", res.Reason))
		default:
			log.Info("crawl setup hook done", logging.Hook(h.Key()), zap.String("status", string(res.Status)))
		}
		if failed {
			mu.Lock()
			ch.failed = append(ch.failed, h.Key())
			mu.Unlock()
		}
		return class
	})
	return nil
}

// plan turns discovered hooks into a plan with each plugin's resolved
// enabled flag, timeout and configuration error (as Discover does), and
// the reason a hook cannot run on this host (SkipReason): what discovery
// found (a name breaking the grammar, a malformed plugin) or what the
// plugin needs and this host lacks (hooks.Plan.Unmet: a required binary
// after its {KEY} templates, a required plugin). Every path plans here:
// a snapshot's hooks, host steps, crawl pages and crawl setup.
func (e *Engine) plan(found hooks.Plan, overrides map[string]string, snapDir string) activities.Plan {
	resolved, configErr := e.resolveAll(found, overrides, snapDir)
	unmet := found.Unmet(resolved, e.hookPath())
	for _, plugin := range slices.Sorted(maps.Keys(unmet)) {
		// A reason quotes a binary's resolved name: it enters workflow
		// history, so archiveflow's secrets are redacted from it.
		unmet[plugin] = e.cfg.Secrets.Redact(unmet[plugin])
		e.log.Warn("plugin's hooks not run on this host: a dependency is missing", zap.String("plugin", plugin), zap.String("reason", unmet[plugin]))
	}
	plan := activities.Plan{Hooks: make([]activities.HookSpec, 0, len(found.Hooks))}
	for _, h := range found.Hooks {
		spec := activities.HookSpec{Plugin: h.Plugin, Name: h.Name, Path: h.Path, Step: h.Step, Background: h.Background,
			Timeout: e.cfg.Timeout, Grace: e.cfg.Grace, Enabled: true, SkipReason: cmp.Or(h.Skip, unmet[h.Plugin])}
		if spec.SkipReason != "" {
			// Fleet health reads a hook that cannot run here as a warning
			// of its host × plugin check, not as a skip by configuration.
			spec.SkipReason = fleethealth.CannotRunPrefix + spec.SkipReason
		}
		if msg, bad := configErr[h.Plugin]; bad {
			spec.ConfigError = msg
		} else if r := resolved[h.Plugin]; r != nil {
			spec.Enabled = r.Enabled
			spec.Timeout = r.Timeout(e.cfg.Timeout)
		}
		if spec.Background {
			// When stopped, a background hook gets its plugin's timeout as grace.
			spec.Grace = spec.Timeout
		}
		plan.Hooks = append(plan.Hooks, spec)
	}
	return plan
}

// resolveAll resolves the configuration of every plugin of found: the
// plugins that resolved, and the redacted error of those that did not.
func (e *Engine) resolveAll(found hooks.Plan, overrides map[string]string, snapDir string) (map[string]*hooks.Resolved, map[string]string) {
	base := map[string]string{"SNAP_DIR": snapDir, "ARCHIVE_DIR": e.cfg.ArchiveDir}
	src := e.sources(overrides, base)
	resolved := map[string]*hooks.Resolved{}
	configErr := map[string]string{}
	for _, plugin := range found.Plugins() {
		r, err := found.Schema(plugin).Resolve(src)
		if err != nil {
			configErr[plugin] = e.cfg.Secrets.Redact(err.Error())
			continue
		}
		resolved[plugin] = r
	}
	return resolved, configErr
}

// hookPath is the PATH the hooks get: the worker's (hookenv passes it).
func (e *Engine) hookPath() string {
	for _, kv := range e.environ() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}

// TeardownCrawl ends a crawl on this worker: its background setup hooks
// get SIGTERM, then SIGKILL after their grace, and are waited for (or
// until ctx ends); its WARC file is closed and the built-in hooks forget
// it. A crawl this worker never set up is a no-op.
func (e *Engine) TeardownCrawl(ctx context.Context, ident string) error {
	ch, ok := e.crawls.take(ident)
	builtin.ForgetCrawl(e.crawlDir(ident))
	e.plans.take(ident)
	werr := errors.Join(e.warcs.close(ident), e.indexes.close(ident))
	if !ok {
		return werr
	}
	<-ch.ready
	ch.cancelBG()
	done := make(chan struct{})
	go func() {
		ch.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return errors.Join(werr, fmt.Errorf("crawl %s: setup hooks still stopping: %w", ident, ctx.Err()))
	}
	e.log.Info("crawl torn down on this worker", logging.Ident(ident), zap.Strings("failed_setup_hooks", ch.failed))
	return werr
}
