package hooks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.uber.org/zap"
)

// ConfigFile is the name of a plugin's config schema inside its directory.
const ConfigFile = "config.json"

// ErrInvalidPlugins marks a discovery error that only a change of the
// configuration or of the plugin files can fix, so retrying is pointless: a
// plugins root that is missing or not a directory, a malformed config.json,
// an executable file that breaks the hook name grammar.
var ErrInvalidPlugins = errors.New("invalid plugin set")

// Hook is one discovered, executable on_Snapshot hook.
type Hook struct {
	Plugin     string `json:"plugin"`     // plugin directory base name, e.g. wget
	PluginDir  string `json:"plugin_dir"` // absolute path of the plugin directory
	Name       string `json:"name"`       // file name, e.g. on_Snapshot__61_wget.bg.sh
	Path       string `json:"path"`       // absolute path of the hook file
	Stem       string `json:"stem"`       // Name without its final extension
	NN         int    `json:"nn"`         // 00..99, or UnnumberedNN (100) for unnumbered hooks
	Step       int    `json:"step"`       // first digit of NN; 9 for unnumbered hooks
	Background bool   `json:"background,omitempty"`
	Numbered   bool   `json:"numbered"`
	Finite     bool   `json:"finite,omitempty"` // .finite marker (informational)
	Daemon     bool   `json:"daemon,omitempty"` // .daemon marker (informational)
}

// ID is plugin/name, unique within a Plan.
func (h Hook) ID() string { return h.Plugin + "/" + h.Name }

// Plan is the result of discovery: every runnable hook in execution order
// and the schema of every plugin that contributed hooks. It survives a JSON
// round trip.
type Plan struct {
	Hooks   []Hook             `json:"hooks"`
	Schemas map[string]*Schema `json:"schemas"`
}

// Schema returns plugin's schema, or an empty schema for an unknown plugin.
func (p Plan) Schema(plugin string) *Schema {
	if s, ok := p.Schemas[plugin]; ok && s != nil {
		return s
	}
	return &Schema{Plugin: plugin, Properties: map[string]*Property{}}
}

// Plugins returns the names of the plugins in the plan, sorted.
func (p Plan) Plugins() []string {
	names := make([]string, 0, len(p.Schemas))
	for name := range p.Schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Discover finds the hooks under dirs, a list of plugin roots each holding
// one sub-directory per plugin (ROOT/wget/on_Snapshot__61_wget.bg.sh,
// ROOT/wget/config.json).
//
// A plugin of the same name in a later root replaces the earlier one
// entirely. Symlinked plugin directories and hooks are followed. A missing
// root is an error; an empty one is fine. Hidden directories are ignored.
// Files that are not on_Snapshot hooks are ignored; hooks that are not
// executable are skipped with a warning; unnumbered hooks are kept (step 9)
// with a warning; an executable file that breaks the name grammar is an
// error. A plugin whose config.json x-runtimes does not list archiveflow or
// abx-dl is skipped (info log). A malformed config.json is an error.
//
// Hooks are ordered by NN, then file name, then plugin name.
func Discover(dirs []string, log *zap.Logger) (Plan, error) {
	if log == nil {
		log = zap.NewNop()
	}
	plugins, err := collectPlugins(dirs, log)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Hooks: []Hook{}, Schemas: map[string]*Schema{}}
	names := make([]string, 0, len(plugins))
	for name := range plugins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		hooks, schema, err := loadPlugin(name, plugins[name], log)
		if err != nil {
			return Plan{}, err
		}
		if schema == nil {
			continue
		}
		plan.Hooks = append(plan.Hooks, hooks...)
		plan.Schemas[name] = schema
	}
	sortHooks(plan.Hooks)
	return plan, nil
}

