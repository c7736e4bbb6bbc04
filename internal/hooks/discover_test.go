package hooks

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const hookScript = "#!/bin/sh\necho ran\n"

// writeFile creates path (and its parents) with content and mode.
func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
	require.NoError(t, os.Chmod(path, mode)) // umask-proof
}

// writeHooks writes executable hook scripts ROOT/PLUGIN/NAME for each
// "plugin/name" entry.
func writeHooks(t *testing.T, root string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		writeFile(t, filepath.Join(root, id), hookScript, 0o755)
	}
}

func observedLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

func hookIDs(hooks []Hook) []string {
	ids := make([]string, len(hooks))
	for i, h := range hooks {
		ids[i] = h.ID()
	}
	return ids
}

func TestDiscoverOrderAndSteps(t *testing.T) {
	root := t.TempDir()
	writeHooks(t, root,
		"wget/on_Snapshot__61_wget.bg.sh",
		"title/on_Snapshot__54_title.sh",
		"title/on_Snapshot__54_a_title_first.sh", // same NN: file name decides
		"chrome/on_Snapshot__00_chrome_launch.daemon.bg.sh",
		"chrome/on_Snapshot__11_chrome_wait.sh",
		"late/on_Snapshot__99_late.sh",
		"late/on_Snapshot__unnumbered.sh", // step 9, after 99
		"a/on_Snapshot__54_title.sh",      // same NN and name: plugin decides
		".git/on_Snapshot__10_hidden.sh",  // hidden directories are not plugins
	)
	writeFile(t, filepath.Join(root, "wget", "config.json"), `{"properties":{}}`, 0o644)
	writeFile(t, filepath.Join(root, "wget", "README.md"), "docs", 0o644)
	writeFile(t, filepath.Join(root, "wget", "helper.sh"), hookScript, 0o755)
	writeFile(t, filepath.Join(root, "wget", "on_Crawl__10_wget_install.sh"), hookScript, 0o755)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "base", "templates"), 0o755)) // no hooks: not in the plan
	writeFile(t, filepath.Join(root, "base", "config.json"), `{"properties":{}}`, 0o644)

	log, logs := observedLogger()
	plan, err := Discover([]string{root}, log)
	require.NoError(t, err)

	assert.Equal(t, []string{
		"chrome/on_Snapshot__00_chrome_launch.daemon.bg.sh",
		"chrome/on_Snapshot__11_chrome_wait.sh",
		"title/on_Snapshot__54_a_title_first.sh",
		"a/on_Snapshot__54_title.sh",
		"title/on_Snapshot__54_title.sh",
		"wget/on_Snapshot__61_wget.bg.sh",
		"late/on_Snapshot__99_late.sh",
		"late/on_Snapshot__unnumbered.sh",
	}, hookIDs(plan.Hooks))
	assert.Equal(t, []string{"a", "chrome", "late", "title", "wget"}, plan.Plugins())

	var perStep [10]int
	var step9 []string
	for _, h := range plan.Hooks {
		perStep[h.Step]++
		if h.Step == 9 {
			step9 = append(step9, h.ID())
		}
	}
	assert.Equal(t, [10]int{1, 1, 0, 0, 0, 3, 1, 0, 0, 2}, perStep)
	assert.Equal(t, "late/on_Snapshot__unnumbered.sh", step9[1], "unnumbered sorts after 9x")

	wget := plan.Hooks[5]
	absRoot, err := filepath.Abs(root)
	require.NoError(t, err)
	assert.Equal(t, Hook{
		Plugin: "wget", PluginDir: filepath.Join(absRoot, "wget"), Name: "on_Snapshot__61_wget.bg.sh",
		Path: filepath.Join(absRoot, "wget", "on_Snapshot__61_wget.bg.sh"), Stem: "on_Snapshot__61_wget.bg",
		NN: 61, Step: 6, Background: true, Numbered: true,
	}, wget)

	warn := logs.FilterMessageSnippet("no __NN_ order prefix").All()
	require.Len(t, warn, 1)
	assert.Equal(t, zapcore.WarnLevel, warn[0].Level)
	assert.Equal(t, filepath.Join(absRoot, "late", "on_Snapshot__unnumbered.sh"), warn[0].ContextMap()["file"])
}

