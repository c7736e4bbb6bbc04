package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/model"
)

// brokenPlugins writes the acceptance's plugin set: a good plugin, a hook
// named on_Snapshot__5_bad.sh, a plugin with a malformed config.json, one
// needing a binary this host lacks and one requiring it. Each hook writes
// a file when it runs, so a test sees which ones started.
func brokenPlugins(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	ran := `touch "$SNAP_DIR/ran.$(basename "$0")"; echo '{"type":"ArchiveResult","status":"succeeded"}'` + "\n"
	writeHook(t, filepath.Join(root, "good", "on_Snapshot__20_good.sh"), ran)
	writeHook(t, filepath.Join(root, "named", "on_Snapshot__5_bad.sh"), ran)
	writeHook(t, filepath.Join(root, "named", "on_Snapshot__30_fine.sh"), ran)
	writeHook(t, filepath.Join(root, "cfg", "on_Snapshot__40_cfg.sh"), ran)
	require.NoError(t, os.WriteFile(filepath.Join(root, "cfg", "config.json"), []byte("{\n  \"properties\": {,}\n}\n"), 0o644))
	writeHook(t, filepath.Join(root, "needy", "on_Snapshot__50_needy.sh"), ran)
	require.NoError(t, os.WriteFile(filepath.Join(root, "needy", "config.json"), []byte(`{
  "required_binaries": [{"name": "{NEEDY_BINARY}", "binproviders": "env,apt"}],
  "properties": {"NEEDY_BINARY": {"type": "string", "default": "archiveflow-test-no-such-binary"}}}`), 0o644))
	writeHook(t, filepath.Join(root, "dependant", "on_Snapshot__60_dependant.sh"), ran)
	require.NoError(t, os.WriteFile(filepath.Join(root, "dependant", "config.json"), []byte(`{"required_plugins": ["needy"]}`), 0o644))
	writeHook(t, filepath.Join(root, "needy", "on_Crawl__70_needy_install.py"), ran)
	return root
}

// wantSkips are the reasons each broken hook is skipped with.
var wantSkips = map[string][]string{
	"named/on_Snapshot__5_bad.sh":            {"on_Snapshot__5_bad.sh", "NN \"5\" must be exactly two digits"},
	"cfg/on_Snapshot__40_cfg.sh":             {"plugin cfg disabled", "config.json", "line 2, column"},
	"needy/on_Snapshot__50_needy.sh":         {"plugin needy needs binary archiveflow-test-no-such-binary from {NEEDY_BINARY}", "not found on the hooks' PATH"},
	"dependant/on_Snapshot__60_dependant.sh": {"plugin dependant requires plugin needy, which cannot run"},
}

// The snapshot's plan (and so host steps, which run it) says which hooks
// cannot run here and why; every other hook is planned to run.
func TestDiscoverSkipsWhatCannotRunOnThisHost(t *testing.T) {
	e := pageEngine(t, brokenPlugins(t), nil)
	plan, err := e.Discover(context.Background(), activities.DiscoverInput{Ident: "abc123", SnapshotID: "abc123"})
	require.NoError(t, err, "one bad plugin never fails discovery")
	got := map[string]activities.HookSpec{}
	for _, h := range plan.Hooks {
		got[h.Key()] = h
	}
	require.Len(t, got, 6)
	for key, h := range got {
		want, broken := wantSkips[key]
		if !broken {
			assert.Equal(t, activities.LaunchForeground, h.Launch(), key)
			continue
		}
		assert.Equal(t, activities.LaunchSkip, h.Launch(), key)
		assert.True(t, strings.HasPrefix(h.SkipReason, fleethealth.CannotRunPrefix), "fleet health reads it as a warning: %s", h.SkipReason)
		for _, w := range want {
			assert.Contains(t, h.SkipReason, w, key)
		}
	}
}

