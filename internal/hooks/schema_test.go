package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadSchemaMissingFileIsEmpty(t *testing.T) {
	s, err := LoadSchema(filepath.Join(t.TempDir(), "config.json"), "title")
	require.NoError(t, err)
	assert.Equal(t, "title", s.Plugin)
	assert.Empty(t, s.Keys())
	assert.True(t, s.SupportsRuntime())
	res, err := s.Resolve(Sources{})
	require.NoError(t, err)
	assert.Equal(t, []string{"TITLE_ENABLED=True"}, res.Env())
}

func TestLoadSchemaUnreadableIsError(t *testing.T) {
	dir := t.TempDir() // a directory where a file is expected
	_, err := LoadSchema(dir, "p")
	require.Error(t, err)
	assert.Contains(t, err.Error(), dir)
}

func TestLoadSchemaRealShapes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, wgetConfig, 0o644)
	s, err := LoadSchema(path, "wget")
	require.NoError(t, err)
	assert.Equal(t, []string{"WGET_ARGS", "WGET_ARGS_EXTRA", "WGET_ENABLED", "WGET_OUT", "WGET_TIMEOUT", "WGET_USER_AGENT"}, s.Keys())
	timeout := s.Properties["WGET_TIMEOUT"]
	require.NotNil(t, timeout.Minimum)
	assert.Equal(t, Property{
		Key: "WGET_TIMEOUT", Type: TypeInteger, Default: int64(60), HasDefault: true,
		Minimum: timeout.Minimum, Fallback: "TIMEOUT",
	}, *timeout)
	assert.Equal(t, 5.0, *timeout.Minimum)
	assert.Equal(t, []string{"SAVE_WGET", "USE_WGET"}, s.Properties["WGET_ENABLED"].Aliases)
	assert.Equal(t, "Enable wget archiving", s.Properties["WGET_ENABLED"].Description)
	assert.Equal(t, []any{"--no-verbose", "-e", "robots=off"}, s.Properties["WGET_ARGS"].Default)
}

