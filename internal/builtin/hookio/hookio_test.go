package hookio

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

func envOf(kv map[string]string) LookupEnv {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		return v, ok
	}
}

func TestParseValid(t *testing.T) {
	inv, err := Parse("wget", []string{"--url=https://example.org/a b?q='$(x)';", "--snapshot-id=s1", "--extra"}, envOf(map[string]string{
		"SNAP_DIR": "/snap", "WGET_TIMEOUT": "7", "TIMEOUT": "9", "USER_AGENT": "ua",
		"FETCH_DEPTH": "inf", "DELAY_MIN": "250", "DELAY_MAX": "750",
		"IGNORE_PATTERNS": `["\\.jpg$","^https://x/"]`,
		"EXTRA_CONTEXT":   `{"snapshot_id":"s1","ident":"abc","attempt":2,"depth":3}`,
	}))
	require.NoError(t, err)
	assert.Equal(t, "https://example.org/a b?q='$(x)';", inv.URL, "the URL is kept verbatim")
	assert.Equal(t, "s1", inv.SnapshotID)
	assert.Equal(t, []string{"--extra"}, inv.ExtraArgs)
	assert.Equal(t, 7*time.Second, inv.Timeout, "<PLUGIN>_TIMEOUT wins over TIMEOUT")
	assert.Equal(t, model.FetchInf, inv.FetchDepth)
	assert.Equal(t, 250*time.Millisecond, inv.DelayMin)
	assert.Equal(t, 750*time.Millisecond, inv.DelayMax)
	assert.Equal(t, []string{`\.jpg$`, `^https://x/`}, inv.IgnorePatterns)
	assert.Equal(t, Context{SnapshotID: "s1", Ident: "abc", Attempt: 2, Depth: 3}, inv.Extra)
	assert.Nil(t, inv.FetchProxy, "no FETCH_PROXY: fetch directly")

	inv, err = Parse("wget", []string{"--url=http://h/"}, envOf(map[string]string{"FETCH_PROXY": "http://127.0.0.1:3128"}))
	require.NoError(t, err)
	require.NotNil(t, inv.FetchProxy)
	assert.Equal(t, "http://127.0.0.1:3128", inv.FetchProxy.String())
}

func TestParseDefaults(t *testing.T) {
	inv, err := Parse("title", []string{"--url=http://example.org/"}, envOf(nil))
	require.NoError(t, err)
	assert.Equal(t, DefaultTimeout, inv.Timeout)
	assert.Equal(t, model.FetchShallow, inv.FetchDepth)
	assert.Zero(t, inv.DelayMax)
	assert.Nil(t, inv.IgnorePatterns)

	inv, err = Parse("title", []string{"--url=http://example.org/"}, envOf(map[string]string{"TIMEOUT": "12"}))
	require.NoError(t, err)
	assert.Equal(t, 12*time.Second, inv.Timeout, "TIMEOUT applies without <PLUGIN>_TIMEOUT")
}

func TestParseRejects(t *testing.T) {
	ok := []string{"--url=http://example.org/"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no url", nil, nil, "argument --url: missing"},
		{"relative url", []string{"--url=/x"}, nil, `argument --url="/x": must be an absolute http or https URL`},
		{"ftp url", []string{"--url=ftp://h/x"}, nil, "must be an absolute http or https URL"},
		{"bad timeout", ok, map[string]string{"TITLE_TIMEOUT": "soon"}, `env TITLE_TIMEOUT="soon": must be a positive integer`},
		{"zero timeout", ok, map[string]string{"TIMEOUT": "0"}, `env TIMEOUT="0": must be a positive integer`},
		{"bad depth", ok, map[string]string{"FETCH_DEPTH": "deep"}, `env FETCH_DEPTH: fetch_depth "deep": must be shallow or inf`},
		{"negative delay", ok, map[string]string{"DELAY_MIN": "-1"}, `env DELAY_MIN="-1": must be a non-negative integer`},
		{"max below min", ok, map[string]string{"DELAY_MIN": "500", "DELAY_MAX": "100"}, "env DELAY_MAX=100 ms: must be >= DELAY_MIN (500 ms)"},
		{"ignores not json", ok, map[string]string{"IGNORE_PATTERNS": "*.jpg"}, "env IGNORE_PATTERNS=\"*.jpg\": must be a JSON array"},
		{"ignore not regexp", ok, map[string]string{"IGNORE_PATTERNS": `["(unclosed"]`}, `env IGNORE_PATTERNS: ignore pattern "(unclosed": not a valid Go RE2 regular expression`},
		{"extra context", ok, map[string]string{"EXTRA_CONTEXT": "[1]"}, "env EXTRA_CONTEXT=\"[1]\": must be a JSON object"},
		{"proxy without port", ok, map[string]string{"FETCH_PROXY": "http://127.0.0.1"}, `env FETCH_PROXY="http://127.0.0.1": must be http://HOST:PORT`},
		{"proxy not http", ok, map[string]string{"FETCH_PROXY": "socks5://127.0.0.1:1080"}, `env FETCH_PROXY="socks5://127.0.0.1:1080": must be http://HOST:PORT`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("title", tt.args, envOf(tt.env))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestConfigAccessors(t *testing.T) {
	inv, err := Parse("wget", []string{"--url=http://h/"}, envOf(map[string]string{
		"WGET_ENABLED": "False", "WGET_ARGS": `["--no-cookies","-e x"]`, "WGET_BINARY": "", "B": "maybe", "N": "3",
	}))
	require.NoError(t, err)
	enabled, err := inv.Enabled()
	require.NoError(t, err)
	assert.False(t, enabled)
	args, err := inv.StringList("WGET_ARGS")
	require.NoError(t, err)
	assert.Equal(t, []string{"--no-cookies", "-e x"}, args)
	assert.Equal(t, "wget", inv.String("WGET_BINARY", "wget"), "empty means default")
	_, err = inv.Bool("B", true)
	assert.EqualError(t, err, `env B="maybe": must be a boolean (True or False)`)
	n, err := inv.Int("N", 1, 0)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	_, err = inv.Int("N", 1, 5)
	assert.EqualError(t, err, `env N="3": must be an integer >= 5`)
}

func TestEmitterRecords(t *testing.T) {
	var buf bytes.Buffer
	e := NewEmitter(&buf)
	require.NoError(t, e.Response(model.Response{URL: "http://h/", Status: 200, Bytes: 5, WgetCode: "RETRFINISHED"}))
	require.NoError(t, e.Snapshot("http://h/a", 1))
	require.NoError(t, e.Tag("t"))
	require.NoError(t, e.Result(Result{Status: model.StatusSucceeded, OutputStr: "ok", OutputJSON: map[string]int{"n": 1}}))
	require.Error(t, e.Result(Result{Status: "done"}), "an invalid status is refused")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4)
	want := []string{
		`{"type":"Response","url":"http://h/","status":200,"bytes":5,"wget_code":"RETRFINISHED"}`,
		`{"type":"Snapshot","url":"http://h/a","depth":1}`,
		`{"type":"Tag","name":"t"}`,
		`{"type":"ArchiveResult","status":"succeeded","output_str":"ok","output_json":{"n":1}}`,
	}
	for i, w := range want {
		assert.JSONEq(t, w, lines[i])
		assert.True(t, json.Valid([]byte(lines[i])))
	}
}
