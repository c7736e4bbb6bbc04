package hooks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	// Skip is why the hook must not start, decided at discovery: its name
	// breaks the grammar with an __NN_ order prefix, or its plugin cannot
	// be loaded (a malformed config.json or binaries.jsonl). Such a hook
	// is reported skipped with this reason, never started.
	Skip string `json:"skip,omitempty"`
	// Warning is what discovery warned about a hook that runs anyway: a
	// name that breaks the grammar without an __NN_ prefix runs in step 9.
	Warning string `json:"warning,omitempty"`
}

// ID is plugin/name, unique within a Plan.
func (h Hook) ID() string { return h.Plugin + "/" + h.Name }

// Plan is the result of discovery: every runnable hook in execution order
// and the schema of every plugin that contributed hooks. It survives a JSON
// round trip.
type Plan struct {
	Hooks   []Hook             `json:"hooks"`
	Schemas map[string]*Schema `json:"schemas"`
	// Binaries are the binaries each plugin of Hooks requires
	// (config.json's required_binaries, then binaries.jsonl's).
	Binaries map[string][]Binary `json:"binaries,omitempty"`
	// Installed is every plugin directory found, whatever its hooks: ""
	// when it loads, else why it cannot (a malformed config.json, an
	// x-runtimes that leaves archiveflow out). required_plugins are
	// checked against it.
	Installed map[string]string `json:"installed,omitempty"`
	// Dirs is every installed plugin's directory.
	Dirs map[string]string `json:"dirs,omitempty"`
	// NotRun are the hook files of families archiveflow never runs
	// (abx-plugins' on_Crawl__ install hooks, on_Install__, ...), each
	// with the reason in Skip.
	NotRun []Hook `json:"not_run,omitempty"`
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
// Files that are not on_Snapshot hooks are ignored, except hooks of the
// families archiveflow never runs (on_Crawl__, on_Install__, ...), listed
// in NotRun with the reason; hooks that are not executable are skipped
// with a warning; unnumbered hooks are kept (step 9) with a warning. One
// bad plugin never fails discovery: an executable file that breaks the
// name grammar runs in step 9 with a Warning when it has no __NN_ prefix,
// else it is kept with a Skip reason naming the rule; a malformed
// config.json or binaries.jsonl keeps the plugin's hooks with the error
// (file, line, rule) as their Skip reason. A plugin whose config.json
// x-runtimes does not list archiveflow or abx-dl is skipped (info log).
//
// Hooks are ordered by NN, then file name, then plugin name.
func Discover(dirs []string, log *zap.Logger) (Plan, error) {
	return DiscoverEvent(dirs, EventSnapshot, log)
}

// DiscoverEvent is Discover for the hooks of event (EventSnapshot or
// EventCrawlSetup), with the same rules and order. A plugin contributes
// its schema when it has hooks of that event.
func DiscoverEvent(dirs []string, event string, log *zap.Logger) (Plan, error) {
	if log == nil {
		log = zap.NewNop()
	}
	plugins, err := collectPlugins(dirs, log)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Hooks: []Hook{}, Schemas: map[string]*Schema{}, Binaries: map[string][]Binary{}, Installed: map[string]string{},
		Dirs: map[string]string{}}
	names := make([]string, 0, len(plugins))
	for name := range plugins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, err := loadPlugin(event, name, plugins[name], log)
		if err != nil {
			return Plan{}, err
		}
		plan.Installed[name] = p.problem
		plan.Dirs[name] = plugins[name]
		plan.NotRun = append(plan.NotRun, p.notRun...)
		if p.schema == nil {
			continue
		}
		plan.Hooks = append(plan.Hooks, p.hooks...)
		plan.Schemas[name] = p.schema
		if len(p.binaries) > 0 {
			plan.Binaries[name] = p.binaries
		}
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

// plugin is what discovery found in one plugin directory.
type plugin struct {
	hooks    []Hook   // the event's hooks, runnable or with a Skip reason
	schema   *Schema  // nil: the plugin contributes no hooks to the plan
	binaries []Binary // config.json's required_binaries, then binaries.jsonl's
	problem  string   // why the plugin cannot be loaded; "" when it can
	notRun   []Hook   // hooks of families archiveflow never runs
}

// loadPlugin reads one plugin directory: the executable hooks of event,
// its config.json and binaries.jsonl, the hooks of families never run. A
// malformed config.json or binaries.jsonl disables this plugin only: its
// hooks are kept with the error as their Skip reason. Only an I/O error
// is returned.
func loadPlugin(event, name, dir string, log *zap.Logger) (plugin, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return plugin{}, fmt.Errorf("discover hooks: read plugin %s directory %s: %w", name, dir, err)
	}
	var p plugin
	var candidates []os.DirEntry
	for _, e := range entries {
		if _, err := ParseEventName(event, e.Name()); !errors.Is(err, ErrNotAHook) {
			candidates = append(candidates, e)
		} else if h, ok := otherFamily(name, dir, e.Name()); ok {
			log.Info("hook not run: "+h.Skip, zap.String("plugin", name), zap.String("file", h.Path))
			p.notRun = append(p.notRun, h)
		}
	}
	schema, err := loadDependencies(dir, name)
	if err != nil {
		var readErr *fs.PathError
		if errors.As(err, &readErr) && len(candidates) > 0 {
			return plugin{}, fmt.Errorf("discover hooks: plugin %s: %w", name, err)
		}
		p.problem = err.Error()
	} else if !schema.SupportsRuntime() {
		p.problem = fmt.Sprintf("config.json x-runtimes %q does not list archiveflow or abx-dl", schema.Runtimes)
		if len(candidates) > 0 {
			log.Info("skipping plugin: config.json x-runtimes does not list archiveflow or abx-dl",
				zap.String("plugin", name), zap.Strings("runtimes", schema.Runtimes), zap.String("config", schema.Path))
		}
		return p, nil
	}
	if len(candidates) == 0 {
		return p, nil
	}
	if p.problem != "" {
		log.Error("plugin disabled: its files are malformed; its hooks are reported skipped", zap.String("plugin", name),
			zap.String("dir", dir), zap.String("error", p.problem))
		schema = &Schema{Plugin: name, Properties: map[string]*Property{}}
	} else {
		p.binaries = slices.Concat(schema.Binaries, schema.binariesFile)
	}
	for _, e := range candidates {
		h, ok := loadHook(event, name, dir, e.Name(), log)
		if !ok {
			continue
		}
		if p.problem != "" && h.Skip == "" {
			h.Skip = fmt.Sprintf("plugin %s disabled: %s", name, p.problem)
		}
		p.hooks = append(p.hooks, h)
	}
	if len(p.hooks) > 0 {
		p.schema = schema
	}
	return p, nil
}

