package hooks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// BinariesFile is the older abx-plugins manifest of a plugin's binaries
// beside its config.json: one JSON object per line, each naming a binary
// ({"type": "Binary", "name": "wget", "binproviders": "apt,brew,env"}).
const BinariesFile = "binaries.jsonl"

// Binary is one binary a plugin needs on the host that runs its hooks:
// an entry of config.json's required_binaries or a line of binaries.jsonl.
type Binary struct {
	// Name is a command looked up on the hooks' PATH, a path, or a
	// template such as {NODE_BINARY} filled from the plugin's resolved
	// configuration.
	Name string `json:"name"`
	// Providers is abx-plugins' binproviders list (env, apt, npm, ...):
	// where an installer would look; archiveflow only reports it.
	Providers string `json:"binproviders,omitempty"`
	// MinVersion is informational: reported, not enforced.
	MinVersion string `json:"min_version,omitempty"`
	// Source says where the requirement is declared: FILE or FILE:LINE.
	Source string `json:"source"`
}

// templatePattern is a {KEY} reference in a binary's name (abx-dl's).
var templatePattern = regexp.MustCompile(`\{([A-Z][A-Z0-9_]*)\}`)

// binaryDoc is the wire shape of one required binary.
type binaryDoc struct {
	Type       string          `json:"type"`
	Name       json.RawMessage `json:"name"`
	Providers  json.RawMessage `json:"binproviders"`
	MinVersion json.RawMessage `json:"min_version"`
}

// parseBinary reads one required binary; where names it in errors.
func parseBinary(raw json.RawMessage, where string) (Binary, error) {
	var d binaryDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return Binary{}, fmt.Errorf("%s: a required binary must be an object with a string \"name\", got %s", where, shortJSON(raw))
	}
	b := Binary{Source: where}
	fields := []struct {
		key string
		raw json.RawMessage
		out *string
	}{{"name", d.Name, &b.Name}, {"binproviders", d.Providers, &b.Providers}, {"min_version", d.MinVersion, &b.MinVersion}}
	for _, f := range fields {
		if len(f.raw) == 0 || isNull(f.raw) {
			continue
		}
		if err := json.Unmarshal(f.raw, f.out); err != nil {
			return Binary{}, fmt.Errorf("%s: required binary %s must be a string, got %s", where, f.key, shortJSON(f.raw))
		}
	}
	if strings.TrimSpace(b.Name) == "" {
		return Binary{}, fmt.Errorf("%s: a required binary needs a non-empty \"name\"", where)
	}
	b.Name = strings.TrimSpace(b.Name)
	return b, nil
}

// parseDependencies reads required_binaries and required_plugins.
func (s *Schema) parseDependencies(doc map[string]json.RawMessage) error {
	if raw, ok := doc["required_binaries"]; ok && !isNull(raw) {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("required_binaries must be an array of objects, got %s", shortJSON(raw))
		}
		for i, item := range list {
			b, err := parseBinary(item, fmt.Sprintf("required_binaries[%d]", i))
			if err != nil {
				return err
			}
			b.Source = ConfigFile
			s.Binaries = append(s.Binaries, b)
		}
	}
	if raw, ok := doc["required_plugins"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &s.Requires); err != nil {
			return fmt.Errorf("required_plugins must be an array of plugin names, got %s", shortJSON(raw))
		}
		for i, name := range s.Requires {
			if strings.TrimSpace(name) == "" {
				return fmt.Errorf("required_plugins[%d]: empty plugin name", i)
			}
		}
	}
	return nil
}

// LoadBinaries reads a plugin's binaries.jsonl; a missing file declares
// nothing. Blank lines are skipped, and so are records of another type
// than Binary; a line that is not a JSON object or has no name is an
// error naming the file and the line.
func LoadBinaries(path string) ([]Binary, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load plugin binaries %s: %w", path, err)
	}
	var out []Binary
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		where := fmt.Sprintf("%s line %d", path, line)
		var top map[string]json.RawMessage
		if err := json.Unmarshal(text, &top); err != nil {
			return nil, fmt.Errorf("load plugin binaries %s: must be a JSON object (%s)", where, describeJSONError(text, err))
		}
		var typ string
		if raw, ok := top["type"]; ok && json.Unmarshal(raw, &typ) == nil && typ != "" && typ != "Binary" {
			continue
		}
		b, err := parseBinary(text, where)
		if err != nil {
			return nil, fmt.Errorf("load plugin binaries %s", err)
		}
		b.Source = fmt.Sprintf("%s:%d", BinariesFile, line)
		out = append(out, b)
	}
	return out, nil
}

// Hydrate fills the {KEY} templates of b's name from value, the plugin's
// resolved configuration. A template naming a key without a value is an
// error.
func (b Binary) Hydrate(value func(key string) (string, bool)) (string, error) {
	var missing string
	out := templatePattern.ReplaceAllStringFunc(b.Name, func(m string) string {
		key := m[1 : len(m)-1]
		v, ok := value(key)
		if !ok && missing == "" {
			missing = key
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("binary %s: template {%s} names no configured key of the plugin", b.Name, missing)
	}
	if strings.TrimSpace(out) == "" {
		return "", fmt.Errorf("binary %s: the template resolves to an empty name", b.Name)
	}
	return strings.TrimSpace(out), nil
}

// LookBinary finds name as the hooks would run it: a name with a slash is
// that file, any other is searched in the directories of pathList (a PATH
// value). It returns the file's absolute path, or an error saying where it
// was not found.
func LookBinary(name, pathList string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", err
		}
		return filepath.Abs(name)
	}
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // the hooks' working directory is their output dir: never trusted
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", errors.New("not found on the hooks' PATH")
}

