// Package hookenv owns what a hook's environment may contain (DESIGN.md §3
// Invocation, docs/hooks.md "Environment"): a fixed allowlist of the
// worker's variables that programs need to run (Allowed), the operator's
// additions (config hooks.pass_env, names or NAME* prefixes), the resolved
// plugin configuration and the runner's own keys, and, last of all, the
// removal of every entry that would reveal one of archiveflow's own
// secrets, whichever of those sources it came from. Hooks are third-party
// code: nothing else of the worker's environment reaches them.
package hookenv

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Allowed are the worker variables every hook gets when they are set:
// what a shell, Python, Node.js or Chromium needs to find programs, a home,
// a locale, a time zone and a temporary directory (XDG_* for the per-user
// directories Chromium and desktop libraries use), and ARCHIVEFLOW_BIN, the
// runner's own pointer to the built-in hooks' binary. Entries ending in *
// are prefixes.
var Allowed = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR", "XDG_*",
	"ARCHIVEFLOW_BIN",
}

// Secrets decides whether an entry would reveal a secret of archiveflow's
// own (config.Secrets is the production one).
type Secrets interface {
	Reveals(name, value string) bool
}

// CheckPattern validates one hooks.pass_env entry: an environment variable
// name, or a prefix of one followed by * (MY_*). A lone * is refused: it
// would hand hooks the whole worker environment.
func CheckPattern(p string) error {
	switch name, _ := strings.CutSuffix(p, "*"); {
	case p == "*":
		return fmt.Errorf("must not be * (that passes the whole worker environment): list the variables hooks need")
	case !validName(name):
		return fmt.Errorf("must be an environment variable name (letters, digits, _; not starting with a digit), optionally ending in * for a prefix")
	}
	return nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// match reports whether name matches one of patterns (exact, or prefix*).
func match(patterns []string, name string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if p == name {
			return true
		}
	}
	return false
}

// Worker is the part of the worker's environment (KEY=VALUE entries) a
// hook may get: the variables Allowed or passEnv names. Build takes the
// same from Sources.Worker; a caller that builds many environments from
// one worker environment may pass Worker's result instead.
func Worker(environ, passEnv []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && name != "" && (match(Allowed, name) || match(passEnv, name)) {
			out = append(out, kv)
		}
	}
	return out
}

// Sources are the parts of one hook's environment, each KEY=VALUE.
type Sources struct {
	Worker  []string // the worker's environment (os.Environ())
	PassEnv []string // hooks.pass_env patterns, checked by CheckPattern
	Plugin  []string // the resolved plugin configuration (hooks.Resolved.Env)
	Runner  []string // the runner's keys: SNAP_DIR, TIMEOUT, EXTRA_CONTEXT, ...
}

// Dropped is an entry left out because it would reveal a secret; only its
// name is kept, never its value.
type Dropped struct {
	Name   string
	Source string // "worker", "plugin config" or "runner"
}

// Build returns the environment of one hook: the worker's variables that
// Allowed or pass_env name, then the plugin configuration, then the
// runner's keys (a later entry replaces an earlier one of the same name),
// and finally without any entry secrets says reveals a secret. It also
// returns what it dropped for a secret. The result is sorted by name.
func Build(src Sources, secrets Secrets) ([]string, []Dropped) {
	type entry struct{ value, source string }
	env := map[string]entry{}
	for _, kv := range Worker(src.Worker, src.PassEnv) {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = entry{value, "worker"}
	}
	for _, part := range []struct {
		kvs    []string
		source string
	}{{src.Plugin, "plugin config"}, {src.Runner, "runner"}} {
		for _, kv := range part.kvs {
			if name, value, ok := strings.Cut(kv, "="); ok && name != "" {
				env[name] = entry{value, part.source}
			}
		}
	}
	out := make([]string, 0, len(env))
	var dropped []Dropped
	for _, name := range slices.Sorted(maps.Keys(env)) {
		e := env[name]
		if secrets != nil && secrets.Reveals(name, e.value) {
			dropped = append(dropped, Dropped{Name: name, Source: e.source})
			continue
		}
		out = append(out, name+"="+e.value)
	}
	return out, dropped
}
