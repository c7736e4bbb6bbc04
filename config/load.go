package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// EnvPrefix prefixes every environment variable archiveflow reads for its
// own configuration: redis.url is ARCHIVEFLOW_REDIS_URL.
const EnvPrefix = "ARCHIVEFLOW"

// DefaultFile is the config file looked for in the working directory when
// no file is named by --config or ARCHIVEFLOW_CONFIG.
const DefaultFile = "archiveflow.yaml"

// Options says where Load finds configuration beyond the defaults.
type Options struct {
	// File is an explicit config file path; it must exist. Empty means
	// ARCHIVEFLOW_CONFIG, else ./archiveflow.yaml when present.
	File string
	// Flags, when set, is a flag set on which BindFlags was called; flags
	// the user set override every other source.
	Flags *pflag.FlagSet
}

// flagKeys maps the flags BindFlags registers to their config keys.
var flagKeys = []struct{ flag, key, usage string }{
	{"archive-dir", "archive_dir", "directory that holds snapshots/IDENT/"},
	{"temporal-address", "temporal.host_port", "Temporal frontend host:port"},
	{"namespace", "temporal.namespace", "Temporal namespace"},
	{"redis-url", "redis.url", "Redis URL (redis:// or rediss://)"},
	{"redis-namespace", "redis.namespace", "prefix for every Redis key and channel"},
	{"plugins-dir", "plugins.dirs", "plugin root directory (repeatable; later roots override earlier)"},
	{"log-level", "log.level", "log level: debug, info, warn, error"},
	{"log-format", "log.format", "log format: console or json"},
}

// BindFlags registers the common configuration flags (and --config) on fs.
func BindFlags(fs *pflag.FlagSet) {
	d := Default()
	fs.String("config", "", "config file (default: $ARCHIVEFLOW_CONFIG or ./"+DefaultFile+" when present)")
	for _, f := range flagKeys {
		if f.key == "plugins.dirs" {
			fs.StringSlice(f.flag, d.Plugins.Dirs, f.usage)
			continue
		}
		fs.String(f.flag, fmt.Sprint(lookupDefault(d, f.key)), f.usage)
	}
}

// Load builds the configuration from defaults, the config file, ARCHIVEFLOW_*
// env vars and flags (in increasing precedence) and validates it.
func Load(opts Options) (*Config, error) {
	v := viper.New()
	for key, val := range flatten(Default()) {
		v.SetDefault(key, val)
	}
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()

	file, err := configFile(opts)
	if err != nil {
		return nil, err
	}
	if file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("config file %s: %w", file, err)
		}
	}
	if opts.Flags != nil {
		for _, f := range flagKeys {
			if fl := opts.Flags.Lookup(f.flag); fl != nil {
				if err := v.BindPFlag(f.key, fl); err != nil {
					return nil, fmt.Errorf("bind flag --%s: %w", f.flag, err)
				}
			}
		}
	}

	cfg := Default()
	err = v.Unmarshal(&cfg, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		jsonStringHook,
		mapstructure.StringToWeakSliceHookFunc(","),
		scalarStringHook,
		numberHook,
	)), func(dc *mapstructure.DecoderConfig) { dc.ErrorUnused = true })
	if err != nil {
		where := "environment or flags"
		if file != "" {
			where = file + ", environment or flags"
		}
		return nil, fmt.Errorf("config (%s): %w", where, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// configFile decides which config file to read, if any.
func configFile(opts Options) (string, error) {
	file := opts.File
	if file == "" && opts.Flags != nil {
		if f := opts.Flags.Lookup("config"); f != nil {
			file = f.Value.String()
		}
	}
	if file == "" {
		file = os.Getenv(EnvPrefix + "_CONFIG")
	}
	if file != "" {
		if _, err := os.Stat(file); err != nil {
			return "", fmt.Errorf("config file %s: %w", file, err)
		}
		return file, nil
	}
	if _, err := os.Stat(DefaultFile); err == nil {
		return DefaultFile, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("config file %s: %w", DefaultFile, err)
	}
	return "", nil
}

// jsonStringHook lets env vars and flags carry structured values as JSON,
// e.g. ARCHIVEFLOW_POOLS='[{"name":"fast","task_queue":"fast","slots":4}]'.
func jsonStringHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String {
		return data, nil
	}
	switch to.Kind() {
	case reflect.Slice, reflect.Map, reflect.Struct:
	default:
		return data, nil
	}
	trimmed := strings.TrimSpace(s)
	if trimmed == "" || (trimmed[0] != '[' && trimmed[0] != '{') {
		return data, nil
	}
	var out any
	if err := json.Unmarshal([]byte(trimmed), &out); err != nil {
		return nil, fmt.Errorf("value %q looks like JSON but does not parse: %w", s, err)
	}
	return out, nil
}

// scalarStringHook parses strings (from env vars, flags or quoted YAML) into
// durations and numbers with errors that quote the offending value.
func scalarStringHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String {
		return data, nil
	}
	s = strings.TrimSpace(s)
	if to == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration (use e.g. 500ms, 30s, 2h)", s)
		}
		return d, nil
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", s)
		}
		return n, nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return f, nil
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a boolean (use true or false)", s)
		}
		return b, nil
	}
	return data, nil
}

// numberHook refuses YAML numbers that would otherwise be converted
// silently: a fraction for an integer key (mapstructure truncates 2.5 to 2)
// and a bare non-zero number for a duration (30 would mean 30ns).
func numberHook(from, to reflect.Type, data any) (any, error) {
	if from == reflect.TypeOf(time.Duration(0)) {
		return data, nil // a default, already typed
	}
	var f float64
	switch v := reflect.ValueOf(data); from.Kind() {
	case reflect.Float32, reflect.Float64:
		f = v.Float()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f = float64(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f = float64(v.Uint())
	default:
		return data, nil
	}
	if to == reflect.TypeOf(time.Duration(0)) {
		if f != 0 {
			return nil, fmt.Errorf("%v is a bare number, not a duration (write the unit, e.g. %vs or %vms)", data, data, data)
		}
		return time.Duration(0), nil
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("%v is not an integer", data)
		}
	}
	return data, nil
}

// flatten turns a Config into viper keys (dotted mapstructure names) and
// leaf values, so every key is known to viper and can come from env vars.
func flatten(c Config) map[string]any {
	out := map[string]any{}
	flattenValue("", reflect.ValueOf(c), out)
	return out
}

func flattenValue(prefix string, v reflect.Value, out map[string]any) {
	if v.Kind() != reflect.Struct {
		out[prefix] = v.Interface()
		return
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "squash" {
			flattenValue(prefix, v.Field(i), out)
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		flattenValue(key, v.Field(i), out)
	}
}

// lookupDefault returns the default value of a dotted key.
func lookupDefault(c Config, key string) any {
	return flatten(c)[key]
}
