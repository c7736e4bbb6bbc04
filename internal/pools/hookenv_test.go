package pools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/engine"
	"github.com/archiveflow/archiveflow/internal/model"
)

// lineSink keeps what a hook reports to the job log.
type lineSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *lineSink) StderrLine(l string)     { s.mu.Lock(); s.lines = append(s.lines, l); s.mu.Unlock() }
func (s *lineSink) Response(model.Response) {}
func (s *lineSink) Record()                 {}

// Secret values of these tests, each set through a different source.
const (
	fileRedisPassword = "file-redis-password-5d1e"
	fileTemporalKey   = "/etc/archiveflow/temporal-client-key.pem"
	envTemporalAPIKey = "env-temporal-api-key-77aa"
	envRedisKeyFile   = "/etc/archiveflow/redis-client-key.pem"
	flagRedisPassword = "flag-redis-password-93c0"
)

// loadSecretConfig loads a configuration whose secrets come from a config
// file, ARCHIVEFLOW_* variables and a flag, as an operator sets them.
func loadSecretConfig(t *testing.T, extraYAML string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	file := filepath.Join(dir, "archiveflow.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
redis:
  password: `+fileRedisPassword+`
temporal:
  tls: {cert_file: /etc/archiveflow/temporal-client.crt, key_file: `+fileTemporalKey+`}
`+extraYAML), 0o600))
	t.Setenv("ARCHIVEFLOW_TEMPORAL_API_KEY", envTemporalAPIKey)
	t.Setenv("ARCHIVEFLOW_REDIS_TLS_CERT_FILE", "/etc/archiveflow/redis-client.crt")
	t.Setenv("ARCHIVEFLOW_REDIS_TLS_KEY_FILE", envRedisKeyFile)
	fs := pflag.NewFlagSet("workers", pflag.ContinueOnError)
	config.BindFlags(fs)
	require.NoError(t, fs.Parse([]string{"--config", file, "--redis-url", "redis://:" + flagRedisPassword + "@127.0.0.1:6379/0"}))
	cfg, err := config.Load(config.Options{Flags: fs})
	require.NoError(t, err)
	return cfg
}

// runEnvDump runs plugin's one-line `env > env.txt` hook through the engine
// the pools build and returns the variables it saw.
func runEnvDump(t *testing.T, cfg *config.Config, workerEnv []string, plugin, configJSON string) map[string]string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, plugin)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	hookPath := filepath.Join(dir, "on_Snapshot__10_dump.sh")
	require.NoError(t, os.WriteFile(hookPath, []byte("#!/bin/sh\nenv > env.txt\n"), 0o755))
	if configJSON != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(configJSON), 0o644))
	}
	archive := t.TempDir()
	ecfg, err := EngineConfig(cfg, []string{root}, archive, workerEnv, zaptest.NewLogger(t))
	require.NoError(t, err)
	eng, err := engine.New(ecfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := eng.Run(ctx, activities.RunRequest{
		Job:  activities.Job{Ident: "envdump", URL: "https://example.com/", SnapshotID: "envdump"},
		Hook: activities.HookSpec{Plugin: plugin, Name: "on_Snapshot__10_dump.sh", Path: hookPath, Step: 1, Timeout: 30 * time.Second, Enabled: true},
	}, &lineSink{})
	require.NoError(t, err)
	require.False(t, out.Transient, out.Error)
	raw, err := os.ReadFile(filepath.Join(archive, "snapshots", "envdump", plugin, "env.txt"))
	require.NoError(t, err)
	for _, secret := range cfg.Secrets().Values() {
		require.NotContains(t, string(raw), secret, "the hook saw a secret")
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestHooksSeeNoSecretOfArchiveflow: with every secret set through a
// config file, the environment or a flag, and an operator and a plugin
// both asking for them, the env-dump hook sees none; pass_env lets a
// chosen variable through and nothing unlisted passes.
func TestHooksSeeNoSecretOfArchiveflow(t *testing.T) {
	cfg := loadSecretConfig(t, `
hooks:
  pass_env: [MY_CHOSEN, "ARCHIVEFLOW_*", COPY_OF_URL]
plugins:
  values: {DUMP_TOKEN: `+fileRedisPassword+`}
`)
	for _, v := range []string{fileRedisPassword, fileTemporalKey, envTemporalAPIKey, envRedisKeyFile, flagRedisPassword} {
		require.Contains(t, cfg.Secrets().Values(), v, "the test must set every secret")
	}
	workerEnv := append(os.Environ(),
		"MY_CHOSEN=visible", "UNLISTED=hidden", "ARCHIVEFLOW_WORKER_NICKNAME=w1",
		"COPY_OF_URL=redis://:"+flagRedisPassword+"@127.0.0.1:6379/0", "ARCHIVEFLOW_BIN=/usr/local/bin/archiveflow",
		// overridden by the flag, still a secret
		"ARCHIVEFLOW_REDIS_URL=redis://:older-redis-password-1b2c@127.0.0.1:6379/0")
	// A plugin that declares archiveflow's own variables, and a key of
	// its own whose value the operator set to a secret.
	env := runEnvDump(t, cfg, workerEnv, "dump", `{"properties": {
  "REDIS_URL": {"type": "string", "default": "", "x-aliases": ["ARCHIVEFLOW_REDIS_URL"]},
  "ARCHIVEFLOW_TEMPORAL_API_KEY": {"type": "string", "default": ""},
  "ARCHIVEFLOW_REDIS_PASSWORD": {"type": "string", "default": ""},
  "DUMP_KEY": {"type": "string", "default": "key={ARCHIVEFLOW_TEMPORAL_API_KEY}"},
  "DUMP_TOKEN": {"type": "string", "default": ""}
}}`)

	assert.Equal(t, "visible", env["MY_CHOSEN"], "pass_env lets a chosen variable through")
	assert.Equal(t, "w1", env["ARCHIVEFLOW_WORKER_NICKNAME"], "a pass_env prefix passes what is not secret")
	assert.Equal(t, "/usr/local/bin/archiveflow", env["ARCHIVEFLOW_BIN"])
	assert.Empty(t, env["REDIS_URL"], "a plugin's alias cannot pick up ARCHIVEFLOW_REDIS_URL")
	assert.NotContains(t, strings.Join(mapValues(env), "\n"), "older-redis-password-1b2c")
	assert.Equal(t, "key=", env["DUMP_KEY"], "a {TEMPLATE} cannot pick up a secret variable")
	for _, name := range []string{"UNLISTED", "COPY_OF_URL", "DUMP_TOKEN",
		"ARCHIVEFLOW_TEMPORAL_API_KEY", "ARCHIVEFLOW_REDIS_PASSWORD", "ARCHIVEFLOW_REDIS_TLS_KEY_FILE"} {
		assert.NotContains(t, env, name)
	}
	for _, name := range []string{"PATH", "HOME", "SNAP_DIR", "TIMEOUT", "EXTRA_CONTEXT", "FETCH_DENY", "DUMP_ENABLED"} {
		assert.Contains(t, env, name)
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestArchiveBoxPluginKeysReachTheirHooks: an ArchiveBox-style config.json
// (declared keys, aliases, x-fallback to global keys) gets its keys
// resolved from the worker environment, as abx-plugins hooks expect, while
// the worker's other variables stay out.
func TestArchiveBoxPluginKeysReachTheirHooks(t *testing.T) {
	cfg := loadSecretConfig(t, "")
	workerEnv := append(os.Environ(), "WGET_BINARY=/opt/wget/bin/wget", "CHECK_SSL_VALIDITY=False",
		"SAVE_WARC=False", "WGET_EXTRA_ARGS=--no-cookies", "CHROME_BINARY=/opt/chromium")
	env := runEnvDump(t, cfg, workerEnv, "wget", `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "wget", "type": "object", "additionalProperties": false,
  "required_binaries": [{"name": "{WGET_BINARY}", "binproviders": "env,apt,brew"}],
  "properties": {
    "WGET_ENABLED": {"type": "boolean", "default": true, "x-aliases": ["SAVE_WGET", "USE_WGET"]},
    "WGET_WARC_ENABLED": {"type": "boolean", "default": true, "x-aliases": ["SAVE_WARC", "WGET_SAVE_WARC"]},
    "WGET_BINARY": {"type": "string", "default": "wget"},
    "WGET_TIMEOUT": {"type": "integer", "default": 60, "minimum": 5, "x-fallback": "TIMEOUT"},
    "WGET_CHECK_SSL_VALIDITY": {"type": "boolean", "default": true, "x-fallback": "CHECK_SSL_VALIDITY"},
    "WGET_ARGS_EXTRA": {"type": "array", "items": {"type": "string"}, "default": [], "x-aliases": ["WGET_EXTRA_ARGS"]}
  }
}`)
	assert.Equal(t, "/opt/wget/bin/wget", env["WGET_BINARY"])
	assert.Equal(t, "False", env["WGET_CHECK_SSL_VALIDITY"])
	assert.Equal(t, "False", env["WGET_WARC_ENABLED"])
	assert.Equal(t, `["--no-cookies"]`, env["WGET_ARGS_EXTRA"])
	assert.Equal(t, "60", env["WGET_TIMEOUT"])
	for _, name := range []string{"CHECK_SSL_VALIDITY", "SAVE_WARC", "WGET_EXTRA_ARGS", "CHROME_BINARY"} {
		assert.NotContains(t, env, name, "undeclared worker variables stay out")
	}
}

// TestBuiltinPluginsGetTheirBinaries: the plugins shipped in plugins/
// declare the keys they read (WGET_BINARY, CHROME_BINARY as an alias), so
// a binary set in the worker environment reaches them.
func TestBuiltinPluginsGetTheirBinaries(t *testing.T) {
	want := map[string]map[string]string{
		"wget":       {"WGET_BINARY": "/opt/wget"},
		"screenshot": {"SCREENSHOT_BINARY": "/opt/chromium"},
		"dom":        {"DOM_BINARY": "/opt/chromium"},
	}
	docs := map[string]string{}
	for plugin := range want {
		doc, err := os.ReadFile(filepath.Join("..", "..", "plugins", plugin, "config.json"))
		require.NoError(t, err)
		docs[plugin] = string(doc)
	}
	cfg := loadSecretConfig(t, "")
	for plugin, keys := range want {
		env := runEnvDump(t, cfg, append(os.Environ(), "WGET_BINARY=/opt/wget", "CHROME_BINARY=/opt/chromium"), plugin, docs[plugin])
		for k, v := range keys {
			assert.Equal(t, v, env[k], "%s: %s", plugin, k)
		}
	}
}
