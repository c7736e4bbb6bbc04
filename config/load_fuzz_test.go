package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// yamlFor nests value under the dotted key as a YAML document.
func yamlFor(key, value string) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i < len(parts)-1 {
			b.WriteString("\n")
		}
	}
	b.WriteString(" " + value + "\n")
	return b.String()
}

// badByKind are YAML scalars no key of that Go kind accepts.
var badByKind = map[reflect.Kind][]string{
	reflect.Int64: {"soon", "5 parsecs", "'1h2x'", "[1s]", "{a: 1}"}, // time.Duration
	// Not "1.5": viper decodes weakly and truncates it to 1 (reported in
	// docs/reliability.md, drill 5).
	reflect.Int:     {"many", "'12abc'", "[1]", "{a: 1}", "'1e999'"},
	reflect.Bool:    {"maybe", "'2'", "[true]", "{a: 1}"},
	reflect.Float64: {"lots", "'1,5'", "[1.0]", "{a: 1}"},
}

// malformedConfigFile is one bad archiveflow.yaml and the word its error
// must contain (the key or the file).
type malformedConfigFile struct {
	yaml, names string
}

// malformedConfigFiles is a corpus of config files Load must refuse: a
// wrongly typed value for every typed key of the configuration, an unknown
// key in every section, and YAML that does not parse.
func malformedConfigFiles(t testing.TB) []malformedConfigFile {
	var out []malformedConfigFile
	flat := flatten(Default())
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sections := map[string]bool{}
	for _, key := range keys {
		leaf := key[strings.LastIndexByte(key, '.')+1:]
		if i := strings.IndexByte(key, '.'); i > 0 {
			sections[key[:i]] = true
		}
		kind := reflect.TypeOf(flat[key]).Kind()
		if _, isDur := flat[key].(time.Duration); isDur {
			kind = reflect.Int64
		}
		for _, bad := range badByKind[kind] {
			out = append(out, malformedConfigFile{yamlFor(key, bad), leaf})
		}
	}
	for s := range sections {
		out = append(out, malformedConfigFile{yamlFor(s+".no_such_key", "1"), "no_such_key"})
	}
	for _, doc := range []string{"redis: [\n", "redis:\n\turl: x\n", "a: b: c\n", "- 1\n- 2\n", "redis: {url: x\n", "'unclosed\n", "key: \"\\q\"\n", "%YAML 9.9\n---\na: 1\n", ": x\n", "redis:\n  url: &a x\n  namespace: *b\n"} {
		out = append(out, malformedConfigFile{doc, "af.yaml"})
	}
	require.NotEmpty(t, out)
	return out
}

func TestMalformedConfigFilesGetClearErrors(t *testing.T) {
	dir := inTempDir(t)
	path := filepath.Join(dir, "af.yaml")
	corpus := malformedConfigFiles(t)
	require.GreaterOrEqual(t, len(corpus), 100)
	for _, c := range corpus {
		writeFile(t, path, c.yaml)
		cfg, err := Load(Options{File: path})
		if !assert.Error(t, err, "Load accepted %q as %+v", c.yaml, cfg) {
			continue
		}
		assert.Contains(t, err.Error(), c.names, "the error for %q names the key or file", c.yaml)
	}
	t.Logf("%d malformed config files", len(corpus))
}

// FuzzLoad loads arbitrary archiveflow.yaml files: Load never panics, an
// error names the file or a config key, and a loaded config is valid.
func FuzzLoad(f *testing.F) {
	f.Add("redis:\n  url: redis://127.0.0.1:6379/0\n")
	f.Add("hooks:\n  timeout: 90s\n  grace: 5s\n")
	f.Add("pools:\n- {name: a, task_queue: archiveflow, slots: 2}\n")
	f.Add("job:\n  sequential_steps: [5, 6]\n  fetch_depth: inf\n")
	f.Add("retry:\n  plugins:\n    wget: {maximum_attempts: 5}\n")
	f.Add("redis: [\n")
	f.Add("log: {level: loud}\n")
	for _, c := range malformedConfigFiles(f) {
		f.Add(c.yaml)
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "af.yaml")
	f.Fuzz(func(t *testing.T, doc string) {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(Options{File: path})
		if err != nil {
			msg := err.Error()
			var fe *FieldError
			if !strings.Contains(msg, path) && !errors.As(err, &fe) {
				t.Fatalf("Load(%q): error %q names neither the file nor a *FieldError key", doc, msg)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load(%q) returned an invalid config: %v", doc, err)
		}
	})
}