// loadDependencies loads a plugin's config.json and its binaries.jsonl.
func loadDependencies(dir, name string) (*Schema, error) {
	schema, err := LoadSchema(filepath.Join(dir, ConfigFile), name)
	if err != nil {
		return nil, err
	}
	if schema.binariesFile, err = LoadBinaries(filepath.Join(dir, BinariesFile)); err != nil {
		return nil, err
	}
	return schema, nil
}

// familyPattern is the head of any hook file: on_FAMILY__.
var familyPattern = regexp.MustCompile(`^on_([A-Za-z][A-Za-z0-9]*)__`)

// otherFamily reports an executable hook of a family archiveflow never
// runs, with the reason in its Skip.
func otherFamily(pluginName, dir, name string) (Hook, bool) {
	m := familyPattern.FindStringSubmatch(name)
	if m == nil || m[1] == EventSnapshot || m[1] == EventCrawlSetup {
		return Hook{}, false
	}
	path := filepath.Join(dir, name)
	if info, err := os.Stat(path); err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return Hook{}, false
	}
	why := fmt.Sprintf("archiveflow runs on_Snapshot__ and on_CrawlSetup__ hooks only, never on_%s__ hooks", m[1])
	if m[1] == "Crawl" || m[1] == "Install" || m[1] == "BinaryRequest" {
		why = fmt.Sprintf("on_%s__ hooks install dependencies at run time under abx-dl; archiveflow never downloads while a job runs: provide the plugin's required binaries on the worker host beforehand (docs/hooks.md, `starter plugins`)", m[1])
	}
	h := Hook{Plugin: pluginName, PluginDir: dir, Name: name, Path: path, Stem: strings.TrimSuffix(name, filepath.Ext(name)),
		Step: 9, NN: UnnumberedNN, Skip: why}
	if n, err := ParseEventName(m[1], name); err == nil {
		h.NN, h.Step, h.Background, h.Numbered = n.NN, n.Step, n.Background, n.Numbered
	}
	return h, true
}

