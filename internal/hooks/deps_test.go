package hooks

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resolveAll resolves every plugin of plan with job overrides.
func resolveAll(t *testing.T, plan Plan, job map[string]string) map[string]*Resolved {
	t.Helper()
	out := map[string]*Resolved{}
	for _, p := range plan.Plugins() {
		r, err := plan.Schema(p).Resolve(Sources{Job: job})
		require.NoError(t, err)
		out[p] = r
	}
	return out
}

func TestUnmetBinariesAndRequiredPlugins(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(bin, "node-ok"), hookScript, 0o755)
	writeFile(t, filepath.Join(bin, "not-exec"), hookScript, 0o644)
	writeHooks(t, root, "chrome/on_Snapshot__10_chrome_tab.bg.js", "screenshot/on_Snapshot__51_screenshot.js",
		"wget/on_Snapshot__61_wget.sh", "orphan/on_Snapshot__70_orphan.sh", "title/on_Snapshot__54_title.sh")
	writeFile(t, filepath.Join(root, "chrome", "config.json"), `{"required_plugins": [],
		"required_binaries": [{"name": "{NODE_BINARY}", "binproviders": "env,apt", "min_version": null, "overrides": {"apt": {"install_args": ["nodejs"]}}}],
		"properties": {"NODE_BINARY": {"type": "string", "default": "node"}}}`, 0o644)
	writeFile(t, filepath.Join(root, "screenshot", "config.json"), `{"required_plugins": ["Chrome"]}`, 0o644)
	writeFile(t, filepath.Join(root, "wget", "binaries.jsonl"), `{"type": "Binary", "name": "not-exec", "binproviders": "apt,env"}`+"\n", 0o644)
	writeFile(t, filepath.Join(root, "orphan", "config.json"), `{"required_plugins": ["singlefile"]}`, 0o644)
	plan, err := Discover([]string{root}, nil)
	require.NoError(t, err)

	unmet := plan.Unmet(resolveAll(t, plan, nil), bin)
	assert.Equal(t, `plugin chrome needs binary node from {NODE_BINARY} (config.json): not found on the hooks' PATH`, unmet["chrome"])
	assert.Contains(t, unmet["screenshot"], "plugin screenshot requires plugin chrome, which cannot run: plugin chrome needs binary node")
	assert.Contains(t, unmet["wget"], "plugin wget needs binary not-exec (binaries.jsonl:1): not found on the hooks' PATH")
	assert.Equal(t, "plugin orphan requires plugin singlefile, which is not installed on this host", unmet["orphan"])
	assert.NotContains(t, unmet, "title")

	// The template follows the plugin's configuration: a job override
	// naming a binary that exists satisfies chrome and its dependants.
	unmet = plan.Unmet(resolveAll(t, plan, map[string]string{"NODE_BINARY": "node-ok"}), bin)
	assert.NotContains(t, unmet, "chrome")
	assert.NotContains(t, unmet, "screenshot")
	checks := plan.CheckBinaries("chrome", resolveAll(t, plan, map[string]string{"NODE_BINARY": filepath.Join(bin, "node-ok")})["chrome"], "")
	require.Len(t, checks, 1)
	assert.Equal(t, filepath.Join(bin, "node-ok"), checks[0].Path, "a path is looked up as is")
	assert.Equal(t, "env,apt", checks[0].Providers)

	// A disabled required plugin stops its dependants; a disabled plugin
	// is not checked itself.
	unmet = plan.Unmet(resolveAll(t, plan, map[string]string{"CHROME_ENABLED": "false"}), bin)
	assert.NotContains(t, unmet, "chrome")
	assert.Equal(t, "plugin screenshot requires plugin chrome, which is disabled by configuration", unmet["screenshot"])
}

func TestHydrateNamesAMissingKey(t *testing.T) {
	_, err := Binary{Name: "{NOPE_BINARY}"}.Hydrate(func(string) (string, bool) { return "", false })
	assert.EqualError(t, err, "binary {NOPE_BINARY}: template {NOPE_BINARY} names no configured key of the plugin")
	name, err := Binary{Name: "{A}/bin/{B}"}.Hydrate(func(k string) (string, bool) { return map[string]string{"A": "/opt", "B": "node"}[k], true })
	require.NoError(t, err)
	assert.Equal(t, "/opt/bin/node", name)
}

// abx-plugins' singlefile also requires its browser extension, which only
// the chromewebstore provider supplies: not a file on PATH, reported and
// never looked up, so it does not stop the plugin.
func TestABinaryOnlyAnotherProviderSuppliesIsNotLookedUp(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(bin, "single-file"), hookScript, 0o755)
	writeHooks(t, root, "singlefile/on_Snapshot__50_singlefile.py")
	writeFile(t, filepath.Join(root, "singlefile", "config.json"), `{"required_binaries": [
		{"name": "{SINGLEFILE_BINARY}", "binproviders": "env,npm", "min_version": null, "overrides": {"npm": {"install_args": ["single-file-cli"]}}},
		{"name": "singlefile", "binproviders": "chromewebstore", "min_version": null}],
		"properties": {"SINGLEFILE_BINARY": {"type": "string", "default": "single-file"}}}`, 0o644)
	plan, err := Discover([]string{root}, nil)
	require.NoError(t, err)
	resolved := resolveAll(t, plan, nil)
	assert.Empty(t, plan.Unmet(resolved, bin))
	checks := plan.CheckBinaries("singlefile", resolved["singlefile"], bin)
	require.Len(t, checks, 2)
	assert.Equal(t, filepath.Join(bin, "single-file"), checks[0].Path)
	assert.Empty(t, checks[1].Path)
	assert.Empty(t, checks[1].Problem)
	assert.Contains(t, checks[1].NotChecked, "binproviders chromewebstore without env")
	assert.Contains(t, plan.Unmet(resolved, t.TempDir())["singlefile"], "needs binary single-file from {SINGLEFILE_BINARY}")
}
