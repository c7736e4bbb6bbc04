package hooks

import (
	"math"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/bytesize"
)

// Limits are a plugin's resource limits as resolved from its limit keys.
// A nil field is not set, so the worker's default (hooks.limits) applies;
// 0 means no limit for this plugin.
type Limits struct {
	Memory    *int64         // <PLUGIN>_MAX_MEMORY, in bytes
	CPUTime   *time.Duration // <PLUGIN>_MAX_CPU_SECONDS
	OpenFiles *int64         // <PLUGIN>_MAX_OPEN_FILES
	Processes *int64         // <PLUGIN>_MAX_PROCESSES
}

// MaxMemoryKey is <PLUGIN>_MAX_MEMORY: bytes, or a size with a unit (512MiB).
func MaxMemoryKey(plugin string) string { return PluginKey(plugin) + "_MAX_MEMORY" }

// MaxCPUSecondsKey is <PLUGIN>_MAX_CPU_SECONDS: CPU time per process.
func MaxCPUSecondsKey(plugin string) string { return PluginKey(plugin) + "_MAX_CPU_SECONDS" }

// MaxOpenFilesKey is <PLUGIN>_MAX_OPEN_FILES: open files per process.
func MaxOpenFilesKey(plugin string) string { return PluginKey(plugin) + "_MAX_OPEN_FILES" }

// MaxProcessesKey is <PLUGIN>_MAX_PROCESSES: processes of the hook.
func MaxProcessesKey(plugin string) string { return PluginKey(plugin) + "_MAX_PROCESSES" }

// Limits returns the plugin's resolved limit keys.
func (r *Resolved) Limits() Limits { return r.limits }

// limits resolves the limit keys. They protect the worker's host, so only
// the operator sets them: the process environment, the config file, then
// the default a config.json declares; never a job override, x-fallback or
// a runner value.
func (r *resolver) limits() (Limits, error) {
	var l Limits
	plugin := r.s.Plugin
	if raw, origin, ok := r.operatorValue(MaxMemoryKey(plugin)); ok {
		n, err := r.size(MaxMemoryKey(plugin), raw, origin)
		if err != nil {
			return Limits{}, err
		}
		l.Memory = &n
	}
	if raw, origin, ok := r.operatorValue(MaxCPUSecondsKey(plugin)); ok {
		key := MaxCPUSecondsKey(plugin)
		v, err := coerce(TypeNumber, raw)
		if err != nil || v.(float64) < 0 || v.(float64) > maxSeconds {
			return Limits{}, r.fail(key, raw, "must be a number of seconds from 0 (no limit) to "+formatFloat(maxSeconds), origin)
		}
		d := time.Duration(v.(float64) * float64(time.Second))
		l.CPUTime = &d
	}
	for _, c := range []struct {
		key string
		dst **int64
	}{{MaxOpenFilesKey(plugin), &l.OpenFiles}, {MaxProcessesKey(plugin), &l.Processes}} {
		if raw, origin, ok := r.operatorValue(c.key); ok {
			v, err := coerce(TypeInteger, raw)
			if err != nil || v.(int64) < 0 {
				return Limits{}, r.fail(c.key, raw, "must be an integer >= 0 (0 = no limit)", origin)
			}
			n := v.(int64)
			*c.dst = &n
		}
	}
	return l, nil
}

// maxSeconds is the largest number of seconds a time.Duration holds.
const maxSeconds = float64(math.MaxInt64) / float64(time.Second)

// operatorValue looks key up in the process environment, the config file
// and the declared default, in that order.
func (r *resolver) operatorValue(key string) (any, string, bool) {
	if v, ok := r.src.Env[key]; ok {
		return v, originEnv + ":" + key, true
	}
	if v, ok := r.file[strings.ToLower(key)]; ok && v != nil {
		return v, originFile + ":" + strings.ToLower(key), true
	}
	if p, ok := r.s.Properties[key]; ok && p.HasDefault && p.Default != nil {
		return p.Default, originDefault, true
	}
	return nil, "", false
}

// size reads a byte size: an integer number of bytes, or text with a unit.
func (r *resolver) size(key string, raw any, origin string) (int64, error) {
	const rule = "must be a size in bytes >= 0 (0 = no limit), with an optional unit: 512MiB, 2GiB, 500MB"
	if s, ok := raw.(string); ok {
		n, err := bytesize.Parse(s)
		if err != nil {
			return 0, r.fail(key, raw, rule+" ("+err.Error()+")", origin)
		}
		return n, nil
	}
	v, err := coerce(TypeInteger, raw)
	if err != nil || v.(int64) < 0 {
		return 0, r.fail(key, raw, rule, origin)
	}
	return v.(int64), nil
}