// executable checks that path is a regular file with an execute bit.
func executable(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, errors.Unwrap(err))
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: not an executable file", path)
	}
	return nil
}

// OnPath reports whether b is looked up on the hooks' PATH: its name is a
// template or a path (the configuration says where it is), or its
// binproviders are absent or list env. A binary only another provider
// supplies (abx-plugins' chromewebstore extensions, a puppeteer-only
// browser) is not a file on PATH: it is reported, never looked up.
func (b Binary) OnPath() bool {
	if b.Providers == "" || strings.ContainsAny(b.Name, "{/") {
		return true
	}
	for _, p := range strings.Split(b.Providers, ",") {
		if strings.TrimSpace(p) == "env" {
			return true
		}
	}
	return false
}

// BinaryCheck is a required binary looked up on this host.
type BinaryCheck struct {
	Binary
	Plugin   string
	Resolved string // Name with its templates filled; "" when they could not be
	Path     string // the file found; "" when missing
	Problem  string // why it is missing; "" when found or not looked up
	// NotChecked says why it was not looked up (Binary.OnPath).
	NotChecked string
}

// CheckBinaries looks up every binary plugin needs: r is its resolved
// configuration (its {KEY} templates), pathList the PATH its hooks get.
func (p Plan) CheckBinaries(plugin string, r *Resolved, pathList string) []BinaryCheck {
	var out []BinaryCheck
	for _, b := range p.Binaries[plugin] {
		c := BinaryCheck{Binary: b, Plugin: plugin}
		if !b.OnPath() {
			c.Resolved = b.Name
			c.NotChecked = "binproviders " + b.Providers + " without env: not a file on the hooks' PATH, not looked up"
			out = append(out, c)
			continue
		}
		name, err := b.Hydrate(func(key string) (string, bool) {
			if r == nil {
				return "", false
			}
			v, ok := r.Value(key)
			if !ok {
				return "", false
			}
			return formatEnv(v), true
		})
		if err != nil {
			c.Problem = err.Error()
			out = append(out, c)
			continue
		}
		c.Resolved = name
		if c.Path, err = LookBinary(name, pathList); err != nil {
			c.Problem = err.Error()
		}
		out = append(out, c)
	}
	return out
}

// Unmet says, for each plugin of p with hooks that would start, why it
// cannot run on this host: a binary it requires is missing (after its
// {KEY} templates are filled from its resolved configuration, resolved),
// or a plugin it requires is not installed, cannot be loaded, is disabled
// or cannot run itself. resolved holds the plugins whose configuration
// resolved; a plugin absent from it (a configuration error) is not
// checked, and one resolved disabled is not checked either. pathList is
// the PATH the hooks get. A plugin absent from the result can run.
func (p Plan) Unmet(resolved map[string]*Resolved, pathList string) map[string]string {
	unmet := map[string]string{}
	var plugins []string
	for plugin, r := range resolved {
		if r != nil && r.Enabled {
			plugins = append(plugins, plugin)
		}
	}
	sort.Strings(plugins)
	for _, plugin := range plugins {
		for _, c := range p.CheckBinaries(plugin, resolved[plugin], pathList) {
			if c.Problem != "" {
				unmet[plugin] = fmt.Sprintf("plugin %s needs binary %s (%s): %s", plugin, c.display(), c.Source, c.Problem)
				break
			}
		}
	}
	// Required plugins, until nothing changes: a plugin that cannot run
	// takes down the plugins that require it.
	for changed := true; changed; {
		changed = false
		for _, plugin := range plugins {
			if _, done := unmet[plugin]; done {
				continue
			}
			if why := p.requiredProblem(plugin, resolved, unmet); why != "" {
				unmet[plugin] = why
				changed = true
			}
		}
	}
	return unmet
}

// display names a checked binary: its resolved name and its template.
func (c BinaryCheck) display() string {
	if c.Resolved == "" || c.Resolved == c.Name {
		return c.Name
	}
	return c.Resolved + " from " + c.Name
}

// requiredProblem is why one of plugin's required plugins stops it, "" if
// none does.
func (p Plan) requiredProblem(plugin string, resolved map[string]*Resolved, unmet map[string]string) string {
	for _, dep := range p.Schema(plugin).Requires {
		name, ok := p.installedName(dep)
		switch {
		case !ok:
			return fmt.Sprintf("plugin %s requires plugin %s, which is not installed on this host", plugin, dep)
		case p.Installed[name] != "":
			return fmt.Sprintf("plugin %s requires plugin %s, which cannot be loaded: %s", plugin, name, p.Installed[name])
		case resolved[name] != nil && !resolved[name].Enabled:
			return fmt.Sprintf("plugin %s requires plugin %s, which is disabled by configuration", plugin, name)
		case unmet[name] != "":
			return fmt.Sprintf("plugin %s requires plugin %s, which cannot run: %s", plugin, name, unmet[name])
		}
	}
	return ""
}

// installedName finds a plugin by name, case-insensitively as abx-dl does.
func (p Plan) installedName(name string) (string, bool) {
	if _, ok := p.Installed[name]; ok {
		return name, true
	}
	for n := range p.Installed {
		if strings.EqualFold(n, name) {
			return n, true
		}
	}
	return "", false
}
