package hooks

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// malformedNames is a corpus of file names that start like an on_Snapshot
// hook but break the name grammar: each must be rejected with a *NameError
// that quotes the name.
func malformedNames() []string {
	var out []string
	// Every byte that is not a letter or digit, as (part of) the extension.
	for c := 0x20; c < 0x7f; c++ {
		if isAlnum(rune(c)) || c == '.' {
			continue
		}
		out = append(out, fmt.Sprintf("on_Snapshot__10_x.s%ch", c))
	}
	for _, ext := range []string{"", "é", "sh ", "s\x00h", "\xff"} {
		out = append(out, "on_Snapshot__10_x."+ext)
	}
	// Unknown, empty and repeated markers, and the finite/daemon clash.
	for _, m := range []string{"fg", "BG", "bg2", "background", "finit", "", "bg.bg", "finite.finite", "daemon.daemon", "finite.daemon", "daemon.bg.finite", "1", " "} {
		out = append(out, "on_Snapshot__10_x."+m+".sh", "on_Snapshot__x."+m+".py")
	}
	// No extension, and a missing double underscore.
	for _, body := range []string{"10_x", "x", "10_", "10"} {
		out = append(out, "on_Snapshot__"+body)
	}
	// Every prefix of a valid name that ends before the first dot.
	valid := "on_Snapshot__61_wget.finite.bg.sh"
	for i := len("on_Snapshot__"); i < strings.IndexByte(valid, '.'); i++ {
		out = append(out, valid[:i])
	}
	for _, sep := range []string{"_", "-", ".", " ", "_-"} {
		out = append(out, "on_Snapshot"+sep+"10_x.sh")
	}
	// Bad orders: one digit, three digits, digits without the underscore,
	// an empty description.
	for _, nn := range []string{"1", "123", "00", "10", "5"} {
		switch nn {
		case "00", "10":
			out = append(out, "on_Snapshot__"+nn+"_.sh", "on_Snapshot__"+nn+"_.bg.sh")
		default:
			out = append(out, "on_Snapshot__"+nn+"_x.sh")
		}
	}
	return out
}

func TestMalformedHookNamesGetClearErrors(t *testing.T) {
	corpus := malformedNames()
	require.GreaterOrEqual(t, len(corpus), 80)
	for _, name := range corpus {
		n, err := ParseName(name)
		if !assert.Error(t, err, "ParseName(%q) accepted %+v", name, n) {
			continue
		}
		var ne *NameError
		if assert.ErrorAs(t, err, &ne, "ParseName(%q)", name) {
			assert.Equal(t, name, ne.Name)
			assert.NotEmpty(t, ne.Rule, "ParseName(%q) names no rule", name)
			assert.Contains(t, err.Error(), fmt.Sprintf("%q", name), "the error quotes the file name")
		}
	}
	t.Logf("%d malformed hook names", len(corpus))
}

// truncations returns every proper prefix of doc that ends before its last
// '}', none of which is a complete JSON object.
func truncations(doc string) []string {
	end := strings.LastIndexByte(doc, '}')
	out := make([]string, 0, end)
	for i := 0; i < end; i++ {
		out = append(out, doc[:i])
	}
	return out
}

// malformedSchemas are config.json documents ParseSchema must refuse.
func malformedSchemas() []string {
	out := truncations(wgetConfig)
	out = append(out,
		`[]`, `"x"`, `1`, `null`, `true`,
		`{"properties":[]}`, `{"properties":"x"}`, `{"properties":{"K":1}}`,
		`{"properties":{"K":{"type":"integr"}}}`, `{"properties":{"K":{"type":7}}}`,
		`{"properties":{"K":{"type":"integer","default":"x"}}}`,
		`{"properties":{"K":{"type":"integer","minimum":"1"}}}`,
		`{"properties":{"K":{"pattern":"("}}}`, `{"properties":{"K":{"pattern":7}}}`,
		`{"properties":{"K":{"enum":"a"}}}`, `{"properties":{"K":{"x-aliases":"A"}}}`,
		`{"properties":{"K":{"x-fallback":7}}}`, `{"x-runtimes":"archiveflow"}`, `{"x-runtimes":[1]}`,
		`{"a":1,}`, `{'a':1}`, `{"a":1}{}`, `{"a":01}`, `{"a":NaN}`,
	)
	return out
}

func TestMalformedPluginConfigsGetClearErrors(t *testing.T) {
	corpus := malformedSchemas()
	require.GreaterOrEqual(t, len(corpus), 200)
	const path = "corpus/config.json"
	accepted := 0
	for _, doc := range corpus {
		s, err := ParseSchema([]byte(doc), path, "corpus")
		if err == nil {
			accepted++
			t.Errorf("ParseSchema accepted malformed %q as %v", doc, s.Keys())
			continue
		}
		assert.Contains(t, err.Error(), path, "the error for %q names the file", doc)
	}
	t.Logf("%d malformed config.json documents", len(corpus))
}

// rulesConfig has one key per rule of the JSONSchema subset.
const rulesConfig = `{"properties":{
  "WGET_ENABLED": {"type": "boolean", "default": true},
  "WGET_TIMEOUT": {"type": "integer", "default": 60, "minimum": 5, "maximum": 3600},
  "WGET_RATIO": {"type": "number", "default": 0.5, "minimum": 0, "maximum": 1},
  "WGET_MODE": {"type": "string", "default": "warc", "enum": ["warc", "mirror"]},
  "WGET_NAME": {"type": "string", "default": "abc", "pattern": "^[a-z]+$"},
  "WGET_LIMITS": {"type": "object", "default": {}}
}}`

// badValues are values that break the rules of rulesConfig's keys.
var badValues = map[string][]string{
	"WGET_ENABLED": {"maybe", "2", "yes please", "TRUE!", "nil", "on off"},
	"WGET_TIMEOUT": {"abc", "1.5", "4", "-1", "0", "1e400", "60s", "0x10", "99999999999999999999", "3601"},
	"WGET_RATIO":   {"x", "1.01", "-0.1", "NaN", "Inf", "1e400", "½"},
	"WGET_MODE":    {"WARC", "mirror ", "other", "w"},
	"WGET_NAME":    {"ABC", "a1", "a-b", "a b", "é"},
	"WGET_LIMITS":  {"[1]", "{", "1", "\"s\"", "{\"a\":}"},
}

func TestMalformedConfigValuesGetClearErrors(t *testing.T) {
	s := mustSchema(t, "wget", rulesConfig)
	n := 0
	for key, vals := range badValues {
		for _, v := range vals {
			for _, src := range []string{"job", "env"} {
				n++
				in := Sources{Base: map[string]string{"SNAP_DIR": "/snap"}}
				switch src {
				case "job":
					in.Job = map[string]string{key: v}
				case "env":
					in.Env = map[string]string{key: v}
				}
				_, err := s.Resolve(in)
				if !assert.Error(t, err, "%s %s=%q accepted", src, key, v) {
					continue
				}
				var ce *ConfigError
				if assert.True(t, errors.As(err, &ce), "%s %s=%q: want *ConfigError, got %v", src, key, v, err) {
					assert.Equal(t, "wget", ce.Plugin)
					assert.Equal(t, key, ce.Key)
					assert.NotEmpty(t, ce.Rule)
					assert.Contains(t, err.Error(), key)
				}
			}
		}
	}
	t.Logf("%d malformed config values", n)
}
