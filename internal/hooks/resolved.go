package hooks

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// ConfigError is an invalid plugin configuration value: a value of the
// wrong type, outside its enum or bounds, not matching its pattern, or a
// default template with an unknown reference or a cycle. It is permanent:
// retrying the hook cannot fix it, so the workflow layer treats it as
// non-retryable.
type ConfigError struct {
	Plugin string
	Key    string
	Value  string // the offending value as text (as given, or as resolved)
	Rule   string // the rule it breaks
	Source string // where the value came from (see Resolved.Origin); may be ""
}

// maxErrorValue caps the value quoted in Error().
const maxErrorValue = 200

func (e *ConfigError) Error() string {
	v := e.Value
	if len(v) > maxErrorValue {
		cut := maxErrorValue
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "..."
	}
	msg := fmt.Sprintf("plugin %s: config %s=%q: %s", e.Plugin, e.Key, v, e.Rule)
	if e.Source != "" {
		msg += " (from " + e.Source + ")"
	}
	return msg
}

// Resolved is a plugin's configuration after resolution and validation.
type Resolved struct {
	Plugin string
	// Enabled is <PLUGIN>_ENABLED; when false the hook must not be started
	// and its ArchiveResult is skipped. A disabled plugin's other keys are
	// not resolved (their values may be invalid without failing the job).
	Enabled bool

	values        map[string]any
	origins       map[string]string
	pluginTimeout time.Duration
	globalTimeout time.Duration
	limits        Limits
}

// Value returns a resolved value (string, bool, int64, float64, []any or
// map[string]any) and whether the key has one.
func (r *Resolved) Value(key string) (any, bool) {
	v, ok := r.values[key]
	return v, ok
}

// Origin says where a key's value came from: "job:NAME", "env:NAME",
// "file:name", "fallback:KEY<-ORIGIN", "base:NAME" or "default" (NAME is
// the canonical name or the alias that matched). "" for an unresolved key.
func (r *Resolved) Origin(key string) string { return r.origins[key] }

// Keys returns the resolved keys in sorted order.
func (r *Resolved) Keys() []string {
	keys := make([]string, 0, len(r.values))
	for k := range r.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Env returns every resolved key as KEY=value, sorted by key: booleans
// True/False, integers without decimals, numbers in shortest form, arrays
// and objects as compact JSON. Keys without a value (no source and no
// default) are left out.
func (r *Resolved) Env() []string {
	keys := r.Keys()
	env := make([]string, len(keys))
	for i, k := range keys {
		env[i] = k + "=" + formatEnv(r.values[k])
	}
	return env
}

// Timeout is the plugin's <PLUGIN>_TIMEOUT in seconds when it resolved to a
// positive value, else TIMEOUT when positive, else fallback.
func (r *Resolved) Timeout(fallback time.Duration) time.Duration {
	switch {
	case r.pluginTimeout > 0:
		return r.pluginTimeout
	case r.globalTimeout > 0:
		return r.globalTimeout
	}
	return fallback
}

// PluginKey returns the env key prefix for plugin: upper-cased, every
// character other than A-Z and 0-9 replaced by '_' (parse-dom → PARSE_DOM).
func PluginKey(plugin string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(plugin) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// EnabledKey is the key that switches plugin on or off: <PLUGIN>_ENABLED.
func EnabledKey(plugin string) string { return PluginKey(plugin) + "_ENABLED" }

// TimeoutKey is the plugin's timeout key: <PLUGIN>_TIMEOUT.
func TimeoutKey(plugin string) string { return PluginKey(plugin) + "_TIMEOUT" }
