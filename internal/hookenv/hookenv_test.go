package hookenv

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// secretSet is a Secrets for tests: listed names and values.
type secretSet struct{ names, values []string }

func (s secretSet) Reveals(name, value string) bool {
	if slices.Contains(s.names, name) {
		return true
	}
	for _, v := range s.values {
		if strings.Contains(value, v) {
			return true
		}
	}
	return false
}

func TestBuildKeepsOnlyAllowedWorkerVariables(t *testing.T) {
	env, dropped := Build(Sources{
		Worker: []string{"PATH=/bin", "HOME=/h", "LC_ALL=C", "XDG_CACHE_HOME=/c", "TZ=UTC", "TMPDIR=/t",
			"AWS_SECRET_ACCESS_KEY=k", "ARCHIVEFLOW_CONFIG=/etc/af.yaml", "MY_A=1", "MY_B=2", "OTHER=3", "PYTHONPATH=/py",
			"ARCHIVEFLOW_BIN=/usr/bin/af", "=weird", "NOEQUALS"},
		PassEnv: []string{"MY_*", "PYTHONPATH"},
	}, nil)
	assert.Equal(t, []string{"ARCHIVEFLOW_BIN=/usr/bin/af", "HOME=/h", "LC_ALL=C", "MY_A=1", "MY_B=2", "PATH=/bin",
		"PYTHONPATH=/py", "TMPDIR=/t", "TZ=UTC", "XDG_CACHE_HOME=/c"}, env)
	assert.Empty(t, dropped)
}

func TestBuildLaterSourcesWin(t *testing.T) {
	env, _ := Build(Sources{
		Worker: []string{"PATH=/bin", "WGET_BINARY=/from/env"},
		Plugin: []string{"WGET_BINARY=/resolved", "SNAP_DIR="},
		Runner: []string{"SNAP_DIR=/snap", "TIMEOUT=60"},
	}, nil)
	assert.Equal(t, []string{"PATH=/bin", "SNAP_DIR=/snap", "TIMEOUT=60", "WGET_BINARY=/resolved"}, env)
}

// TestSecretsAreFilteredLastFromEverySource: pass_env, a plugin's declared
// key and a runner key cannot bring a secret in.
func TestSecretsAreFilteredLastFromEverySource(t *testing.T) {
	secrets := secretSet{names: []string{"ARCHIVEFLOW_REDIS_URL"}, values: []string{"s3cret"}}
	env, dropped := Build(Sources{
		Worker:  []string{"PATH=/bin", "ARCHIVEFLOW_REDIS_URL=redis://h/0", "MY_URL=redis://:s3cret@h/0"},
		PassEnv: []string{"ARCHIVEFLOW_*", "MY_*"},
		Plugin:  []string{"REDIS_URL=redis://:s3cret@h/0", "WGET_BINARY=wget"},
		Runner:  []string{"EXTRA=has s3cret inside"},
	}, secrets)
	assert.Equal(t, []string{"PATH=/bin", "WGET_BINARY=wget"}, env)
	assert.Equal(t, []Dropped{
		{Name: "ARCHIVEFLOW_REDIS_URL", Source: "worker"},
		{Name: "EXTRA", Source: "runner"},
		{Name: "MY_URL", Source: "worker"},
		{Name: "REDIS_URL", Source: "plugin config"},
	}, dropped)
}

func TestCheckPattern(t *testing.T) {
	for _, ok := range []string{"PATH", "MY_*", "_X", "A1", "lower_case", "X*"} {
		require.NoError(t, CheckPattern(ok), ok)
	}
	for bad, want := range map[string]string{
		"*": "must not be *", "": "environment variable name", "1A": "environment variable name",
		"A-B": "environment variable name", "*A": "environment variable name", "A**": "environment variable name",
		"A=B": "environment variable name",
	} {
		err := CheckPattern(bad)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), want, bad)
	}
}