// loadHook checks one candidate file. ok is false when it is no hook (a
// directory, a file without an execute bit). A name that breaks the
// grammar with an __NN_ order prefix is kept with a Skip reason; one
// without runs in step 9 with a Warning, as ArchiveBox's plan runs a hook
// whose name has no __NN_.
func loadHook(event, plugin, dir, name string, log *zap.Logger) (Hook, bool) {
	path := filepath.Join(dir, name)
	info, err := os.Stat(path) // follows symlinks
	if err != nil {
		log.Warn("skipping hook: cannot stat it (broken symlink?)", zap.String("plugin", plugin), zap.String("file", path), zap.Error(err))
		return Hook{}, false
	}
	if info.IsDir() {
		return Hook{}, false
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		log.Warn("skipping hook: file is not executable", zap.String("plugin", plugin), zap.String("file", path),
			zap.Stringer("mode", info.Mode()))
		return Hook{}, false
	}
	n, err := ParseEventName(event, name)
	if err != nil {
		return badlyNamed(event, plugin, dir, name, err, log), true
	}
	if !n.Numbered {
		log.Warn("hook has no __NN_ order prefix: running it in step 9 after the numbered hooks",
			zap.String("plugin", plugin), zap.String("file", path))
	}
	return Hook{
		Plugin: plugin, PluginDir: dir, Name: name, Path: path, Stem: n.Stem,
		NN: n.NN, Step: n.Step, Background: n.Background, Numbered: n.Numbered,
		Finite: n.Finite, Daemon: n.Daemon,
	}, true
}

// orderPrefix is an __NN_ order prefix however many digits it has.
var orderPrefix = regexp.MustCompile(`__[0-9]+_`)

// badlyNamed is the hook of a file whose name breaks the grammar (err).
func badlyNamed(event, plugin, dir, name string, err error, log *zap.Logger) Hook {
	path := filepath.Join(dir, name)
	h := Hook{Plugin: plugin, PluginDir: dir, Name: name, Path: path, Stem: strings.TrimSuffix(name, filepath.Ext(name)),
		NN: UnnumberedNN, Step: 9, Background: strings.Contains(name, "."+markerBackground+".")}
	if orderPrefix.MatchString(name) {
		h.Skip = fmt.Sprintf("%s; a name with an __NN_ order prefix must follow on_%s__NN_desc[.finite|.daemon][.bg].ext to run", err, event)
		log.Error("hook not run: its name breaks the grammar", zap.String("plugin", plugin), zap.String("file", path), zap.String("rule", err.Error()))
		return h
	}
	h.Warning = fmt.Sprintf("%s; it has no __NN_ order prefix, so it runs in step 9 after the numbered hooks", err)
	log.Warn("hook name breaks the grammar: running it in step 9", zap.String("plugin", plugin), zap.String("file", path), zap.String("rule", err.Error()))
	return h
}
