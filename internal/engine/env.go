package engine

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
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
func (e *Engine) env(inv invocation, timeout time.Duration, r *hooks.Resolved, fetchEnv []string) []string {
	ctx := map[string]any{
		"snapshot_id": inv.job.SnapshotID,
		"ident":       inv.job.Ident,
		"plugin":      inv.hook.Plugin,
		"hook_name":   inv.hook.Name,
		"attempt":     inv.attempt,
	}
	if inv.depth > 0 {
		ctx["depth"] = inv.depth
	}
	// Neither encoding can fail: json.Marshal fails only on values such as
	// channels, functions or NaN, never on strings and ints.
	extra, _ := json.Marshal(ctx)
	ignores := inv.settings.Ignores
	if ignores == nil {
		ignores = []string{}
	}
	ign, _ := json.Marshal(ignores)
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
	_, worker := e.workerEnv()
	env, dropped := hookenv.Build(hookenv.Sources{
		Worker: worker, PassEnv: e.cfg.PassEnv, Plugin: r.Env(), Runner: runner,
	}, e.cfg.Secrets)
	env = withPersonasDir(env, inv)
	for _, d := range dropped {
		// Once per variable and plugin: the operator only needs to hear it once.
		if _, seen := e.warned.LoadOrStore(inv.hook.Plugin+"\x00"+d.Name, true); !seen {
			e.log.Warn("hook environment: variable left out, it would reveal a secret of archiveflow's own",
				logging.Hook(inv.hook.Key()), zap.String("variable", d.Name), zap.String("source", d.Source))
		}
	}
	return env
}

// personasKey names the browser profiles' root of ArchiveBox's plugins
// (abx-plugins' chrome and base declare it, empty by default).
const personasKey = "PERSONAS_DIR"

// withPersonasDir gives env abx-dl's PERSONAS_DIR when nothing configured
// one (unset or empty): the crawl's CRAWL_DIR/.persona, or the snapshot's
// SNAP_DIR/.persona under CHROME_ISOLATION=snapshot, so each crawl's (or
// snapshot's) browser has a profile of its own. Without it abx-plugins'
// launchers fall back to one profile under HOME that every job of the
// host shares, kept from job to job.
func withPersonasDir(env []string, inv invocation) []string {
	at, isolation := -1, ""
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case personasKey:
			if strings.TrimSpace(v) != "" {
				return env
			}
			at = i
		case "CHROME_ISOLATION":
			isolation = strings.ToLower(strings.TrimSpace(v))
		}
	}
	dir := inv.crawlDir
	if isolation == "snapshot" || dir == "" {
		dir = inv.snapDir
	}
	kv := personasKey + "=" + filepath.Join(dir, ".persona")
	if at >= 0 {
		env[at] = kv
		return env
	}
	return append(env, kv)
}
