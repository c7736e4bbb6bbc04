package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/hookenv"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/logging"
)

// env is the hook's environment (internal/hookenv owns what may be in
// it): the allowed part of the worker's environment, the resolved plugin
// config, then the runner's own keys (later entries win), without any
// entry that would reveal one of archiveflow's secrets. fetchEnv are the
// fetch policy's keys (Engine.fetchEnv).
func (e *Engine) env(inv invocation, timeout time.Duration, r *hooks.Resolved, fetchEnv []string) ([]string, error) {
	ctx := map[string]any{
		"snapshot_id": inv.snapshotID,
		"ident":       inv.job.Ident,
		"plugin":      inv.hook.Plugin,
		"hook_name":   inv.hook.Name,
		"attempt":     inv.attempt,
	}
	if inv.depth > 0 {
		ctx["depth"] = inv.depth
	}
	extra, err := json.Marshal(ctx)
	if err != nil {
		return nil, fmt.Errorf("encode EXTRA_CONTEXT: %w", err)
	}
	ignores := inv.settings.Ignores
	if ignores == nil {
		ignores = []string{}
	}
	ign, err := json.Marshal(ignores)
	if err != nil {
		return nil, fmt.Errorf("encode IGNORE_PATTERNS: %w", err)
	}
	secs := strconv.Itoa(int((timeout + time.Second - 1) / time.Second))
	runner := []string{
		"SNAP_DIR=" + inv.snapDir,
		"ARCHIVE_DIR=" + e.cfg.ArchiveDir,
		"CRAWL_DIR=" + inv.crawlDir,
		"TIMEOUT=" + secs,
		hooks.TimeoutKey(inv.hook.Plugin) + "=" + secs,
		"FETCH_DEPTH=" + inv.job.FetchDepth,
		"DELAY_MIN=" + strconv.Itoa(inv.settings.DelayMinMS),
		"DELAY_MAX=" + strconv.Itoa(inv.settings.DelayMaxMS),
		"EXTRA_CONTEXT=" + string(extra),
		"IGNORE_PATTERNS=" + string(ign),
	}
	if inv.settings.UserAgent != "" {
		runner = append(runner, "USER_AGENT="+inv.settings.UserAgent)
	}
	runner = append(runner, fetchEnv...)
	env, dropped := hookenv.Build(hookenv.Sources{
		Worker: e.environ(), PassEnv: e.cfg.PassEnv, Plugin: r.Env(), Runner: runner,
	}, e.cfg.Secrets)
	for _, d := range dropped {
		// Once per variable and plugin: the operator only needs to hear it once.
		if _, seen := e.warned.LoadOrStore(inv.hook.Plugin+"\x00"+d.Name, true); !seen {
			e.log.Warn("hook environment: variable left out, it would reveal a secret of archiveflow's own",
				logging.Hook(inv.hook.Key()), zap.String("variable", d.Name), zap.String("source", d.Source))
		}
	}
	return env, nil
}
