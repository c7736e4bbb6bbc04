package hooks

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wgetConfig is shaped like abx-plugins' wget/config.json.
const wgetConfig = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "wget",
  "type": "object",
  "additionalProperties": false,
  "required_binaries": [{"name": "{WGET_BINARY}", "binproviders": "env,apt,brew", "min_version": null}],
  "properties": {
    "WGET_ENABLED": {"type": "boolean", "default": true, "x-aliases": ["SAVE_WGET", "USE_WGET"], "description": "Enable wget archiving"},
    "WGET_TIMEOUT": {"type": "integer", "default": 60, "minimum": 5, "x-fallback": "TIMEOUT"},
    "WGET_USER_AGENT": {"type": "string", "default": "", "x-fallback": "USER_AGENT"},
    "WGET_ARGS": {"type": "array", "items": {"type": "string"}, "default": ["--no-verbose", "-e", "robots=off"], "x-aliases": ["WGET_DEFAULT_ARGS"]},
    "WGET_ARGS_EXTRA": {"type": "array", "items": {"type": "string"}, "default": [], "x-aliases": ["WGET_EXTRA_ARGS"]},
    "WGET_OUT": {"type": "string", "default": "{SNAP_DIR}/wget"}
  },
  "category": "main"
}`

func mustSchema(t testing.TB, plugin, doc string) *Schema {
	t.Helper()
	s, err := ParseSchema([]byte(doc), plugin+"/config.json", plugin)
	require.NoError(t, err)
	return s
}

// schemaOf builds a one-key schema for plugin "p".
func schemaOf(t testing.TB, key, prop string) *Schema {
	return mustSchema(t, "p", fmt.Sprintf(`{"properties":{%q:%s}}`, key, prop))
}

func requireConfigError(t *testing.T, err error, key, value, rule string) *ConfigError {
	t.Helper()
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, key, ce.Key)
	assert.Equal(t, value, ce.Value)
	assert.Contains(t, ce.Rule, rule)
	for _, part := range []string{ce.Plugin, key, rule} {
		assert.Contains(t, ce.Error(), part)
	}
	assert.ErrorAs(t, fmt.Errorf("wrapped: %w", err), &ce)
	return ce
}

func TestResolveTypes(t *testing.T) {
	tests := []struct {
		typ  string
		in   string
		want any
		env  string
	}{
		{"string", "hello world", "hello world", "hello world"},
		{"string", "", "", ""},
		{"boolean", "true", true, "True"},
		{"boolean", "TRUE", true, "True"},
		{"boolean", "1", true, "True"},
		{"boolean", "Yes", true, "True"},
		{"boolean", "on", true, "True"},
		{"boolean", "false", false, "False"},
		{"boolean", "0", false, "False"},
		{"boolean", "NO", false, "False"},
		{"boolean", "off", false, "False"},
		{"boolean", " False ", false, "False"},
		{"integer", "42", int64(42), "42"},
		{"integer", " -7 ", int64(-7), "-7"},
		{"integer", "60.0", int64(60), "60"},
		{"integer", "1e3", int64(1000), "1000"},
		{"number", "0.5", 0.5, "0.5"},
		{"number", "2", 2.0, "2"},
		{"number", "1e21", 1e21, "1e+21"},
		{"number", "0.1", 0.1, "0.1"},
		{"array", `["a","b c"]`, []any{"a", "b c"}, `["a","b c"]`},
		{"array", `[1, true, {"k": null}]`, nil, `[1,true,{"k":null}]`},
		{"array", "--a, --b ,--c", []any{"--a", "--b", "--c"}, `["--a","--b","--c"]`},
		{"array", "single", []any{"single"}, `["single"]`},
		{"array", "", []any{}, `[]`},
		{"array", `["<html>&"]`, []any{"<html>&"}, `["<html>&"]`},
		{"object", `{"b": 1, "a": [2]}`, nil, `{"a":[2],"b":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.in, func(t *testing.T) {
			s := schemaOf(t, "K", fmt.Sprintf(`{"type":%q}`, tt.typ))
			res, err := s.Resolve(Sources{Env: map[string]string{"K": tt.in}})
			require.NoError(t, err)
			if tt.want != nil {
				v, ok := res.Value("K")
				require.True(t, ok)
				assert.Equal(t, tt.want, v)
			}
			assert.Contains(t, res.Env(), "K="+tt.env)
		})
	}
}

