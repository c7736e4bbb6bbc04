package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/hostbudget"
	"github.com/archiveflow/archiveflow/internal/logging"
)

// startFetchProxy starts the attempt's egress proxy; none (nil) when the
// policy denies nothing: the hook fetches directly then. Each attempt has
// its own, so every refusal is reported in the log of the job that caused
// it.
// onStderr (may be nil) gets one line per refusal (egress.Denial.LogLine,
// the words a built-in fetcher prints for its own refusals), for the
// job's log.
func (e *Engine) startFetchProxy(ctx context.Context, inv invocation, onStderr func(string)) (*egress.Proxy, error) {
	if e.cfg.Fetch.Empty() {
		return nil, nil
	}
	log := e.log.With(logging.Ident(inv.job.Ident), logging.Hook(inv.hook.Key()), logging.Attempt(inv.attempt))
	var turn func(context.Context, string) (func(), error)
	if page := hostbudget.PageFrom(ctx); page != nil {
		// A crawl page's hook process takes its host's turns as the
		// in-process fetchers do; a wait past crawl.per_host.max_wait
		// postpones the page (the page budget's verdict).
		turn = func(pctx context.Context, target string) (func(), error) {
			f, err := page.Start(pctx, target, false)
			if err != nil {
				return nil, err
			}
			return f.End, nil
		}
	}
	p, err := egress.Start(egress.Options{
		Turn:   turn,
		Policy: e.cfg.Fetch,
		Log:    log,
		OnDeny: func(d egress.Denial) {
			log.Info("fetch denied", zap.String("target", e.cfg.Secrets.Redact(d.Target)), zap.String("rule", d.Decision.Rule))
			if onStderr != nil {
				onStderr(e.cfg.Secrets.Redact(d.LogLine()))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("start the fetch policy proxy: %w", err)
	}
	return p, nil
}

// fetchEnv returns the fetch policy's keys of the hook environment.
func (e *Engine) fetchEnv(fp *egress.Proxy) []string {
	rules := e.cfg.Fetch.Rules()
	if rules == nil {
		rules = []string{}
	}
	deny, _ := json.Marshal(rules) // a []string always encodes
	env := []string{egress.EnvDeny + "=" + string(deny)}
	if fp == nil {
		return env
	}
	u := fp.URL()
	// NO_PROXY empty: a bypass list from pass_env would open a way around.
	env = append(env, egress.EnvProxy+"="+u, "NO_PROXY=", "no_proxy=")
	for _, v := range egress.ProxyVars {
		env = append(env, v+"="+u)
	}
	return env
}
