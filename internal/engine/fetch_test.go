package engine

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// withPolicy rebuilds the fixture's engine with a fetch policy.
func (f *fixture) withPolicy(rules ...string) {
	f.t.Helper()
	pol, err := netpolicy.Parse(rules)
	require.NoError(f.t, err)
	e, err := New(Config{PluginDirs: []string{f.plugins}, ArchiveDir: f.archive, Env: []string{"PATH=" + os.Getenv("PATH")},
		Timeout: 30 * time.Second, Grace: 5 * time.Second, LineCap: 1 << 20, Fetch: pol, Log: zap.NewNop()})
	require.NoError(f.t, err)
	f.engine = e
	f.withOptions(testOptions())
}

// readEnv reads an `env > env.txt` dump of plugin.
func (f *fixture) readEnv(plugin string) map[string]string {
	f.t.Helper()
	raw, err := os.ReadFile(filepath.Join(f.archive, "snapshots", "abc123", plugin, "env.txt"))
	require.NoError(f.t, err)
	env := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

func TestHooksGetTheFetchPolicyAndItsProxy(t *testing.T) {
	f := newFixture(t)
	f.withPolicy("169.254.0.0/16", "redis.internal:6379")
	h := f.hook("probe", "on_Snapshot__10_probe.sh", `env > env.txt`)
	_, err := f.run(f.env(), runInput(h))
	require.NoError(t, err)
	env := f.readEnv("probe")
	assert.Equal(t, `["169.254.0.0/16","redis.internal:6379"]`, env["FETCH_DENY"])
	proxy := env["FETCH_PROXY"]
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, proxy)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		assert.Equal(t, proxy, env[k], k)
	}
	assert.Contains(t, env, "NO_PROXY")
	assert.Empty(t, env["NO_PROXY"])
	// The proxy lives as long as the attempt.
	_, err = net.DialTimeout("tcp", strings.TrimPrefix(proxy, "http://"), time.Second)
	assert.Error(t, err, "the attempt's proxy must be closed when the attempt ends")
}

func TestNoPolicyNoProxy(t *testing.T) {
	f := newFixture(t)
	h := f.hook("probe", "on_Snapshot__10_probe.sh", `env > env.txt`)
	_, err := f.run(f.env(), runInput(h))
	require.NoError(t, err)
	env := f.readEnv("probe")
	assert.Equal(t, `[]`, env["FETCH_DENY"])
	for _, k := range []string{"FETCH_PROXY", "HTTP_PROXY", "https_proxy", "NO_PROXY"} {
		assert.NotContains(t, env, k)
	}
}

// TestThirdPartyFetcherGoesThroughThePolicy: a plugin that knows nothing
// of archiveflow (plain wget honouring http_proxy) cannot reach a denied
// port, and the refusal is in the job log with the rule.
func TestThirdPartyFetcherGoesThroughThePolicy(t *testing.T) {
	if _, err := exec.LookPath("wget"); err != nil {
		t.Skip("wget is not installed")
	}
	denied := egresstest.Guard(t)
	f := newFixture(t)
	f.withPolicy(denied.Addr)
	h := f.hook("fetcher", "on_Snapshot__10_fetcher.sh", `wget -q -O page.html --tries=1 "http://`+denied.Addr+`/secret" 2>wget.err
echo '{"type":"ArchiveResult","status":"succeeded"}'`)
	res, err := f.run(f.env(), runInput(h))
	require.NoError(t, err)
	assert.Equal(t, "succeeded", string(res.Status))
	assert.Zero(t, denied.Connections(), "the denied port was connected to")
	var logged []string
	for _, e := range f.store.entries() {
		if e.Kind == activities.LogStdout {
			logged = append(logged, e.Message)
		}
	}
	assert.Contains(t, logged, `archiveflow: fetch of http://`+denied.Addr+`/secret denied by fetch.deny rule "`+denied.Addr+`"`)
}
