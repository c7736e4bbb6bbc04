//go:build dev

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestBrokenPluginsAreSkippedAndReported is issue 25's acceptance for
// tolerant discovery and dependencies: a hook named on_Snapshot__5_bad.sh,
// a plugin with a broken config.json and one needing a missing binary do
// not stop the job; every other plugin's hooks run, and each broken one is
// reported by name and rule in `starter plugins`, the job's results and
// the worker's log. abx-plugins' on_Crawl__ install hook is listed as not
// run, with the reason.
func TestBrokenPluginsAreSkippedAndReported(t *testing.T) {
	root := t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	require.NoError(t, os.MkdirAll(ran, 0o755))
	hook := `touch "` + ran + `/$(basename "$0")"; echo '{"type":"ArchiveResult","status":"succeeded"}'` + "\n"
	writeHook(t, root, "good", "on_Snapshot__20_good.sh", hook)
	writeHook(t, root, "named", "on_Snapshot__5_bad.sh", hook)
	writeHook(t, root, "named", "on_Snapshot__30_named.sh", hook)
	writeHook(t, root, "cfg", "on_Snapshot__40_cfg.sh", hook)
	require.NoError(t, os.WriteFile(filepath.Join(root, "cfg", "config.json"), []byte("{\n  \"properties\": {,}\n}\n"), 0o644))
	writeHook(t, root, "needy", "on_Snapshot__50_needy.sh", hook)
	writeHook(t, root, "needy", "on_Crawl__70_needy_install.py", hook)
	require.NoError(t, os.WriteFile(filepath.Join(root, "needy", "config.json"), []byte(`{"required_binaries": [{"name": "{NEEDY_BINARY}", "binproviders": "env,apt"}],
  "properties": {"NEEDY_BINARY": {"type": "string", "default": "archiveflow-e2e-no-such-binary"}}}`), 0o644))

	core, logs := observer.New(zapcore.WarnLevel)
	s := NewStack(t, server, root, nil)
	s.Log = zap.New(core)
	s.StartPools(t, nil)
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")

	rules := map[string]string{
		"on_Snapshot__5_bad.sh":    `NN "5" must be exactly two digits`,
		"on_Snapshot__40_cfg.sh":   "plugin cfg disabled: load plugin config " + filepath.Join(root, "cfg", "config.json") + ": JSON syntax error at line 2, column",
		"on_Snapshot__50_needy.sh": "plugin needy needs binary archiveflow-e2e-no-such-binary from {NEEDY_BINARY} (config.json): not found on the hooks' PATH",
	}

	// starter plugins: each broken hook by name and rule, the install hook
	// as not run, --check failing.
	res := runStarter(t, bin, s, "plugins", "--check", "--plugins-dir", root)
	assert.Equal(t, 1, res.code, res.stderr)
	out := res.stdout
	assert.Contains(t, out, "plugin good: ok\n  hook Snapshot step 2 on_Snapshot__20_good.sh: runs\n")
	for name, rule := range rules {
		assert.Regexp(t, `hook Snapshot step \d `+name+`: skipped: .*`+regexp.QuoteMeta(rule), out)
	}
	assert.Contains(t, out, "  binary archiveflow-e2e-no-such-binary ({NEEDY_BINARY}): missing: not found on the hooks' PATH\n")
	assert.Contains(t, out, "  hook Crawl step 7 on_Crawl__70_needy_install.py: not run: on_Crawl__ hooks install dependencies at run time under abx-dl")
	assert.Contains(t, out, "missing binaries: archiveflow-e2e-no-such-binary\n")

	// The job: finished, the good hooks ran, the broken ones skipped with
	// their rule, none started.
	sub := runStarter(t, bin, s, "submit", "--wait", "--wait-timeout", "90s", "http://127.0.0.1:9/plugins")
	require.Equal(t, 0, sub.code, "stdout: %s\nstderr: %s", sub.stdout, sub.stderr)
	id, _, err := ident.FromURL("http://127.0.0.1:9/plugins")
	require.NoError(t, err)
	var st workflows.Status
	require.NoError(t, s.Client.GetWorkflow(t.Context(), id, "").Get(t.Context(), &st))
	assert.Equal(t, model.StateFinished, st.State, st.Error)
	got := map[string][2]string{}
	for _, h := range st.Hooks {
		if h.Result != nil {
			got[h.Hook] = [2]string{string(h.Result.Status), h.Result.OutputStr}
		}
	}
	for _, name := range []string{"on_Snapshot__20_good.sh", "on_Snapshot__30_named.sh"} {
		assert.Equal(t, "succeeded", got[name][0], name)
		assert.FileExists(t, filepath.Join(ran, name))
	}
	for name, rule := range rules {
		assert.Equal(t, "skipped", got[name][0], name)
		assert.Contains(t, got[name][1], rule, name)
		assert.NoFileExists(t, filepath.Join(ran, name), "a skipped hook never starts")
	}
	assert.NoFileExists(t, filepath.Join(ran, "on_Crawl__70_needy_install.py"))

	// Fleet health: a plugin that cannot run on this host is a warning of
	// its host × plugin check naming the reason, never critical; the good
	// plugin is ok.
	health := runStarter(t, bin, s, "health")
	require.Equal(t, 0, health.code, health.stderr)
	hostRe := regexp.MustCompile(`(?m)^(\S+)\s+needy\s+warning\s`)
	m := hostRe.FindStringSubmatch(health.stdout)
	require.NotNil(t, m, "needy's check is a warning:\n%s", health.stdout)
	assert.Regexp(t, `(?m)^\S+\s+cfg\s+warning\s`, health.stdout)
	assert.Regexp(t, `(?m)^\S+\s+good\s+ok\s`, health.stdout)
	assert.Empty(t, s.Redis.ZRange(t.Context(), "failed_checks", 0, -1).Val(), "no host × plugin check is critical")
	detail := runStarter(t, bin, s, "health", m[1], "needy")
	require.Equal(t, 0, detail.code, detail.stderr)
	assert.Contains(t, detail.stdout, "needs binary archiveflow-e2e-no-such-binary")

	// The worker's log names each.
	for _, msg := range []string{"hook not run: its name breaks the grammar", "plugin disabled: its files are malformed", "plugin's hooks not run on this host: a dependency is missing"} {
		assert.Positive(t, logs.FilterMessageSnippet(msg).Len(), msg)
	}
}
