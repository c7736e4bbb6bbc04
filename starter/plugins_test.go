package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/archiveflow/archiveflow/internal/engine"
)

// The text form of `starter plugins` is documented (docs/hooks.md) and read
// by scripts: one line per fact.
func TestPrintInventoryIsOneLinePerFact(t *testing.T) {
	var b strings.Builder
	printInventory(&b, engine.Inventory{Missing: []string{"chromium"}, Plugins: []engine.PluginReport{{
		Name: "chrome", Status: engine.PluginCannotRun, Reason: "plugin chrome needs binary chromium from {CHROME_BINARY} (config.json): not found on the hooks' PATH",
		Binaries: []engine.BinaryReport{
			{Name: "{NODE_BINARY}", Resolved: "node", Path: "/opt/lib/bin/node", Version: "v22.12.0"},
			{Name: "{CHROME_BINARY}", Resolved: "chromium", Missing: "not found on the hooks' PATH"},
			{Name: "singlefile", Resolved: "singlefile", NotChecked: "binproviders chromewebstore without env"},
			{Name: "sh", Resolved: "sh", Path: "/bin/sh"},
		},
		Hooks: []engine.HookReport{
			{Name: "on_Snapshot__01_chrome_tab.daemon.bg.js", Event: "Snapshot", Step: 0, Background: true, Status: engine.HookSkipped, Reason: "plugin chrome needs binary chromium"},
			{Name: "on_Snapshot__99_x.sh", Event: "Snapshot", Step: 9, Status: engine.HookRuns, Warning: "runs in step 9"},
			{Name: "on_Crawl__70_chrome_install.py", Event: "Crawl", Step: 7, Status: engine.HookNotRun, Reason: "never downloads"},
		},
	}}})
	assert.Equal(t, `plugin chrome: cannot run: plugin chrome needs binary chromium from {CHROME_BINARY} (config.json): not found on the hooks' PATH
  binary node ({NODE_BINARY}): found /opt/lib/bin/node (v22.12.0)
  binary chromium ({CHROME_BINARY}): missing: not found on the hooks' PATH
  binary singlefile: not checked: binproviders chromewebstore without env
  binary sh: found /bin/sh (version unknown)
  hook Snapshot step 0 on_Snapshot__01_chrome_tab.daemon.bg.js: skipped: plugin chrome needs binary chromium
  hook Snapshot step 9 on_Snapshot__99_x.sh: runs (warning: runs in step 9)
  hook Crawl step 7 on_Crawl__70_chrome_install.py: not run: never downloads
missing binaries: chromium
`, b.String())
}