func TestResolveTypeErrors(t *testing.T) {
	tests := []struct {
		typ, in, rule string
	}{
		{"boolean", "maybe", "must be a boolean"},
		{"boolean", "", "must be a boolean"},
		{"integer", "sixty", "must be an integer"},
		{"integer", "1.5", "must be an integer"},
		{"integer", "", "must be an integer"},
		{"integer", "99999999999999999999", "must be an integer"},
		{"number", "NaN", "must be a finite number"},
		{"number", "Inf", "must be a finite number"},
		{"number", "1,5", "must be a finite number"},
		{"array", `["unterminated`, "must be a JSON array"},
		{"array", `[1] [2]`, "must be a JSON array"},
		{"object", `[1]`, "must be a JSON object"},
		{"object", `k=v`, "must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.in, func(t *testing.T) {
			s := schemaOf(t, "K", fmt.Sprintf(`{"type":%q}`, tt.typ))
			_, err := s.Resolve(Sources{Job: map[string]string{"K": tt.in}})
			ce := requireConfigError(t, err, "K", tt.in, tt.rule)
			assert.Equal(t, "p", ce.Plugin)
			assert.Equal(t, "job:K", ce.Source)
		})
	}
}

func TestResolveValidation(t *testing.T) {
	tests := []struct {
		name, prop, value, rule string
	}{
		{"enum", `{"type":"string","enum":["load","networkidle0"]}`, "idle", `must be one of ["load", "networkidle0"]`},
		{"integer enum", `{"type":"integer","enum":[1,2]}`, "3", "must be one of [1, 2]"},
		{"minimum", `{"type":"integer","minimum":5}`, "4", "must be >= 5"},
		{"maximum", `{"type":"number","maximum":1.5}`, "1.6", "must be <= 1.5"},
		{"pattern", `{"type":"string","pattern":"^\\d+,\\d+$"}`, "1440x2000", `must match pattern ^\d+,\d+$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := schemaOf(t, "K", tt.prop)
			_, err := s.Resolve(Sources{Env: map[string]string{"K": tt.value}})
			requireConfigError(t, err, "K", tt.value, tt.rule)
		})
	}

	valid := []struct {
		name, prop, value string
	}{
		{"enum member", `{"type":"string","enum":["load","networkidle0"]}`, "load"},
		{"integer enum member given as float text", `{"type":"integer","enum":[1,2]}`, "2.0"},
		{"minimum inclusive", `{"type":"integer","minimum":5}`, "5"},
		{"maximum inclusive", `{"type":"number","maximum":1.5}`, "1.5"},
		{"pattern is a search, not anchored", `{"type":"string","pattern":"\\d"}`, "abc1"},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			_, err := schemaOf(t, "K", tt.prop).Resolve(Sources{Env: map[string]string{"K": tt.value}})
			assert.NoError(t, err)
		})
	}

	t.Run("a default that breaks its own rule is caught after resolution", func(t *testing.T) {
		_, err := schemaOf(t, "K", `{"type":"integer","default":1,"minimum":5}`).Resolve(Sources{})
		ce := requireConfigError(t, err, "K", "1", "must be >= 5")
		assert.Equal(t, "default", ce.Source)
	})
}

func TestResolvePrecedence(t *testing.T) {
	s := mustSchema(t, "wget", `{"properties":{"WGET_ARGS":{"type":"string","default":"dflt","x-aliases":["ALIAS_ONE","ALIAS_TWO"]}}}`)
	tests := []struct {
		name   string
		src    Sources
		want   string
		origin string
	}{
		{"default", Sources{}, "dflt", "default"},
		{"file by canonical name, case-insensitive", Sources{File: map[string]any{"wget_args": "file"}}, "file", "file:wget_args"},
		{"file by alias", Sources{File: map[string]any{"Alias_Two": "file2"}}, "file2", "file:alias_two"},
		{"env beats file", Sources{Env: map[string]string{"WGET_ARGS": "env"}, File: map[string]any{"wget_args": "file"}}, "env", "env:WGET_ARGS"},
		{"env alias beats file", Sources{Env: map[string]string{"ALIAS_TWO": "env2"}, File: map[string]any{"wget_args": "file"}}, "env2", "env:ALIAS_TWO"},
		{"canonical beats alias", Sources{Env: map[string]string{"WGET_ARGS": "canon", "ALIAS_ONE": "a1"}}, "canon", "env:WGET_ARGS"},
		{"first alias beats second", Sources{Env: map[string]string{"ALIAS_TWO": "a2", "ALIAS_ONE": "a1"}}, "a1", "env:ALIAS_ONE"},
		{"job beats env", Sources{Job: map[string]string{"WGET_ARGS": "job"}, Env: map[string]string{"WGET_ARGS": "env"}}, "job", "job:WGET_ARGS"},
		{"job alias beats env canonical", Sources{Job: map[string]string{"ALIAS_TWO": "job2"}, Env: map[string]string{"WGET_ARGS": "env"}}, "job2", "job:ALIAS_TWO"},
		{"base is used before the default", Sources{Base: map[string]string{"WGET_ARGS": "base"}}, "base", "base:WGET_ARGS"},
		{"file beats base", Sources{File: map[string]any{"WGET_ARGS": "file"}, Base: map[string]string{"WGET_ARGS": "base"}}, "file", "file:wget_args"},
		{"null in the file is unset", Sources{File: map[string]any{"wget_args": nil}}, "dflt", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Resolve(tt.src)
			require.NoError(t, err)
			v, _ := res.Value("WGET_ARGS")
			assert.Equal(t, tt.want, v)
			assert.Equal(t, tt.origin, res.Origin("WGET_ARGS"))
		})
	}
}

func TestResolveFallbackOnlyWhenExplicit(t *testing.T) {
	const doc = `{"properties":{
		"CHROME_TIMEOUT": {"type":"integer","default":60,"minimum":5,"x-fallback":"TIMEOUT"},
		"CHROME_PAGELOAD_TIMEOUT": {"type":"integer","default":45,"x-fallback":"CHROME_TIMEOUT"},
		"CHROME_USER_AGENT": {"type":"string","default":"","x-fallback":"USER_AGENT"},
		"USER_AGENT": {"type":"string","default":"Mozilla/5.0 (default)","x-aliases":["UA"]}
	}}`
	s := mustSchema(t, "chrome", doc)
	tests := []struct {
		name                     string
		src                      Sources
		timeout, pageload, agent any
		pageloadOrigin           string
	}{
		{
			name:    "nothing explicit: own defaults, never the fallback key's default",
			src:     Sources{},
			timeout: int64(60), pageload: int64(45), agent: "", pageloadOrigin: "default",
		},
		{
			name:    "base values are not explicit",
			src:     Sources{Base: map[string]string{"TIMEOUT": "30"}},
			timeout: int64(60), pageload: int64(45), agent: "", pageloadOrigin: "default",
		},
		{
			name:    "fallback key set in env",
			src:     Sources{Env: map[string]string{"TIMEOUT": "120"}},
			timeout: int64(120), pageload: int64(120), agent: "", pageloadOrigin: "fallback:CHROME_TIMEOUT<-fallback:TIMEOUT<-env:TIMEOUT",
		},
		{
			name:    "fallback chain stops at the first explicit key",
			src:     Sources{File: map[string]any{"chrome_timeout": 90}, Env: map[string]string{"TIMEOUT": "120"}},
			timeout: int64(90), pageload: int64(90), agent: "", pageloadOrigin: "fallback:CHROME_TIMEOUT<-file:chrome_timeout",
		},
		{
			name:    "own explicit value beats the fallback",
			src:     Sources{Job: map[string]string{"CHROME_PAGELOAD_TIMEOUT": "10"}, Env: map[string]string{"TIMEOUT": "120"}},
			timeout: int64(120), pageload: int64(10), agent: "", pageloadOrigin: "job:CHROME_PAGELOAD_TIMEOUT",
		},
		{
			name:    "fallback through the fallback key's alias",
			src:     Sources{Env: map[string]string{"UA": "Bot/1"}},
			timeout: int64(60), pageload: int64(45), agent: "Bot/1", pageloadOrigin: "default",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Resolve(tt.src)
			require.NoError(t, err)
			for key, want := range map[string]any{"CHROME_TIMEOUT": tt.timeout, "CHROME_PAGELOAD_TIMEOUT": tt.pageload, "CHROME_USER_AGENT": tt.agent} {
				v, _ := res.Value(key)
				assert.Equal(t, want, v, key)
			}
			assert.Equal(t, tt.pageloadOrigin, res.Origin("CHROME_PAGELOAD_TIMEOUT"))
		})
	}

	t.Run("fallback value is validated against the key's own rules", func(t *testing.T) {
		_, err := s.Resolve(Sources{Env: map[string]string{"TIMEOUT": "2"}})
		requireConfigError(t, err, "CHROME_TIMEOUT", "2", "must be >= 5")
		_, err = s.Resolve(Sources{Env: map[string]string{"TIMEOUT": "soon"}})
		requireConfigError(t, err, "CHROME_PAGELOAD_TIMEOUT", "soon", "must be an integer")
	})

	t.Run("fallback cycle", func(t *testing.T) {
		cyc := mustSchema(t, "p", `{"properties":{"A":{"x-fallback":"B"},"B":{"x-fallback":"A"}}}`)
		_, err := cyc.Resolve(Sources{})
		requireConfigError(t, err, "A", "", "x-fallback cycle A -> B -> A")
	})
}

func TestResolveTemplates(t *testing.T) {
	t.Run("references schema keys, base values and explicit values", func(t *testing.T) {
		s := mustSchema(t, "chrome", `{"properties":{
			"CHROME_USER_DATA_DIR": {"type":"string","default":"{PERSONAS_DIR}/{ACTIVE_PERSONA}/chrome_profile"},
			"PERSONAS_DIR": {"type":"string","default":"{DATA_DIR}/personas"},
			"ACTIVE_PERSONA": {"type":"string","default":"Default"},
			"CHROME_EXTENSIONS_DIR": {"type":"string","default":"{LIB_DIR}/chromewebstore/extensions"},
			"LITERAL": {"type":"string","default":"{0} {not a ref} \\d{3} {} {{x"}
		}}`)
		res, err := s.Resolve(Sources{
			Job:  map[string]string{"ACTIVE_PERSONA": "Work"},
			Env:  map[string]string{"LIB_DIR": "/lib/abx"},
			Base: map[string]string{"DATA_DIR": "/data", "LIB_DIR": "/base/lib"},
		})
		require.NoError(t, err)
		v, _ := res.Value("CHROME_USER_DATA_DIR")
		assert.Equal(t, "/data/personas/Work/chrome_profile", v)
		v, _ = res.Value("CHROME_EXTENSIONS_DIR")
		assert.Equal(t, "/lib/abx/chromewebstore/extensions", v, "explicit env beats base for undeclared references")
		assert.NotContains(t, res.Keys(), "LIB_DIR", "undeclared references are not exported")
		_, err = s.Resolve(Sources{Base: map[string]string{"DATA_DIR": "/d"}})
		requireConfigError(t, err, "CHROME_EXTENSIONS_DIR", "{LIB_DIR}/chromewebstore/extensions", "unknown key {LIB_DIR}")
		res, err = s.Resolve(Sources{Base: map[string]string{"DATA_DIR": "/d", "LIB_DIR": "/l"}})
		require.NoError(t, err)
		v, _ = res.Value("LITERAL")
		assert.Equal(t, "{0} {not a ref} \\d{3} {} {{x", v, "only {IDENTIFIER} is a reference")
	})

	t.Run("unknown reference", func(t *testing.T) {
		_, err := schemaOf(t, "K", `{"default":"a{b}c"}`).Resolve(Sources{})
		requireConfigError(t, err, "K", "a{b}c", "unknown key {b}")
	})

	t.Run("explicit values are not expanded", func(t *testing.T) {
		s := schemaOf(t, "K", `{"type":"string","default":"{SNAP_DIR}/x"}`)
		res, err := s.Resolve(Sources{Env: map[string]string{"K": "{SNAP_DIR}"}, Base: map[string]string{"SNAP_DIR": "/s"}})
		require.NoError(t, err)
		v, _ := res.Value("K")
		assert.Equal(t, "{SNAP_DIR}", v)
	})

	t.Run("cycle", func(t *testing.T) {
		s := mustSchema(t, "p", `{"properties":{"A":{"default":"{B}"},"B":{"default":"x{C}"},"C":{"default":"{A}"}}}`)
		_, err := s.Resolve(Sources{})
		ce := requireConfigError(t, err, "A", "{B}", "default template cycle A -> B -> C -> A")
		assert.Equal(t, "p", ce.Plugin)
	})

	t.Run("self reference", func(t *testing.T) {
		_, err := schemaOf(t, "A", `{"default":"{A}"}`).Resolve(Sources{})
		requireConfigError(t, err, "A", "{A}", "cycle A -> A")
	})

	t.Run("reference to a key without value", func(t *testing.T) {
		s := mustSchema(t, "p", `{"properties":{"A":{"default":"{B}"},"B":{"type":"string"}}}`)
		_, err := s.Resolve(Sources{})
		requireConfigError(t, err, "A", "{B}", "{B}, which has no value")
	})

	t.Run("non-string references render like the env", func(t *testing.T) {
		s := mustSchema(t, "p", `{"properties":{"A":{"default":"{B}|{C}|{D}"},"B":{"type":"boolean","default":false},"C":{"type":"integer","default":3},"D":{"type":"array","default":["x"]}}}`)
		res, err := s.Resolve(Sources{})
		require.NoError(t, err)
		v, _ := res.Value("A")
		assert.Equal(t, `False|3|["x"]`, v)
	})
}

func TestResolveEnabled(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		src     Sources
		enabled bool
		origin  string
	}{
		{"undeclared defaults to true", `{}`, Sources{}, true, "default"},
		{"undeclared set false in env", `{}`, Sources{Env: map[string]string{"PARSE_DOM_ENABLED": "false"}}, false, "env:PARSE_DOM_ENABLED"},
		{"undeclared set off in the file", `{}`, Sources{File: map[string]any{"parse_dom_enabled": false}}, false, "file:parse_dom_enabled"},
		{"declared default false", `{"properties":{"PARSE_DOM_ENABLED":{"type":"boolean","default":false}}}`, Sources{}, false, "default"},
		{"declared alias", `{"properties":{"PARSE_DOM_ENABLED":{"type":"boolean","default":true,"x-aliases":["SAVE_DOM"]}}}`, Sources{Env: map[string]string{"SAVE_DOM": "no"}}, false, "env:SAVE_DOM"},
		{"job override beats env", `{}`, Sources{Job: map[string]string{"PARSE_DOM_ENABLED": "1"}, Env: map[string]string{"PARSE_DOM_ENABLED": "0"}}, true, "job:PARSE_DOM_ENABLED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSchema(t, "parse-dom", tt.doc)
			res, err := s.Resolve(tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.enabled, res.Enabled)
			assert.Equal(t, tt.origin, res.Origin("PARSE_DOM_ENABLED"))
			want := "PARSE_DOM_ENABLED=True"
			if !tt.enabled {
				want = "PARSE_DOM_ENABLED=False"
			}
			assert.Contains(t, res.Env(), want)
		})
	}

	t.Run("a disabled plugin's invalid values do not fail", func(t *testing.T) {
		s := mustSchema(t, "wget", wgetConfig)
		res, err := s.Resolve(Sources{Env: map[string]string{"SAVE_WGET": "False", "WGET_TIMEOUT": "1"}})
		require.NoError(t, err)
		assert.False(t, res.Enabled)
		assert.Equal(t, []string{"WGET_ENABLED=False"}, res.Env())
	})

	t.Run("invalid enabled value is a config error", func(t *testing.T) {
		_, err := mustSchema(t, "wget", `{}`).Resolve(Sources{Env: map[string]string{"WGET_ENABLED": "perhaps"}})
		requireConfigError(t, err, "WGET_ENABLED", "perhaps", "must be a boolean")
	})

	assert.Equal(t, "PARSE_DOM_ENABLED", EnabledKey("parse-dom"))
	assert.Equal(t, "CHROME_MHTML_TIMEOUT", TimeoutKey("chrome_mhtml"))
}

func TestResolveEnvSerialisation(t *testing.T) {
	s := mustSchema(t, "wget", wgetConfig)
	res, err := s.Resolve(Sources{
		Env:  map[string]string{"USER_AGENT": "Bot/2 (+https://x.example/?a=1&b=2)"},
		File: map[string]any{"WGET_EXTRA_ARGS": []string{"--x", "--y"}},
		Base: map[string]string{"SNAP_DIR": "/snap"},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{
		`WGET_ARGS=["--no-verbose","-e","robots=off"]`,
		`WGET_ARGS_EXTRA=["--x","--y"]`,
		`WGET_ENABLED=True`,
		`WGET_OUT=/snap/wget`,
		`WGET_TIMEOUT=60`,
		`WGET_USER_AGENT=Bot/2 (+https://x.example/?a=1&b=2)`,
	}, res.Env())

	t.Run("numbers and objects", func(t *testing.T) {
		s := mustSchema(t, "p", `{"properties":{"N":{"type":"number","default":0.25},"I":{"type":"integer","default":3.0},"O":{"type":"object","default":{"z":1,"a":{"b":[true,null]}}},"F":{"type":"boolean","default":false},"NODEF":{"type":"string"}}}`)
		res, err := s.Resolve(Sources{})
		require.NoError(t, err)
		assert.Equal(t, []string{"F=False", "I=3", `N=0.25`, `O={"a":{"b":[true,null]},"z":1}`, "P_ENABLED=True"}, res.Env())
	})
}

func TestResolveFileValueShapes(t *testing.T) {
	tests := []struct {
		typ  string
		in   any
		want any
	}{
		{"integer", 90, int64(90)},
		{"integer", int64(90), int64(90)},
		{"integer", uint16(90), int64(90)},
		{"integer", 90.0, int64(90)},
		{"number", 3, 3.0},
		{"number", float32(0.5), 0.5},
		{"boolean", true, true},
		{"boolean", "yes", true},
		{"string", 42, "42"},
		{"string", true, "true"},
		{"array", []any{"a", 1}, nil},
		{"array", []string(nil), []any{}},
		{"object", map[string]any{"k": "v"}, map[string]any{"k": "v"}},
		{"object", `{"k":"v"}`, map[string]any{"k": "v"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%T", tt.typ, tt.in), func(t *testing.T) {
			res, err := schemaOf(t, "K", fmt.Sprintf(`{"type":%q}`, tt.typ)).Resolve(Sources{File: map[string]any{"k": tt.in}})
			require.NoError(t, err)
			v, ok := res.Value("K")
			require.True(t, ok)
			if tt.want != nil {
				assert.Equal(t, tt.want, v)
			}
		})
	}
	bad := []struct {
		typ string
		in  any
	}{
		{"integer", 1.5}, {"integer", true}, {"boolean", 1}, {"array", map[string]any{}}, {"object", []any{}}, {"string", []any{}},
	}
	for _, tt := range bad {
		t.Run(fmt.Sprintf("bad %s/%T", tt.typ, tt.in), func(t *testing.T) {
			_, err := schemaOf(t, "K", fmt.Sprintf(`{"type":%q}`, tt.typ)).Resolve(Sources{File: map[string]any{"K": tt.in}})
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "file:k", ce.Source)
		})
	}
}

