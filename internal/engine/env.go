package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/hookenv"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/logging"
)

// env is the hook's environment (internal/hookenv owns what may be in
// it): the allowed part of the worker's environment, the resolved plugin
// config, then the runner's own keys (later entries win), without any
// entry that would reveal one of archiveflow's secrets. fetchEnv are the
// fetch policy's keys (Engine.fetchEnv).
func (e *Engine) env(req activities.RunRequest, snapDir string, timeout time.Duration, r *hooks.Resolved, fetchEnv []string) ([]string, error) {
	extra, err := json.Marshal(map[string]any{
		"snapshot_id": req.Job.SnapshotID,
		"ident":       req.Job.Ident,
		"plugin":      req.Hook.Plugin,
		"hook_name":   req.Hook.Name,
		"attempt":     req.Attempt,
	})
	if err != nil {
		return nil, fmt.Errorf("encode EXTRA_CONTEXT: %w", err)
	}
	ignores := req.Settings.Ignores
	if ignores == nil {
		ignores = []string{}
	}
	ign, err := json.Marshal(ignores)
	if err != nil {
		return nil, fmt.Errorf("encode IGNORE_PATTERNS: %w", err)
	}
	secs := strconv.Itoa(int((timeout + time.Second - 1) / time.Second))
	runner := []string{
		"SNAP_DIR=" + snapDir,
		"ARCHIVE_DIR=" + e.cfg.ArchiveDir,
		"TIMEOUT=" + secs,
		hooks.TimeoutKey(req.Hook.Plugin) + "=" + secs,
		"FETCH_DEPTH=" + req.Job.FetchDepth,
		"DELAY_MIN=" + strconv.Itoa(req.Settings.DelayMinMS),
		"DELAY_MAX=" + strconv.Itoa(req.Settings.DelayMaxMS),
		"EXTRA_CONTEXT=" + string(extra),
		"IGNORE_PATTERNS=" + string(ign),
	}
	if req.Settings.UserAgent != "" {
		runner = append(runner, "USER_AGENT="+req.Settings.UserAgent)
	}
	runner = append(runner, fetchEnv...)
	env, dropped := hookenv.Build(hookenv.Sources{
		Worker: e.environ(), PassEnv: e.cfg.PassEnv, Plugin: r.Env(), Runner: runner,
	}, e.cfg.Secrets)
	for _, d := range dropped {
		// Once per variable and plugin: the operator only needs to hear it once.
		if _, seen := e.warned.LoadOrStore(req.Hook.Plugin+"\x00"+d.Name, true); !seen {
			e.log.Warn("hook environment: variable left out, it would reveal a secret of archiveflow's own",
				logging.Hook(req.Hook.Key()), zap.String("variable", d.Name), zap.String("source", d.Source))
		}
	}
	return env, nil
}