// sortHooks orders hooks by NN, then file name, then plugin.
func sortHooks(hooks []Hook) {
	sort.SliceStable(hooks, func(i, j int) bool {
		a, b := hooks[i], hooks[j]
		if a.NN != b.NN {
			return a.NN < b.NN
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Plugin < b.Plugin
	})
}

// collectPlugins maps plugin name → absolute plugin directory, later roots
// overriding earlier ones.
func collectPlugins(dirs []string, log *zap.Logger) (map[string]string, error) {
	plugins := map[string]string{}
	for _, root := range dirs {
		abs, err := filepath.Abs(root)
		if err != nil {
			return nil, fmt.Errorf("discover hooks: plugins root %q: %w", root, err)
		}
		if err := CheckRoot(abs); err != nil {
			return nil, fmt.Errorf("discover hooks: %w", err)
		}
		entries, err := os.ReadDir(abs)
		if err != nil {
			return nil, fmt.Errorf("discover hooks: read plugins root %s: %w", abs, err)
		}
		for _, e := range entries {
			dir := filepath.Join(abs, e.Name())
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			info, err := os.Stat(dir) // follows symlinks
			if err != nil {
				log.Warn("skipping unreadable plugin directory", zap.String("dir", dir), zap.Error(err))
				continue
			}
			if !info.IsDir() {
				continue
			}
			if prev, ok := plugins[e.Name()]; ok {
				log.Info("plugin overridden by a later plugins root",
					zap.String("plugin", e.Name()), zap.String("dir", dir), zap.String("overrides", prev))
			}
			plugins[e.Name()] = dir
		}
	}
	return plugins, nil
}

// CheckRoot checks that root, a plugins root, is an existing directory.
// A missing root or one that is not a directory is ErrInvalidPlugins.
func CheckRoot(root string) error {
	info, err := os.Stat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("plugins root %s does not exist: %w", root, ErrInvalidPlugins)
	}
	if err != nil {
		return fmt.Errorf("plugins root %s: %w", root, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("plugins root %s is not a directory: %w", root, ErrInvalidPlugins)
	}
	return nil
}

// loadPlugin returns the executable hooks of one plugin directory and its
// schema. A nil schema means the plugin contributes nothing (no hooks, or
// skipped by x-runtimes).
func loadPlugin(plugin, dir string, log *zap.Logger) ([]Hook, *Schema, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("discover hooks: read plugin %s directory %s: %w", plugin, dir, err)
	}
	var candidates []os.DirEntry
	for _, e := range entries {
		if _, err := ParseName(e.Name()); !errors.Is(err, ErrNotAHook) {
			candidates = append(candidates, e)
		}
	}
	if len(candidates) == 0 {
		return nil, nil, nil
	}
	schema, err := LoadSchema(filepath.Join(dir, ConfigFile), plugin)
	if err != nil {
		var readErr *fs.PathError
		if !errors.As(err, &readErr) { // not an I/O error: the file is malformed
			err = fmt.Errorf("%w: %w", err, ErrInvalidPlugins)
		}
		return nil, nil, fmt.Errorf("discover hooks: plugin %s: %w", plugin, err)
	}
	if !schema.SupportsRuntime() {
		log.Info("skipping plugin: config.json x-runtimes does not list archiveflow or abx-dl",
			zap.String("plugin", plugin), zap.Strings("runtimes", schema.Runtimes), zap.String("config", schema.Path))
		return nil, nil, nil
	}
	var hooks []Hook
	for _, e := range candidates {
		h, ok, err := loadHook(plugin, dir, e.Name(), log)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			hooks = append(hooks, h)
		}
	}
	if len(hooks) == 0 {
		return nil, nil, nil
	}
	return hooks, schema, nil
}

// loadHook checks one candidate file. ok is false when it is skipped.
func loadHook(plugin, dir, name string, log *zap.Logger) (Hook, bool, error) {
	path := filepath.Join(dir, name)
	info, err := os.Stat(path) // follows symlinks
	if err != nil {
		log.Warn("skipping hook: cannot stat it (broken symlink?)", zap.String("plugin", plugin), zap.String("file", path), zap.Error(err))
		return Hook{}, false, nil
	}
	if info.IsDir() {
		return Hook{}, false, nil
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		log.Warn("skipping hook: file is not executable", zap.String("plugin", plugin), zap.String("file", path),
			zap.Stringer("mode", info.Mode()))
		return Hook{}, false, nil
	}
	n, err := ParseName(name)
	if err != nil {
		return Hook{}, false, fmt.Errorf("discover hooks: plugin %s: %s: %w: %w", plugin, path, err, ErrInvalidPlugins)
	}
	if !n.Numbered {
		log.Warn("hook has no __NN_ order prefix: running it in step 9 after the numbered hooks",
			zap.String("plugin", plugin), zap.String("file", path))
	}
	return Hook{
		Plugin: plugin, PluginDir: dir, Name: name, Path: path, Stem: n.Stem,
		NN: n.NN, Step: n.Step, Background: n.Background, Numbered: n.Numbered,
		Finite: n.Finite, Daemon: n.Daemon,
	}, true, nil
}