// A crawl page runs every other plugin's hooks, never starts the broken
// ones, and reports each skipped with its reason in the page's results.
func TestRunPageSkipsWhatCannotRunOnThisHost(t *testing.T) {
	e := pageEngine(t, brokenPlugins(t), nil)
	cr := testCrawl("good", "named", "cfg", "needy", "dependant")
	out, err := e.RunPage(context.Background(), activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: 3, URL: "http://site.test/p", Attempt: 1}})
	require.NoError(t, err)
	assert.Equal(t, activities.PageSucceeded, out.Status, out.Note)
	byKey := map[string]model.ArchiveResult{}
	for _, r := range out.Results {
		byKey[r.Plugin+"/"+r.Hook] = r
	}
	for _, ok := range []string{"good/on_Snapshot__20_good.sh", "named/on_Snapshot__30_fine.sh"} {
		assert.Equal(t, model.StatusSucceeded, byKey[ok].Status, ok)
	}
	dir := archivedir.Page(e.cfg.ArchiveDir, cr.Job.Ident, 3)
	for key, want := range wantSkips {
		r := byKey[key]
		assert.Equal(t, model.StatusSkipped, r.Status, key)
		for _, w := range want {
			assert.Contains(t, r.OutputStr, w, key)
		}
		assert.NoFileExists(t, filepath.Join(dir, "ran."+filepath.Base(key)), "a skipped hook never starts")
	}
	assert.FileExists(t, filepath.Join(dir, "ran.on_Snapshot__20_good.sh"))
}

// The inventory is what `starter plugins` prints: each plugin's binaries
// found with their version or missing, each hook's event, step and fate.
func TestInventoryReportsBinariesAndHooks(t *testing.T) {
	root, bin := brokenPlugins(t), t.TempDir()
	writeHook(t, filepath.Join(bin, "needy-bin"), "echo 'needy-bin 1.2.3'\necho more\n")
	e := pageEngine(t, root, func(c *Config) { c.Env = append(c.Env, "NEEDY_BINARY="+filepath.Join(bin, "needy-bin")) })
	inv, err := e.Inventory(context.Background())
	require.NoError(t, err)
	byName := map[string]PluginReport{}
	for _, p := range inv.Plugins {
		byName[p.Name] = p
	}
	assert.Equal(t, []string{}, inv.Missing)
	needy := byName["needy"]
	assert.Equal(t, PluginOK, needy.Status, needy.Reason)
	require.Len(t, needy.Binaries, 1)
	assert.Equal(t, BinaryReport{Name: "{NEEDY_BINARY}", Resolved: filepath.Join(bin, "needy-bin"), Providers: "env,apt", Source: "config.json",
		Path: filepath.Join(bin, "needy-bin"), Version: "needy-bin 1.2.3"}, needy.Binaries[0])
	assert.Equal(t, []HookReport{
		{Name: "on_Snapshot__50_needy.sh", Event: "Snapshot", Step: 5, Status: HookRuns},
		{Name: "on_Crawl__70_needy_install.py", Event: "Crawl", Step: 7, Status: HookNotRun, Reason: needy.Hooks[1].Reason},
	}, needy.Hooks)
	assert.Contains(t, needy.Hooks[1].Reason, "archiveflow never downloads while a job runs")
	assert.Equal(t, PluginCannotLoad, byName["cfg"].Status)
	assert.Contains(t, byName["cfg"].Reason, "line 2, column")
	assert.Equal(t, HookSkipped, byName["named"].Hooks[1].Status, "on_Snapshot__5_bad.sh sorts last: step 9")
	assert.Equal(t, PluginOK, byName["dependant"].Status)

	e = pageEngine(t, root, nil)
	inv, err = e.Inventory(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"archiveflow-test-no-such-binary"}, inv.Missing)
}

// A page whose only plugin cannot run here fails with the reason as its note.
func TestRunPageWithEveryHookSkippedSaysWhy(t *testing.T) {
	e := pageEngine(t, brokenPlugins(t), nil)
	out, err := e.RunPage(context.Background(), activities.PageRun{Crawl: testCrawl("needy"), Page: activities.PageSpec{ID: 4, URL: "http://site.test/q", Attempt: 1}})
	require.NoError(t, err)
	assert.Equal(t, activities.PageFailed, out.Status)
	assert.Contains(t, out.Note, "on_Snapshot__50_needy.sh: skipped: "+fleethealth.CannotRunPrefix+"plugin needy needs binary archiveflow-test-no-such-binary")
}
