package hooks

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Sources are the places a config value may come from, highest priority
// first: Job, Env, File. Base holds values the runner provides (SNAP_DIR,
// ARCHIVE_DIR, TIMEOUT, ...): they feed {KEY} templates and the keys a
// schema declares under the same name, after File and before default, and
// they never count as "explicitly set" for x-fallback.
type Sources struct {
	Job  map[string]string // job-level overrides
	Env  map[string]string // the worker's process environment
	File map[string]any    // the archiveflow config file; keys match case-insensitively
	Base map[string]string // runner-provided values
}

// Origins of a resolved value, as reported by Resolved.Origin.
const (
	originJob      = "job"
	originEnv      = "env"
	originFile     = "file"
	originFallback = "fallback"
	originBase     = "base"
	originDefault  = "default"
)

// globalTimeoutKey is the timeout every plugin falls back to.
const globalTimeoutKey = "TIMEOUT"

// Resolve resolves and validates every declared key, <PLUGIN>_ENABLED and
// the timeout.
//
// Per key, the first of: the job override, the process env, the config
// file (each by canonical name, then each x-aliases entry in order), the
// x-fallback key when it is explicitly set in one of those places
// (recursively through its own x-fallback, never through a default), a
// Base value of the same name, the default (string defaults expand {KEY}
// references). Every error is a *ConfigError.
func (s *Schema) Resolve(src Sources) (*Resolved, error) {
	r := newResolver(s, src)
	out := &Resolved{Plugin: s.Plugin, values: r.values, origins: r.origins}
	enabled, err := r.enabled()
	if err != nil {
		return nil, err
	}
	out.Enabled = enabled
	if !enabled {
		return out, nil
	}
	for _, key := range s.keys {
		if _, err := r.resolve(key); err != nil {
			return nil, err
		}
	}
	if out.pluginTimeout, err = r.timeout(TimeoutKey(s.Plugin)); err != nil {
		return nil, err
	}
	if out.globalTimeout, err = r.timeout(globalTimeoutKey); err != nil {
		return nil, err
	}
	if out.limits, err = r.limits(); err != nil {
		return nil, err
	}
	return out, nil
}

// resolver holds the state of one Resolve call.
type resolver struct {
	s       *Schema
	src     Sources
	file    map[string]any // File with lower-cased keys
	values  map[string]any
	origins map[string]string
	done    map[string]bool
	active  []string // keys being resolved, for template cycle detection
}

func newResolver(s *Schema, src Sources) *resolver {
	r := &resolver{
		s: s, src: src,
		file:    make(map[string]any, len(src.File)),
		values:  map[string]any{},
		origins: map[string]string{},
		done:    map[string]bool{},
	}
	keys := make([]string, 0, len(src.File))
	for k := range src.File {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic winner if two keys differ only in case
	for _, k := range keys {
		lk := strings.ToLower(k)
		if _, dup := r.file[lk]; !dup {
			r.file[lk] = src.File[k]
		}
	}
	return r
}

func (r *resolver) fail(key string, value any, rule, origin string) *ConfigError {
	return &ConfigError{Plugin: r.s.Plugin, Key: key, Value: valueText(value), Rule: rule, Source: origin}
}

func valueText(v any) string {
	if v == nil {
		return ""
	}
	return formatEnv(v)
}

// enabled resolves <PLUGIN>_ENABLED (declared or not; default true).
func (r *resolver) enabled() (bool, error) {
	key := EnabledKey(r.s.Plugin)
	if _, declared := r.s.Properties[key]; !declared {
		raw, origin, found, err := r.explicit(key, nil, nil)
		if err != nil {
			return false, err
		}
		if !found {
			r.set(key, true, originDefault)
			return true, nil
		}
		v, err := coerce(TypeBoolean, raw)
		if err != nil {
			return false, r.fail(key, raw, ruleBoolean, origin)
		}
		r.set(key, v, origin)
		return v.(bool), nil
	}
	v, err := r.resolve(key)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, r.fail(key, v, ruleBoolean+" (type of "+key+" must be boolean)", r.origins[key])
	}
	return b, nil
}

func (r *resolver) set(key string, v any, origin string) {
	r.values[key] = v
	r.origins[key] = origin
	r.done[key] = true
}

// resolve resolves a declared key through the whole chain and validates it.
// A key without any value returns (nil, nil) and is left out.
func (r *resolver) resolve(key string) (any, error) {
	if r.done[key] {
		return r.values[key], nil
	}
	for i, k := range r.active {
		if k == key {
			cycle := append(append([]string(nil), r.active[i:]...), key)
			p := r.s.Properties[key]
			return nil, r.fail(key, p.Default, "default template cycle "+strings.Join(cycle, " -> "), originDefault)
		}
	}
	r.active = append(r.active, key)
	defer func() { r.active = r.active[:len(r.active)-1] }()

	p := r.s.Properties[key]
	raw, origin, found, err := r.explicit(key, p, nil)
	if err != nil {
		return nil, err
	}
	if !found {
		if b, ok := r.src.Base[key]; ok {
			raw, origin, found = b, originBase+":"+key, true
		}
	}
	var v any
	switch {
	case found:
		if v, err = coerce(p.Type, raw); err != nil {
			return nil, r.fail(key, raw, typeRule(p.Type), origin)
		}
	case p.HasDefault:
		origin = originDefault
		if v, err = r.expandDefault(p); err != nil {
			return nil, err
		}
	default:
		r.done[key] = true
		return nil, nil
	}
	if err := r.validate(p, v, origin); err != nil {
		return nil, err
	}
	r.set(key, v, origin)
	return v, nil
}

