package workflows

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
)

// UpdateSetRules replaces a crawl's rules and returns the new rules
// version once Redis has it. Payload: scope.Rules.
const UpdateSetRules = "set_rules"

// maxStatusPages bounds the pages in flight a status lists.
const maxStatusPages = 100

// CrawlStatus is the answer of QueryStatus on a crawl and its result.
type CrawlStatus struct {
	Ident           string                `json:"ident"`
	URL             string                `json:"url"`
	Kind            string                `json:"kind"` // "crawl"
	State           model.JobState        `json:"state"`
	Run             int                   `json:"run"`
	MaxDepth        int                   `json:"max_depth"`
	Settings        model.Settings        `json:"settings"`
	SettingsVersion int                   `json:"settings_version"`
	Rules           scope.Versioned       `json:"rules"`
	Counts          activities.PageCounts `json:"counts"`
	InFlight        []activities.PageSpec `json:"in_flight,omitempty"`
	// PagesLaunched counts page attempts launched by every run so far.
	PagesLaunched int64    `json:"pages_launched"`
	SeedDone      bool     `json:"seed_done"`
	Hosts         []string `json:"hosts,omitempty"`
	// StartURLs are a URL-list crawl's start URLs (scope.Config.StartURLs)
	// once its list is seeded: a retry of the crawl goes on with them.
	StartURLs []string `json:"start_urls,omitempty"`
	Error     string   `json:"error,omitempty"`
	// Limit names the limit the crawl reached (model.PageLimitReached,
	// …): it finishes at it, or, while pages are in flight, will.
	Limit string `json:"limit,omitempty"`
	// RetryAt is when the first page waiting for a later retry is due
	// while nothing else is left (State is then StateWaiting).
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

func (c *crawl) status() CrawlStatus {
	st := CrawlStatus{
		Ident: c.ident(), URL: c.in.Crawl.Job.URL, Kind: "crawl", State: c.shownState(), RetryAt: c.shownRetryAt(), Run: c.carry.Run,
		MaxDepth: c.in.Crawl.MaxDepth, Settings: c.settings.current, SettingsVersion: c.settings.version,
		Rules: c.rules, Counts: c.counts, PagesLaunched: c.carry.Pages + c.launched, SeedDone: c.carry.SeedDone,
		Hosts: slices.Clone(c.carry.SetupHosts), StartURLs: slices.Clone(c.in.Crawl.Scope.StartURLs),
		Error: cmp.Or(c.job.failure, c.job.stopReason), Limit: c.limitReached(),
	}
	ids := slices.Sorted(maps.Keys(c.inflight))
	for _, id := range ids[:min(len(ids), maxStatusPages)] {
		st.InFlight = append(st.InFlight, c.inflight[id])
	}
	return st
}

// serveRules installs the set_rules update (control.serve's more).
func (c *crawl) serveRules(ctx workflow.Context) func() error {
	return func() error {
		err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSetRules, c.updateRules,
			workflow.UpdateHandlerOptions{Validator: c.validateRules})
		if err != nil {
			return fmt.Errorf("update %s: %w", UpdateSetRules, err)
		}
		return nil
	}
}

func (c *crawl) applySettings(set model.Settings) (seq, version int) {
	before := c.settings.current.MaxDuration
	in := c.nextSettings(set)
	if set.MaxDuration != before {
		c.armDurationLimit()
	}
	workflow.SetCurrentDetails(c.dctx, c.details())
	if c.seed != nil {
		// The running start page follows (seedSettingsChange); a signal
		// that finds it ended changes nothing.
		c.seed.SignalChildWorkflow(c.dctx, SignalSetSettings, set)
	}
	return c.hash.settings(in), in.Version
}

func (c *crawl) validateRules(rules scope.Rules) error {
	if err := c.refuseChange(UpdateSetRules); err != nil {
		return err
	}
	if err := rules.Validate(); err != nil {
		return fmt.Errorf("set_rules on %s: %w", c.ident(), err)
	}
	return nil
}

// updateRules makes rules the next version: pages claimed from now on are
// skipped and given user agents by it, links found from now on are judged
// by it; the attempts that used an older version keep its number. It
// returns the version once Redis (IDENT_rules) has it.
func (c *crawl) updateRules(ctx workflow.Context, rules scope.Rules) (int64, error) {
	c.rules = scope.Versioned{Version: c.rules.Version + 1, Rules: rules}
	in := activities.SetRulesInput{Ident: c.ident(), Rules: c.rules}
	seq := c.write("set rules", crawlActs.SetRules, in)
	if err := c.writes.await(ctx, seq); err != nil {
		return 0, fmt.Errorf("set_rules on %s: await redis write: %w", c.ident(), err)
	}
	return in.Rules.Version, nil
}
