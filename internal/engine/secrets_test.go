package engine

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
)

const testSecret = "redis-password-4f9c2e"

// withSecrets rebuilds the fixture's engine knowing testSecret as the
// Redis password, with file as the config file's plugin values.
func (f *fixture) withSecrets(file map[string]any) {
	f.t.Helper()
	cfg := config.Default()
	cfg.Redis.Password = testSecret
	e, err := New(Config{PluginDirs: []string{f.plugins}, ArchiveDir: f.archive, Env: []string{"PATH=" + os.Getenv("PATH")},
		File: file, Timeout: 30 * time.Second, Grace: 5 * time.Second, LineCap: 1 << 20, Secrets: cfg.Secrets(), Log: zap.NewNop()})
	require.NoError(f.t, err)
	f.engine = e
	f.withOptions(testOptions())
}

// TestSecretsAreRedactedFromWhatAHookReports: a hook that got hold of a
// secret some other way cannot put it into the job log or the result
// (workflow history).
func TestSecretsAreRedactedFromWhatAHookReports(t *testing.T) {
	f := newFixture(t)
	f.withSecrets(nil)
	h := f.hook("leak", "on_Snapshot__10_leak.sh", `
echo "the password is `+testSecret+`" >&2
echo '{"type":"Response","url":"http://u:`+testSecret+`@example.com/","status":200}'
echo '{"type":"ArchiveResult","status":"failed","output_str":"`+testSecret+`","output_json":{"p":"`+testSecret+`"},"error":"pw `+testSecret+`"}'`)
	res, err := f.run(f.env(), runInput(h))
	require.NoError(t, err)
	assert.Equal(t, "xxxxx", res.OutputStr)
	assert.JSONEq(t, `{"p":"xxxxx"}`, string(res.OutputJSON))
	assert.Equal(t, "pw xxxxx", res.Error)
	entries := f.store.entries()
	var sawLine, sawResponse bool
	for _, e := range entries {
		sawLine = sawLine || e.Message == "the password is xxxxx"
		sawResponse = sawResponse || e.Response != nil && e.Response.URL == "http://u:xxxxx@example.com/"
	}
	assert.True(t, sawLine && sawResponse, "the redacted line and response reach the job log: %+v", entries)
	for _, e := range entries {
		assert.NotContains(t, e.Message, testSecret)
		if e.Response != nil {
			assert.NotContains(t, e.Response.URL, testSecret)
		}
	}

	h = f.hook("crash", "on_Snapshot__10_crash.sh", `echo "dying with `+testSecret+`" >&2; exit 3`)
	in := runInput(h)
	_, err = f.run(f.env(), in)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testSecret)
	assert.Contains(t, err.Error(), "dying with xxxxx")
}

// TestConfigErrorsQuoteNoSecret: a plugin config error names the value,
// and it goes into workflow history (the plan, the activity error): a
// secret value is redacted there.
func TestConfigErrorsQuoteNoSecret(t *testing.T) {
	f := newFixture(t)
	f.withSecrets(map[string]any{"MODE_VALUE": testSecret})
	f.config("mode", `{"properties": {"MODE_VALUE": {"type": "string", "enum": ["a", "b"]}}}`)
	h := f.hook("mode", "on_Snapshot__10_mode.sh", `exit 0`)

	plan, err := f.engine.Discover(context.Background(), activities.DiscoverInput{Ident: "abc123", SnapshotID: "abc123"})
	require.NoError(t, err)
	require.Len(t, plan.Hooks, 1)
	assert.Contains(t, plan.Hooks[0].ConfigError, `MODE_VALUE="xxxxx": must be one of`)
	assert.NotContains(t, plan.Hooks[0].ConfigError, testSecret)

	_, err = f.run(f.env(), runInput(h))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `MODE_VALUE="xxxxx"`)
	assert.NotContains(t, err.Error(), testSecret)
}