// explicit looks key up where a user sets values explicitly: Job, Env and
// File (by canonical name, then by alias), then its x-fallback key,
// recursively. p may be nil for an undeclared key. chain holds the keys
// that fell back to this one, to stop x-fallback cycles.
func (r *resolver) explicit(key string, p *Property, chain []string) (any, string, bool, error) {
	names := []string{key}
	if p != nil {
		names = append(names, p.Aliases...)
	}
	for _, name := range names {
		if v, ok := r.src.Job[name]; ok {
			return v, originJob + ":" + name, true, nil
		}
	}
	for _, name := range names {
		if v, ok := r.src.Env[name]; ok {
			return v, originEnv + ":" + name, true, nil
		}
	}
	for _, name := range names {
		if v, ok := r.file[strings.ToLower(name)]; ok && v != nil {
			return v, originFile + ":" + strings.ToLower(name), true, nil
		}
	}
	if p == nil || p.Fallback == "" {
		return nil, "", false, nil
	}
	chain = append(chain, key)
	for _, k := range chain {
		if k == p.Fallback {
			return nil, "", false, r.fail(chain[0], nil, "x-fallback cycle "+strings.Join(append(chain, p.Fallback), " -> "), "")
		}
	}
	v, origin, found, err := r.explicit(p.Fallback, r.s.Properties[p.Fallback], chain)
	if err != nil || !found {
		return nil, "", false, err
	}
	return v, originFallback + ":" + p.Fallback + "<-" + origin, true, nil
}

// maxExpandedDefault caps a default after template expansion, so nested
// references cannot grow a value exponentially.
const maxExpandedDefault = 1 << 20

// templateRef matches a {KEY} reference in a string default.
var templateRef = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandDefault returns p's default with {KEY} references expanded when
// it is a string.
func (r *resolver) expandDefault(p *Property) (any, error) {
	s, ok := p.Default.(string)
	if !ok || !strings.Contains(s, "{") {
		return p.Default, nil
	}
	var firstErr error
	size := len(s)
	out := templateRef.ReplaceAllStringFunc(s, func(m string) string {
		if firstErr != nil {
			return m
		}
		v, err := r.reference(p.Key, m[1:len(m)-1])
		if err != nil {
			firstErr = err
			return m
		}
		if size += len(v) - len(m); size > maxExpandedDefault {
			firstErr = r.fail(p.Key, s, fmt.Sprintf("default expands to more than %d bytes", maxExpandedDefault), originDefault)
		}
		return v
	})
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// reference resolves the {ref} used in key's default: a declared key
// (fully resolved), else an explicit value or a Base value of that name.
func (r *resolver) reference(key, ref string) (string, error) {
	if _, declared := r.s.Properties[ref]; declared {
		v, err := r.resolve(ref)
		if err != nil {
			return "", err
		}
		if v == nil {
			return "", r.fail(key, r.s.Properties[key].Default, "default references {"+ref+"}, which has no value", originDefault)
		}
		return formatEnv(v), nil
	}
	raw, _, found, err := r.explicit(ref, nil, nil)
	if err != nil {
		return "", err
	}
	if found {
		return valueText(raw), nil
	}
	if b, ok := r.src.Base[ref]; ok {
		return b, nil
	}
	return "", r.fail(key, r.s.Properties[key].Default, "default references unknown key {"+ref+"}: not declared in config.json and not set in the job, env, config file or runner values", originDefault)
}

// validate checks enum, minimum/maximum and pattern.
func (r *resolver) validate(p *Property, v any, origin string) error {
	if len(p.Enum) > 0 {
		member := false
		for _, e := range p.Enum {
			if equalValue(v, e) {
				member = true
				break
			}
		}
		if !member {
			items := make([]string, len(p.Enum))
			for i, e := range p.Enum {
				items[i] = compactJSON(e)
			}
			return r.fail(p.Key, v, "must be one of ["+strings.Join(items, ", ")+"]", origin)
		}
	}
	if f, ok := asFloat(v); ok {
		if p.Minimum != nil && f < *p.Minimum {
			return r.fail(p.Key, v, "must be >= "+formatFloat(*p.Minimum), origin)
		}
		if p.Maximum != nil && f > *p.Maximum {
			return r.fail(p.Key, v, "must be <= "+formatFloat(*p.Maximum), origin)
		}
	}
	if s, ok := v.(string); ok && p.re != nil && !p.re.MatchString(s) {
		return r.fail(p.Key, v, "must match pattern "+p.Pattern, origin)
	}
	return nil
}

// timeout resolves a timeout key in seconds: its declared value, else an
// explicit or Base value. 0 means unset.
func (r *resolver) timeout(key string) (time.Duration, error) {
	var raw any
	var origin string
	if _, declared := r.s.Properties[key]; declared {
		raw, origin = r.values[key], r.origins[key]
	} else {
		v, o, found, err := r.explicit(key, nil, nil)
		if err != nil {
			return 0, err
		}
		switch {
		case found:
			raw, origin = v, o
		default:
			if b, ok := r.src.Base[key]; ok {
				raw, origin = b, originBase+":"+key
			}
		}
	}
	if raw == nil {
		return 0, nil
	}
	n, err := coerce(TypeNumber, raw)
	if err != nil {
		return 0, r.fail(key, raw, "must be a number of seconds", origin)
	}
	secs := n.(float64)
	if secs < 0 {
		return 0, r.fail(key, raw, "must be >= 0 seconds", origin)
	}
	if secs > maxSeconds {
		return 0, r.fail(key, raw, "must be at most "+formatFloat(maxSeconds)+" seconds", origin)
	}
	return time.Duration(secs * float64(time.Second)), nil
}
