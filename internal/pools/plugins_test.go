package pools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/plugins"
)

func writePlugin(t *testing.T, root, plugin, hook string) {
	t.Helper()
	dir := filepath.Join(root, plugin)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, hook), []byte("#!/bin/sh\nexit 0\n"), 0o755))
}

// The built-in set comes first and configured roots after it, so a
// configured plugin of the same name replaces the built-in one.
func TestPluginRootsBuiltinFirstConfiguredOverride(t *testing.T) {
	cfg := config.Default()
	cfg.ArchiveDir = t.TempDir()
	mine := t.TempDir()
	writePlugin(t, mine, "title", "on_Snapshot__54_mytitle.sh")
	writePlugin(t, mine, "wordcount", "on_Snapshot__85_wordcount.sh")
	cfg.Plugins.Dirs = []string{mine}

	roots, err := PluginRoots(&cfg)
	require.NoError(t, err)
	builtin := filepath.Join(cfg.ArchiveDir, "plugins", plugins.DirPrefix+plugins.Hash())
	assert.Equal(t, []string{builtin, mine}, roots)

	plan, err := hooks.Discover(roots, zap.NewNop())
	require.NoError(t, err)
	byPlugin := map[string]hooks.Hook{}
	for _, h := range plan.Hooks {
		byPlugin[h.Plugin] = h
	}
	assert.Equal(t, filepath.Join(mine, "title", "on_Snapshot__54_mytitle.sh"), byPlugin["title"].Path, "configured title replaces the built-in one")
	assert.Equal(t, filepath.Join(mine, "wordcount"), byPlugin["wordcount"].PluginDir, "configured roots add plugins")
	assert.Equal(t, filepath.Join(builtin, "wget"), byPlugin["wget"].PluginDir, "the other built-ins stay")
	assert.Len(t, plan.Plugins(), len(plugins.Names())+1)
}

func TestPluginRootsWithoutBuiltins(t *testing.T) {
	cfg := config.Default()
	cfg.ArchiveDir = t.TempDir()
	cfg.Plugins.Builtin = false
	mine := t.TempDir()
	cfg.Plugins.Dirs = []string{mine}

	roots, err := PluginRoots(&cfg)
	require.NoError(t, err)
	assert.Equal(t, []string{mine}, roots)
	assert.NoDirExists(t, filepath.Join(cfg.ArchiveDir, "plugins"), "nothing is materialised")
}

// A configured root that does not exist stops the worker at start, named
// by its key and path; every bad root is reported at once.
func TestPluginRootsRefuseMissingRoots(t *testing.T) {
	cfg := config.Default()
	cfg.ArchiveDir = t.TempDir()
	missing := filepath.Join(t.TempDir(), "no-such-plugins")
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cfg.Plugins.Dirs = []string{t.TempDir(), missing, file}

	_, err := PluginRoots(&cfg)
	require.Error(t, err)
	var fe *config.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "plugins.dirs[1]", fe.Key)
	msg := err.Error()
	assert.Contains(t, msg, "config plugins.dirs[1] = "+missing+": must be an existing plugin root directory")
	assert.Contains(t, msg, "does not exist")
	assert.Contains(t, msg, "plugins.dirs[2] = "+file)
	assert.Contains(t, msg, "is not a directory")
	assert.NoDirExists(t, filepath.Join(cfg.ArchiveDir, "plugins"), "nothing is materialised for a refused configuration")
}

// The hooks of every worker process call the process's own executable
// back, whatever ARCHIVEFLOW_BIN the environment carried.
func TestNewDepsExportsOwnExecutableAsArchiveflowBin(t *testing.T) {
	t.Setenv("ARCHIVEFLOW_BIN", "/somewhere/else")
	cfg := config.Default()
	cfg.ArchiveDir = t.TempDir()
	d, err := NewDeps(&cfg, &backend.Backend{}, zap.NewNop())
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	var last string
	for _, kv := range d.Env {
		if v, ok := strings.CutPrefix(kv, "ARCHIVEFLOW_BIN="); ok {
			last = v
		}
	}
	assert.Equal(t, self, last, "the last ARCHIVEFLOW_BIN wins in a hook's environment")
}