func TestDiscoverSkipsNonExecutableWithWarning(t *testing.T) {
	root := t.TempDir()
	writeHooks(t, root, "wget/on_Snapshot__61_wget.sh")
	notExec := filepath.Join(root, "wget", "on_Snapshot__62_wget_extra.sh")
	writeFile(t, notExec, hookScript, 0o644)
	// A non-executable file with a broken name is skipped, not an error.
	writeFile(t, filepath.Join(root, "wget", "on_Snapshot__63_x.sh.swp"), "junk", 0o644)

	log, logs := observedLogger()
	plan, err := Discover([]string{root}, log)
	require.NoError(t, err)
	assert.Equal(t, []string{"wget/on_Snapshot__61_wget.sh"}, hookIDs(plan.Hooks))

	warns := logs.FilterMessageSnippet("not executable").FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warns, 2)
	files := []any{warns[0].ContextMap()["file"], warns[1].ContextMap()["file"]}
	absNotExec, err := filepath.Abs(notExec)
	require.NoError(t, err)
	assert.Contains(t, files, absNotExec)
}

func TestDiscoverOverrideAcrossRoots(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	writeHooks(t, first,
		"wget/on_Snapshot__61_wget.sh",
		"wget/on_Snapshot__62_wget_only_in_first.sh",
		"title/on_Snapshot__54_title.sh",
	)
	writeFile(t, filepath.Join(first, "wget", "config.json"), `{"properties":{"A":{"type":"string","default":"first"}}}`, 0o644)
	writeHooks(t, second, "wget/on_Snapshot__61_wget.sh")
	writeFile(t, filepath.Join(second, "wget", "config.json"), `{"properties":{"B":{"type":"string","default":"second"}}}`, 0o644)

	log, logs := observedLogger()
	plan, err := Discover([]string{first, second}, log)
	require.NoError(t, err)

	absSecond, err := filepath.Abs(second)
	require.NoError(t, err)
	assert.Equal(t, []string{"title/on_Snapshot__54_title.sh", "wget/on_Snapshot__61_wget.sh"}, hookIDs(plan.Hooks),
		"the whole plugin dir is replaced: the first root's extra hook is gone")
	assert.Equal(t, filepath.Join(absSecond, "wget"), plan.Hooks[1].PluginDir)
	assert.Equal(t, []string{"B"}, plan.Schema("wget").Keys(), "the schema comes from the overriding dir")
	assert.Equal(t, 1, logs.FilterMessageSnippet("overridden").Len())
}

func TestDiscoverRoots(t *testing.T) {
	t.Run("missing root is an error naming it", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope")
		_, err := Discover([]string{missing}, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), missing)
		assert.Contains(t, err.Error(), "does not exist")
		assert.ErrorIs(t, err, ErrInvalidPlugins, "no retry creates a missing root")
		assert.ErrorIs(t, CheckRoot(missing), ErrInvalidPlugins)
	})
	t.Run("root that is a file is an error", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		writeFile(t, file, "", 0o644)
		_, err := Discover([]string{file}, nil)
		require.ErrorContains(t, err, "not a directory")
		assert.ErrorIs(t, err, ErrInvalidPlugins)
	})
	t.Run("existing root passes the check", func(t *testing.T) {
		assert.NoError(t, CheckRoot(t.TempDir()))
	})
	t.Run("empty root is fine", func(t *testing.T) {
		plan, err := Discover([]string{t.TempDir()}, nil)
		require.NoError(t, err)
		assert.Empty(t, plan.Hooks)
	})
	t.Run("no roots is fine", func(t *testing.T) {
		plan, err := Discover(nil, nil)
		require.NoError(t, err)
		assert.Empty(t, plan.Hooks)
	})
}