func TestResolvedTimeout(t *testing.T) {
	const fallback = 42 * time.Second
	tests := []struct {
		name string
		doc  string
		src  Sources
		want time.Duration
	}{
		{"nothing: fallback", `{}`, Sources{}, fallback},
		{"declared plugin timeout default", `{"properties":{"WGET_TIMEOUT":{"type":"integer","default":60}}}`, Sources{}, 60 * time.Second},
		{"undeclared plugin timeout from env", `{}`, Sources{Env: map[string]string{"WGET_TIMEOUT": "2.5"}}, 2500 * time.Millisecond},
		{"global TIMEOUT from the job", `{}`, Sources{Job: map[string]string{"TIMEOUT": "30"}}, 30 * time.Second},
		{"global TIMEOUT from base", `{}`, Sources{Base: map[string]string{"TIMEOUT": "15"}}, 15 * time.Second},
		{"plugin beats global", `{}`, Sources{Env: map[string]string{"WGET_TIMEOUT": "5", "TIMEOUT": "30"}}, 5 * time.Second},
		{"zero means unset", `{}`, Sources{Env: map[string]string{"WGET_TIMEOUT": "0", "TIMEOUT": "30"}}, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := mustSchema(t, "wget", tt.doc).Resolve(tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Timeout(fallback))
		})
	}
	for _, bad := range []string{"-1", "soon", "1e300"} {
		t.Run("invalid "+bad, func(t *testing.T) {
			_, err := mustSchema(t, "wget", `{}`).Resolve(Sources{Env: map[string]string{"WGET_TIMEOUT": bad}})
			requireConfigError(t, err, "WGET_TIMEOUT", bad, "seconds")
		})
	}
}

