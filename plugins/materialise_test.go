package plugins_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/plugins"
)

// hookNames lists plan's hooks as plugin/name.
func hookNames(p hooks.Plan) []string {
	var out []string
	for _, h := range p.Hooks {
		out = append(out, h.ID())
	}
	return out
}

func TestMaterialisedSetIsTheSourceDirectory(t *testing.T) {
	root := t.TempDir()
	dir, err := plugins.Materialise(root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, plugins.DirPrefix+plugins.Hash()), dir)

	got, err := hooks.Discover([]string{dir}, zap.NewNop())
	require.NoError(t, err)
	assert.Equal(t, hookNames(builtinPlan(t)), hookNames(got), "every hook of plugins/ is embedded")
	assert.Equal(t, builtinPlan(t).Plugins(), plugins.Names())
	for _, h := range got.Hooks {
		src, err := os.ReadFile(filepath.Join(h.Plugin, h.Name))
		require.NoError(t, err)
		dst, err := os.ReadFile(h.Path)
		require.NoError(t, err)
		assert.Equal(t, string(src), string(dst), h.ID())
		info, err := os.Stat(h.Path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), info.Mode().Perm(), "%s must be executable", h.ID())
		cfg, err := os.ReadFile(filepath.Join(h.Plugin, hooks.ConfigFile))
		require.NoError(t, err)
		cfgDst, err := os.ReadFile(filepath.Join(h.PluginDir, hooks.ConfigFile))
		require.NoError(t, err)
		assert.Equal(t, string(cfg), string(cfgDst), h.Plugin)
	}
}

func TestMaterialiseIsIdempotent(t *testing.T) {
	root := t.TempDir()
	dir, err := plugins.Materialise(root)
	require.NoError(t, err)
	probe := filepath.Join(dir, "wget", hooks.ConfigFile)
	before, err := os.Stat(probe)
	require.NoError(t, err)

	again, err := plugins.Materialise(root)
	require.NoError(t, err)
	assert.Equal(t, dir, again)
	after, err := os.Stat(probe)
	require.NoError(t, err)
	assert.Equal(t, before.ModTime(), after.ModTime(), "an intact copy is not rewritten")
	assertOnlyTheSet(t, root)
}

func TestConcurrentMaterialiseAgreeOnOneCompleteCopy(t *testing.T) {
	root := filepath.Join(t.TempDir(), "not-yet-created")
	const n = 8
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			dirs[i], errs[i] = plugins.Materialise(root)
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, dirs[0], dirs[i])
	}
	got, err := hooks.Discover([]string{dirs[0]}, zap.NewNop())
	require.NoError(t, err)
	assert.Equal(t, hookNames(builtinPlan(t)), hookNames(got))
	assertOnlyTheSet(t, root)
}

func TestMaterialiseReplacesADamagedCopy(t *testing.T) {
	cases := map[string]func(t *testing.T, dir string){
		"changed file": func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "title", hooks.ConfigFile), []byte("{}"), 0o644))
		},
		"hook not executable": func(t *testing.T, dir string) {
			require.NoError(t, os.Chmod(filepath.Join(dir, "title", "on_Snapshot__53_title.sh"), 0o644))
		},
		"missing file": func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "title", "on_Snapshot__53_title.sh")))
		},
		"extra plugin": func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "evil"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "evil", "on_Snapshot__10_evil.sh"), []byte("#!/bin/sh\n"), 0o755))
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir, err := plugins.Materialise(root)
			require.NoError(t, err)
			damage(t, dir)

			again, err := plugins.Materialise(root)
			require.NoError(t, err)
			assert.Equal(t, dir, again)
			got, err := hooks.Discover([]string{dir}, zap.NewNop())
			require.NoError(t, err)
			assert.Equal(t, hookNames(builtinPlan(t)), hookNames(got))
			src, err := os.ReadFile(filepath.Join("title", hooks.ConfigFile))
			require.NoError(t, err)
			dst, err := os.ReadFile(filepath.Join(dir, "title", hooks.ConfigFile))
			require.NoError(t, err)
			assert.Equal(t, string(src), string(dst))
			assertOnlyTheSet(t, root)
		})
	}
}

// assertOnlyTheSet checks that root holds the materialised set and no
// temporary or stale directories.
func assertOnlyTheSet(t *testing.T, root string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{plugins.DirPrefix + plugins.Hash()}, names)
}