func TestDiscoverRuntimes(t *testing.T) {
	tests := []struct {
		config string
		runs   bool
	}{
		{`{}`, true},
		{`{"x-runtimes": []}`, true},
		{`{"x-runtimes": ["archiveflow"]}`, true},
		{`{"x-runtimes": ["archivebox", "abx-dl"]}`, true},
		{`{"x-runtimes": ["ArchiveFlow"]}`, true},
		{`{"x-runtimes": ["archivebox"]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			root := t.TempDir()
			writeHooks(t, root, "p/on_Snapshot__10_p.sh")
			writeFile(t, filepath.Join(root, "p", "config.json"), tt.config, 0o644)
			log, logs := observedLogger()
			plan, err := Discover([]string{root}, log)
			require.NoError(t, err)
			skipped := logs.FilterMessageSnippet("x-runtimes").All()
			if tt.runs {
				assert.Len(t, plan.Hooks, 1)
				assert.Empty(t, skipped)
				return
			}
			assert.Empty(t, plan.Hooks)
			assert.NotContains(t, plan.Schemas, "p")
			require.Len(t, skipped, 1)
			assert.Equal(t, zapcore.InfoLevel, skipped[0].Level)
			assert.Equal(t, "p", skipped[0].ContextMap()["plugin"])
			assert.Equal(t, []any{"archivebox"}, skipped[0].ContextMap()["runtimes"])
		})
	}
}

// One bad plugin never fails discovery: its hooks are kept with the rule
// they break as their Skip reason, and every other plugin's hooks run.
func TestDiscoverToleratesBadPlugins(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // relative path → content; hooks get mode 0755
		skip  string            // the hook kept with a Skip reason
		want  []string
	}{
		{
			name:  "malformed config.json names file, line and column",
			files: map[string]string{"p/on_Snapshot__10_p.sh": hookScript, "p/config.json": "{\n  \"properties\": {\n    \"A\": {\"type\": \"string\",}\n  }\n}\n"},
			skip:  "p/on_Snapshot__10_p.sh",
			want:  []string{"plugin p disabled", "config.json", "line 3, column 28"},
		},
		{
			name:  "wrong-typed keyword",
			files: map[string]string{"p/on_Snapshot__10_p.sh": hookScript, "p/config.json": `{"properties":{"P_TIMEOUT":{"type":"integer","minimum":"x"}}}`},
			skip:  "p/on_Snapshot__10_p.sh",
			want:  []string{"config.json", "P_TIMEOUT", "minimum must be a number"},
		},
		{
			name:  "malformed required_binaries",
			files: map[string]string{"p/on_Snapshot__10_p.sh": hookScript, "p/config.json": `{"required_binaries":[{"binproviders":"env"}]}`},
			skip:  "p/on_Snapshot__10_p.sh",
			want:  []string{"config.json", "required_binaries[0]", "non-empty \"name\""},
		},
		{
			name:  "malformed binaries.jsonl names its line",
			files: map[string]string{"p/on_Snapshot__10_p.sh": hookScript, "p/binaries.jsonl": "{\"type\":\"Binary\",\"name\":\"wget\"}\n\n{\"name\": 3}\n"},
			skip:  "p/on_Snapshot__10_p.sh",
			want:  []string{"binaries.jsonl line 3", "name must be a string"},
		},
		{
			name:  "an __NN_ name that breaks the grammar",
			files: map[string]string{"p/on_Snapshot__5_bad.sh": hookScript},
			skip:  "p/on_Snapshot__5_bad.sh",
			want:  []string{"on_Snapshot__5_bad.sh", "exactly two digits", "must follow on_Snapshot__NN_desc"},
		},
		{
			name:  "an unknown marker after an __NN_ prefix",
			files: map[string]string{"p/on_Snapshot__61_p.foo.sh": hookScript},
			skip:  "p/on_Snapshot__61_p.foo.sh",
			want:  []string{"unknown marker \"foo\""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeHooks(t, root, "good/on_Snapshot__20_good.sh")
			for rel, content := range tt.files {
				mode := os.FileMode(0o644)
				if strings.HasSuffix(rel, ".sh") {
					mode = 0o755
				}
				writeFile(t, filepath.Join(root, rel), content, mode)
			}
			log, logs := observedLogger()
			plan, err := Discover([]string{root}, log)
			require.NoError(t, err)
			byID := map[string]Hook{}
			for _, h := range plan.Hooks {
				byID[h.ID()] = h
			}
			assert.Empty(t, byID["good/on_Snapshot__20_good.sh"].Skip, "the good plugin runs")
			bad, ok := byID[tt.skip]
			require.True(t, ok, "the broken hook is listed: %v", hookIDs(plan.Hooks))
			for _, w := range tt.want {
				assert.Contains(t, bad.Skip, w)
			}
			assert.Equal(t, 1, logs.FilterLevelExact(zapcore.ErrorLevel).Len(), "logged once, as an error")

			data, err := json.Marshal(plan)
			require.NoError(t, err)
			var back Plan
			require.NoError(t, json.Unmarshal(data, &back))
			assert.Equal(t, plan.Hooks, back.Hooks, "the reason crosses the workflow boundary")
		})
	}
}

// A name that breaks the grammar without an __NN_ prefix runs in step 9,
// as ArchiveBox's plan runs a name its step pattern does not match.
func TestDiscoverRunsABadNameWithoutOrderInStepNine(t *testing.T) {
	root := t.TempDir()
	writeHooks(t, root, "p/on_Snapshot__my.hook.bg.sh", "p/on_Snapshot__10_p.sh")
	log, logs := observedLogger()
	plan, err := Discover([]string{root}, log)
	require.NoError(t, err)
	require.Equal(t, []string{"p/on_Snapshot__10_p.sh", "p/on_Snapshot__my.hook.bg.sh"}, hookIDs(plan.Hooks))
	h := plan.Hooks[1]
	assert.Empty(t, h.Skip)
	assert.Equal(t, 9, h.Step)
	assert.True(t, h.Background, ".bg. in the name")
	assert.Contains(t, h.Warning, `unknown marker "hook"`)
	assert.Equal(t, 1, logs.FilterMessageSnippet("running it in step 9").Len())
}

// abx-plugins' install hooks and other families are listed, not run.
func TestDiscoverListsOtherFamiliesAsNotRun(t *testing.T) {
	root := t.TempDir()
	writeHooks(t, root, "chrome/on_Crawl__70_chrome_install.finite.bg.py", "chrome/on_Install__70_chrome.py",
		"chrome/on_Snapshot__30_chrome_navigate.js", "chrome/on_CrawlSetup__90_chrome_launch.daemon.bg.js")
	plan, err := Discover([]string{root}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"chrome/on_Snapshot__30_chrome_navigate.js"}, hookIDs(plan.Hooks))
	require.Equal(t, []string{"chrome/on_Crawl__70_chrome_install.finite.bg.py", "chrome/on_Install__70_chrome.py"}, hookIDs(plan.NotRun))
	for _, h := range plan.NotRun {
		assert.Contains(t, h.Skip, "archiveflow never downloads while a job runs")
	}
}

func TestDiscoverFollowsSymlinks(t *testing.T) {
	elsewhere := t.TempDir()
	writeHooks(t, elsewhere, "wget/on_Snapshot__61_wget.sh", "scripts/title.sh")
	root := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(elsewhere, "wget"), filepath.Join(root, "wget")))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "title"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(elsewhere, "scripts", "title.sh"), filepath.Join(root, "title", "on_Snapshot__54_title.sh")))
	require.NoError(t, os.Symlink(filepath.Join(elsewhere, "missing.sh"), filepath.Join(root, "title", "on_Snapshot__55_broken.sh")))

	log, logs := observedLogger()
	plan, err := Discover([]string{root}, log)
	require.NoError(t, err)
	assert.Equal(t, []string{"title/on_Snapshot__54_title.sh", "wget/on_Snapshot__61_wget.sh"}, hookIDs(plan.Hooks))
	assert.Equal(t, 1, logs.FilterMessageSnippet("broken symlink").Len())

	out, err := exec.Command(plan.Hooks[0].Path).Output()
	require.NoError(t, err, "the symlinked hook runs through its Path")
	assert.Equal(t, "ran\n", string(out))
}

func TestPlanJSONRoundTrip(t *testing.T) {
	root := t.TempDir()
	writeHooks(t, root, "wget/on_Snapshot__61_wget.bg.sh", "title/on_Snapshot__54_title.sh")
	writeFile(t, filepath.Join(root, "wget", "config.json"),
		`{"properties":{"WGET_TIMEOUT":{"type":"integer","default":60,"minimum":5,"x-fallback":"TIMEOUT"},"WGET_RESOLUTION":{"type":"string","default":"1,2","pattern":"^\\d+,\\d+$"}}}`, 0o644)
	plan, err := Discover([]string{root}, nil)
	require.NoError(t, err)

	data, err := json.Marshal(plan)
	require.NoError(t, err)
	var back Plan
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, plan.Hooks, back.Hooks)
	assert.Equal(t, plan.Plugins(), back.Plugins())

	for _, p := range []Plan{plan, back} {
		_, err := p.Schema("wget").Resolve(Sources{Env: map[string]string{"WGET_RESOLUTION": "wide"}})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, "the pattern survives the round trip")
		res, err := p.Schema("wget").Resolve(Sources{Env: map[string]string{"TIMEOUT": "7"}})
		require.NoError(t, err)
		assert.Contains(t, res.Env(), "WGET_TIMEOUT=7")
	}
	assert.Empty(t, back.Schema("title").Keys())
}

// TestDiscoveredHookRunsWithResolvedEnv is the end-to-end path of this
// package: discover a real plugin dir, resolve its config and run the hook
// with the resolved env, without a shell.
func TestDiscoveredHookRunsWithResolvedEnv(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "wget", "on_Snapshot__61_wget.bg.sh"),
		"#!/bin/sh\nprintf '%s|%s|%s|%s\\n' \"$WGET_ENABLED\" \"$WGET_TIMEOUT\" \"$WGET_ARGS\" \"$WGET_OUT\"\n", 0o755)
	writeFile(t, filepath.Join(root, "wget", "config.json"), wgetConfig, 0o644)
	plan, err := Discover([]string{root}, nil)
	require.NoError(t, err)
	require.Len(t, plan.Hooks, 1)
	h := plan.Hooks[0]

	res, err := plan.Schema(h.Plugin).Resolve(Sources{
		Env:  map[string]string{"TIMEOUT": "90", "WGET_EXTRA_ARGS": "--a,--b"},
		Base: map[string]string{"SNAP_DIR": "/snap"},
	})
	require.NoError(t, err)
	require.True(t, res.Enabled)

	cmd := exec.Command(h.Path)
	cmd.Env = res.Env()
	out, err := cmd.Output()
	require.NoError(t, err)
	assert.Equal(t, `True|90|["--no-verbose","-e","robots=off"]|/snap/wget`+"\n", string(out))
}

func TestDiscoverCrawlSetupHooks(t *testing.T) {
	root := t.TempDir()
	writeHooks(t, root,
		"chrome/on_CrawlSetup__90_chrome_launch.daemon.bg.sh",
		"chrome/on_CrawlSetup__91_chrome_wait.sh",
		"chrome/on_Snapshot__11_chrome_wait.sh",
		"sonic/on_CrawlSetup__55_sonic_start.sh",
		"title/on_Snapshot__54_title.sh",
	)
	setup, err := DiscoverEvent([]string{root}, EventCrawlSetup, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"sonic/on_CrawlSetup__55_sonic_start.sh", "chrome/on_CrawlSetup__90_chrome_launch.daemon.bg.sh",
		"chrome/on_CrawlSetup__91_chrome_wait.sh"}, hookIDs(setup.Hooks))
	assert.True(t, setup.Hooks[1].Background && setup.Hooks[1].Daemon)
	assert.Equal(t, []string{"chrome", "sonic"}, setup.Plugins(), "only plugins with setup hooks")
	snap, err := Discover([]string{root}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"chrome/on_Snapshot__11_chrome_wait.sh", "title/on_Snapshot__54_title.sh"}, hookIDs(snap.Hooks))

	_, err = ParseEventName(EventCrawlSetup, "on_CrawlSetup_90_x.sh")
	var ne *NameError
	require.ErrorAs(t, err, &ne)
	assert.Contains(t, ne.Rule, "on_CrawlSetup must be followed by a double underscore")
}