func TestResolveConcurrentUse(t *testing.T) {
	s := mustSchema(t, "wget", wgetConfig)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Resolve(Sources{Env: map[string]string{"TIMEOUT": fmt.Sprint(10 + i)}, Base: map[string]string{"SNAP_DIR": "/s"}})
			if err == nil && res.Timeout(0) != time.Duration(10+i)*time.Second {
				err = fmt.Errorf("goroutine %d: timeout %s", i, res.Timeout(0))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

func TestConfigErrorMessage(t *testing.T) {
	e := &ConfigError{Plugin: "wget", Key: "WGET_TIMEOUT", Value: "abc", Rule: "must be an integer", Source: "env:WGET_TIMEOUT"}
	assert.Equal(t, `plugin wget: config WGET_TIMEOUT="abc": must be an integer (from env:WGET_TIMEOUT)`, e.Error())
	long := &ConfigError{Plugin: "p", Key: "K", Value: string(make([]byte, 1000)), Rule: "r"}
	assert.Less(t, len(long.Error()), 1000, "long values are truncated in the message")
}

func TestResolveTemplateExpansionIsBounded(t *testing.T) {
	// Each level repeats the next one 16 times: 16^6 copies of a 4-byte leaf.
	doc := `{"properties":{`
	for i := range 6 {
		doc += fmt.Sprintf(`"L%d":{"default":%q},`, i, strings.Repeat(fmt.Sprintf("{L%d}", i+1), 16))
	}
	doc += `"L6":{"default":"leaf"}}}`
	_, err := mustSchema(t, "p", doc).Resolve(Sources{})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Rule, "default expands to more than")
}