func TestParseSchemaKeywords(t *testing.T) {
	valid := []struct {
		name, prop string
		check      func(t *testing.T, p *Property)
	}{
		{"unknown keywords are ignored", `{"type":"string","x-scope":"crawl_execution","items":{"type":"string"},"format":"uri","additionalProperties":false}`,
			func(t *testing.T, p *Property) { assert.Equal(t, TypeString, p.Type) }},
		{"type inferred from the default", `{"default":3}`,
			func(t *testing.T, p *Property) { assert.Equal(t, TypeInteger, p.Type) }},
		{"no type and no default is a string", `{}`,
			func(t *testing.T, p *Property) { assert.Equal(t, TypeString, p.Type); assert.False(t, p.HasDefault) }},
		{"nullable type", `{"type":["string","null"],"default":null}`,
			func(t *testing.T, p *Property) { assert.Equal(t, TypeString, p.Type); assert.False(t, p.HasDefault) }},
		{"integer default written as 60.0", `{"type":"integer","default":60.0}`,
			func(t *testing.T, p *Property) { assert.Equal(t, int64(60), p.Default) }},
		{"number default from an integer literal", `{"type":"number","default":0}`,
			func(t *testing.T, p *Property) { assert.Equal(t, 0.0, p.Default) }},
		{"enum normalised to the type", `{"type":"number","enum":[1, 2.5]}`,
			func(t *testing.T, p *Property) { assert.Equal(t, []any{1.0, 2.5}, p.Enum) }},
		{"RE2 pattern", `{"type":"string","pattern":"^(?P<w>\\d+),(?<h>\\d+)$"}`,
			func(t *testing.T, p *Property) { assert.True(t, p.re.MatchString("1,2")) }},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			s := schemaOf(t, "K", tt.prop)
			tt.check(t, s.Properties["K"])
		})
	}

	invalid := []struct {
		name, doc, want string
	}{
		{"minimum not a number", `{"properties":{"K":{"type":"integer","minimum":"x"}}}`, `property "K": minimum must be a number, got "x"`},
		{"maximum not a number", `{"properties":{"K":{"type":"integer","maximum":[1]}}}`, `property "K": maximum must be a number`},
		{"minimum above maximum", `{"properties":{"K":{"type":"integer","minimum":5,"maximum":1}}}`, "minimum 5 is greater than maximum 1"},
		{"invalid regex", `{"properties":{"K":{"type":"string","pattern":"(unclosed"}}}`, `property "K": pattern "(unclosed" is not a valid RE2 regular expression`},
		{"lookahead", `{"properties":{"K":{"type":"string","pattern":"^(?!www\\.)"}}}`, "uses negative lookahead ((?!), which Go's RE2 syntax does not support"},
		{"lookbehind", `{"properties":{"K":{"type":"string","pattern":"(?<=a)b"}}}`, "uses lookbehind"},
		{"backreference", `{"properties":{"K":{"type":"string","pattern":"(a)\\1"}}}`, "uses backreferences"},
		{"pattern not a string", `{"properties":{"K":{"type":"string","pattern":1}}}`, "pattern must be a string"},
		{"unknown type", `{"properties":{"K":{"type":"str"}}}`, `type "str": must be one of string, boolean, integer, number, array, object`},
		{"type union", `{"properties":{"K":{"type":["string","integer"]}}}`, "only one type"},
		{"type not a name", `{"properties":{"K":{"type":5}}}`, "type must be a type name"},
		{"string default for integer", `{"properties":{"K":{"type":"integer","default":"60"}}}`, `property "K": default "60": must be an integer`},
		{"fractional default for integer", `{"properties":{"K":{"type":"integer","default":1.5}}}`, "default 1.5: must be an integer"},
		{"string default for boolean", `{"properties":{"K":{"type":"boolean","default":"true"}}}`, "must be a boolean"},
		{"object default for array", `{"properties":{"K":{"type":"array","default":{}}}}`, "must be a JSON array"},
		{"enum of the wrong type", `{"properties":{"K":{"type":"integer","enum":["a"]}}}`, `enum value "a": must be an integer`},
		{"enum not an array", `{"properties":{"K":{"enum":"a"}}}`, "enum must be an array"},
		{"aliases not strings", `{"properties":{"K":{"x-aliases":"B"}}}`, "x-aliases must be an array of strings"},
		{"alias not a key", `{"properties":{"K":{"x-aliases":["B C"]}}}`, `x-aliases entry "B C" must match`},
		{"fallback not a string", `{"properties":{"K":{"x-fallback":["A"]}}}`, "x-fallback must be a string"},
		{"fallback to itself", `{"properties":{"K":{"x-fallback":"K"}}}`, "names the key itself"},
		{"key not an env name", `{"properties":{"MY-KEY":{"type":"string"}}}`, `property "MY-KEY": key must match`},
		{"property not an object", `{"properties":{"K":5}}`, `property "K": must be an object`},
		{"description not a string", `{"properties":{"K":{"description":1}}}`, "description must be a string"},
		{"properties not an object", `{"properties":[]}`, "properties must be an object, got []"},
		{"x-runtimes not a list", `{"x-runtimes":"abx-dl"}`, `x-runtimes must be an array of strings, got "abx-dl"`},
		{"top level not an object", `[1]`, "top level must be a JSON object, got [1]"},
		{"top level null", `null`, "top level must be a JSON object, got null"},
		{"syntax error", "{\n \"a\": tru\n}", "JSON syntax error at line 2, column"},
		{"truncated", `{"properties": {`, "JSON syntax error at line 1, column 17: unexpected end of input"},
		{"empty file", ``, "unexpected end of input"},
		{"trailing data", `{} {}`, "line 1, column 4: unexpected data after the top-level value"},
		{"trailing bracket", `{}]`, "unexpected data after the top-level value"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSchema([]byte(tt.doc), "/plugins/p/config.json", "p")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "/plugins/p/config.json", "the error names the file")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestSchemaJSONRoundTrip(t *testing.T) {
	s := mustSchema(t, "wget", wgetConfig)
	data, err := json.Marshal(s)
	require.NoError(t, err)
	var back Schema
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, s.Keys(), back.Keys())
	assert.Equal(t, s.Properties, back.Properties)

	empty, err := LoadSchema(filepath.Join(t.TempDir(), "none.json"), "title")
	require.NoError(t, err)
	data, err = json.Marshal(empty)
	require.NoError(t, err)
	var backEmpty Schema
	require.NoError(t, json.Unmarshal(data, &backEmpty))
	assert.Equal(t, "title", backEmpty.Plugin)
	assert.Empty(t, backEmpty.Keys())

	require.Error(t, json.Unmarshal([]byte(`{"plugin":"p","config":{"properties":5}}`), &back))
}

func TestLoadSchemaReadsFromDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"x-runtimes":["archivebox"]}`), 0o644))
	s, err := LoadSchema(path, "p")
	require.NoError(t, err)
	assert.Equal(t, path, s.Path)
	assert.Equal(t, []string{"archivebox"}, s.Runtimes)
	assert.False(t, s.SupportsRuntime())
}
