package config

import (
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecretsComeFromEverySource: a secret set in the file, the
// environment or a flag is known to Secrets.
func TestSecretsComeFromEverySource(t *testing.T) {
	dir := inTempDir(t)
	file := writeFile(t, filepath.Join(dir, "af.yaml"), `
redis:
  password: file-redis-password
  tls: {enabled: true, cert_file: /etc/af/redis.crt, key_file: /etc/af/redis-key.pem}
`)
	t.Setenv("ARCHIVEFLOW_TEMPORAL_API_KEY", "env-temporal-api-key")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs)
	require.NoError(t, fs.Parse([]string{"--config", file, "--redis-url", "redis://u:flag-p%40ss@redis.example:6379/0"}))
	cfg, err := Load(Options{Flags: fs})
	require.NoError(t, err)

	s := cfg.Secrets()
	for _, v := range []string{"file-redis-password", "/etc/af/redis-key.pem", "env-temporal-api-key", "flag-p@ss",
		"redis://u:flag-p%40ss@redis.example:6379/0"} {
		assert.Contains(t, s.Values(), v)
		assert.True(t, s.In("x="+v+";"), v)
	}
	assert.False(t, s.In("/etc/af/redis.crt"), "a certificate is public")
	assert.Equal(t, "url redis://u:xxxxx@redis.example:6379/0 key xxxxx",
		s.Redact("url redis://u:flag-p@ss@redis.example:6379/0 key env-temporal-api-key"))
	assert.Equal(t, "at xxxxx", s.Redact("at redis://u:flag-p%40ss@redis.example:6379/0"))
}

func TestShortSecretsMatchOnlyWholeValues(t *testing.T) {
	cfg := Default()
	cfg.Redis.Password = "pw"
	s := cfg.Secrets()
	assert.True(t, s.In("pw"))
	assert.False(t, s.In("/usr/bin/pwd"), "a 2-byte password is not looked for inside other text")
	assert.Equal(t, "xxxxx", s.Redact("pw"))
	assert.Equal(t, "cwd pwd", s.Redact("cwd pwd"))
}

func TestSecretEnvNamesAndReveals(t *testing.T) {
	assert.ElementsMatch(t, []string{
		"ARCHIVEFLOW_REDIS_URL", "ARCHIVEFLOW_REDIS_PASSWORD", "ARCHIVEFLOW_TEMPORAL_API_KEY",
		"ARCHIVEFLOW_REDIS_TLS_KEY_FILE", "ARCHIVEFLOW_TEMPORAL_TLS_KEY_FILE",
	}, SecretEnv())
	var zero Secrets
	assert.True(t, zero.Reveals("ARCHIVEFLOW_REDIS_PASSWORD", ""), "the names alone are secret")
	assert.False(t, zero.Reveals("PATH", "/usr/bin"))
}

func TestPassEnvAndFetchDenyAreValidated(t *testing.T) {
	inTempDir(t)
	t.Setenv("ARCHIVEFLOW_HOOKS_PASS_ENV", "MY_*,PYTHONPATH")
	t.Setenv("ARCHIVEFLOW_FETCH_DENY", "10.0.0.0/8,redis:6379")
	cfg, err := Load(Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{"MY_*", "PYTHONPATH"}, cfg.Hooks.PassEnv)
	assert.Equal(t, []string{"10.0.0.0/8", "redis:6379"}, cfg.Fetch.Deny)

	cfg.Hooks.PassEnv = []string{"*", "1BAD", "OK_*"}
	cfg.Fetch.Deny = []string{"10.0.0.0/99", "http://x/"}
	err = cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{
		`config hooks.pass_env[0] = "*": must not be *`,
		`config hooks.pass_env[1] = "1BAD": must be an environment variable name`,
		`config fetch.deny[0] = "10.0.0.0/99": is not a valid CIDR`,
		`config fetch.deny[1] = "http://x/": must be a host, address or CIDR, not a URL`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "OK_*")
}
