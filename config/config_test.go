package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inTempDir runs the test in an empty directory so no archiveflow.yaml leaks in.
func inTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	return dir
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	return path
}

func TestDefaultsAreValid(t *testing.T) {
	inTempDir(t)
	cfg, err := Load(Options{})
	require.NoError(t, err)
	assert.Equal(t, Default(), *cfg)
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	dir := inTempDir(t)
	file := writeFile(t, filepath.Join(dir, "af.yaml"), `
archive_dir: /from/file
redis:
  namespace: filens
  log_cap: 500
hooks:
  timeout: 90s
plugins:
  values:
    WGET_TIMEOUT: 120
`)
	t.Setenv("ARCHIVEFLOW_REDIS_NAMESPACE", "envns")
	t.Setenv("ARCHIVEFLOW_HOOKS_GRACE", "3s")
	t.Setenv("ARCHIVEFLOW_JOB_SEQUENTIAL_STEPS", "4,5")

	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs)
	require.NoError(t, fs.Parse([]string{"--config", file, "--redis-namespace", "flagns", "--plugins-dir", "/a", "--plugins-dir", "/b"}))

	cfg, err := Load(Options{Flags: fs})
	require.NoError(t, err)
	assert.Equal(t, "/from/file", cfg.ArchiveDir, "file beats default")
	assert.Equal(t, 500, cfg.Redis.LogCap, "file beats default")
	assert.Equal(t, 90*time.Second, cfg.Hooks.Timeout)
	assert.Equal(t, 3*time.Second, cfg.Hooks.Grace, "env beats default")
	assert.Equal(t, []int{4, 5}, cfg.Job.SequentialSteps, "comma list from env")
	assert.Equal(t, "flagns", cfg.Redis.Namespace, "flag beats env and file")
	assert.Equal(t, []string{"/a", "/b"}, cfg.Plugins.Dirs)
	assert.True(t, cfg.Plugins.Builtin, "the built-in set stays first unless disabled")
	assert.EqualValues(t, 120, cfg.Plugins.Values["wget_timeout"], "viper lower-cases map keys")
	assert.Equal(t, Default().Redis.URL, cfg.Redis.URL, "untouched keys keep defaults")
}

// hooks.retry_later is a list of delays, off by default, overridden per
// plugin (an empty list turns it off for that plugin).
func TestRetryLaterDelaysPerPlugin(t *testing.T) {
	assert.Empty(t, Default().Hooks.RetryLater, "later retries are off by default")
	dir := inTempDir(t)
	writeFile(t, filepath.Join(dir, DefaultFile), `
hooks:
  retry_later: [10m, 1h, 6h]
  retry_later_plugins:
    screenshot: [30s]
    title: []
`)
	cfg, err := Load(Options{})
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{10 * time.Minute, time.Hour, 6 * time.Hour}, cfg.Hooks.RetryLaterFor("wget"))
	assert.Equal(t, []time.Duration{30 * time.Second}, cfg.Hooks.RetryLaterFor("screenshot"))
	assert.Empty(t, cfg.Hooks.RetryLaterFor("title"))
}

func TestDefaultFileInWorkingDir(t *testing.T) {
	dir := inTempDir(t)
	writeFile(t, filepath.Join(dir, DefaultFile), "archive_dir: /wd\n")
	cfg, err := Load(Options{})
	require.NoError(t, err)
	assert.Equal(t, "/wd", cfg.ArchiveDir)
}

func TestConfigEnvVarNamesFile(t *testing.T) {
	dir := inTempDir(t)
	t.Setenv("ARCHIVEFLOW_CONFIG", writeFile(t, filepath.Join(dir, "x.yaml"), "archive_dir: /envfile\n"))
	cfg, err := Load(Options{})
	require.NoError(t, err)
	assert.Equal(t, "/envfile", cfg.ArchiveDir)
}

func TestPoolsFromJSONEnv(t *testing.T) {
	inTempDir(t)
	t.Setenv("ARCHIVEFLOW_POOLS", `[{"name":"fast","task_queue":"archiveflow","slots":2},{"name":"browser","task_queue":"browser","slots":1}]`)
	cfg, err := Load(Options{})
	require.NoError(t, err)
	require.Len(t, cfg.Pools, 2)
	assert.Equal(t, Pool{Name: "browser", TaskQueue: "browser", Slots: 1}, cfg.Pools[1])
	p, ok := cfg.Pool("fast")
	assert.True(t, ok)
	assert.Equal(t, 2, p.Slots)
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		env     map[string]string
		wantErr []string
	}{
		{name: "unknown key", file: "redis:\n  urll: redis://x:1\n", wantErr: []string{"urll"}},
		{name: "bad yaml", file: "redis: [\n", wantErr: []string{"af.yaml"}},
		{name: "bad duration", env: map[string]string{"ARCHIVEFLOW_HOOKS_TIMEOUT": "soon"}, wantErr: []string{"hooks.timeout", "soon"}},
		{name: "bad int", env: map[string]string{"ARCHIVEFLOW_REDIS_LOG_CAP": "many"}, wantErr: []string{"log_cap", "many"}},
		{name: "bad json", env: map[string]string{"ARCHIVEFLOW_POOLS": `[{"name":`}, wantErr: []string{"looks like JSON"}},
		{name: "negative log cap", file: "redis:\n  log_cap: -5\n", wantErr: []string{"config redis.log_cap = -5: must be >= 1"}},
		{name: "unknown compression", file: "temporal:\n  compression: zstd\n", wantErr: []string{`config temporal.compression = "zstd": must be one of none, gzip`}},
		{name: "negative step attribute delay", file: "job:\n  step_attribute_delay: -1s\n", wantErr: []string{"config job.step_attribute_delay = -1s: must be >= 0 (0 = show every step at once)"}},
		{name: "several problems at once", file: "log:\n  level: loud\njob:\n  concurrency: -1\n  fetch_depth: deep\n",
			wantErr: []string{`log.level = "loud": must be one of debug, info, warn, error`, "job.concurrency = -1", `job.fetch_depth = "deep"`}},
		{name: "sequential step out of range", env: map[string]string{"ARCHIVEFLOW_JOB_SEQUENTIAL_STEPS": "5,12"}, wantErr: []string{"job.sequential_steps[1] = 12: must be a step from 0 to 9"}},
		{name: "bad redis url hides password", env: map[string]string{"ARCHIVEFLOW_REDIS_URL": "http://u:hunter2@h:1"}, wantErr: []string{"redis.url", "xxxxx"}},
		{name: "bad host port", env: map[string]string{"ARCHIVEFLOW_TEMPORAL_HOST_PORT": "nohost"}, wantErr: []string{`temporal.host_port = "nohost": must be host:port`}},
		{name: "metrics address without port", env: map[string]string{"ARCHIVEFLOW_METRICS_LISTEN": "localhost"}, wantErr: []string{`config metrics.listen = "localhost": must be host:port or :port`}},
		{name: "metrics port out of range", file: "metrics: {listen: \":70000\"}\n", wantErr: []string{`config metrics.listen = ":70000"`}},
		{name: "zero settings poll interval", file: "hooks:\n  settings_poll_interval: 0s\n", wantErr: []string{"config hooks.settings_poll_interval = 0s: must be a positive duration"}},
		{name: "heartbeat timeout too short", file: "hooks:\n  heartbeat_interval: 5s\n  heartbeat_timeout: 5s\n", wantErr: []string{"hooks.heartbeat_timeout"}},
		{name: "zero later-retry delay", file: "hooks:\n  retry_later: [10m, 0s]\n", wantErr: []string{"config hooks.retry_later[1] = 0s: must be a positive duration"}},
		{name: "negative per-plugin later-retry delay", file: "hooks:\n  retry_later_plugins:\n    wget: [-1m]\n", wantErr: []string{"config hooks.retry_later_plugins.wget[0] = -1m0s: must be a positive duration"}},
		{name: "retry override", file: "retry:\n  plugins:\n    wget:\n      backoff_coefficient: 0.5\n", wantErr: []string{"retry.plugins.wget.backoff_coefficient = 0.5: must be >= 1"}},
		{name: "duplicate pool", file: "pools:\n- {name: a, task_queue: archiveflow, slots: 1}\n- {name: a, task_queue: q, slots: 0}\n",
			wantErr: []string{`pools[1].name = "a": must be unique`, "pools[1].slots = 0: must be >= 1"}},
		{name: "job queue without pool", file: "job:\n  task_queue: nowhere\n", wantErr: []string{"job.task_queue = nowhere: must be the task_queue of a configured pool"}},
		{name: "worker pool unknown", env: map[string]string{"ARCHIVEFLOW_WORKER_POOLS": "ghost"}, wantErr: []string{`worker.pools[0] = "ghost": must name a configured pool`}},
		{name: "fraction for an integer", file: "pools:\n- {name: a, task_queue: archiveflow, slots: 2.5}\n", wantErr: []string{"pools[0].slots", "2.5 is not an integer"}},
		{name: "fraction for an integer key", file: "redis:\n  log_cap: 10.5\n", wantErr: []string{"log_cap", "10.5 is not an integer"}},
		{name: "bare number for a duration", file: "hooks:\n  timeout: 30\n", wantErr: []string{"timeout", "30 is a bare number, not a duration", "30s"}},
		{name: "no plugins at all", env: map[string]string{"ARCHIVEFLOW_PLUGINS_BUILTIN": "false"}, wantErr: []string{"plugins.dirs = []: must list at least one plugin root when plugins.builtin is false"}},
		{name: "flapjack thresholds", file: "flapjack: {ok_after: 0, critical_after: -1, history_cap: 0, maintenance_poll: 0s}\n",
			wantErr: []string{"flapjack.ok_after = 0: must be >= 1", "flapjack.critical_after = -1: must be >= 1", "flapjack.history_cap = 0: must be >= 1", "flapjack.maintenance_poll = 0s"}},
		{name: "flapjack webhook malformed", env: map[string]string{"ARCHIVEFLOW_FLAPJACK_WEBHOOK": "ftp://x/hook"}, wantErr: []string{`config flapjack.webhook = "ftp://x/hook": must be an http(s) URL`}},
		{name: "flapjack webhook denied", env: map[string]string{"ARCHIVEFLOW_FLAPJACK_WEBHOOK": "http://169.254.169.254/hook"}, wantErr: []string{`config flapjack.webhook = "http://169.254.169.254/hook": must not be denied by fetch.deny rule "169.254.0.0/16"`}},
		{name: "tls pair", file: "redis:\n  tls:\n    cert_file: /c.pem\n", wantErr: []string{"redis.tls.cert_file", "set together"}},
		{name: "hook limits", file: "hooks:\n  limits: {max_memory: 512M, max_cpu_seconds: -1, max_open_files: -1, max_processes: -2, cgroup: rel/dir}\n",
			wantErr: []string{`hooks.limits.max_memory = 512M: must be a size with a unit`, "write 512MiB (powers of 1024) or 512MB",
				"hooks.limits.max_cpu_seconds = -1", "hooks.limits.max_open_files = -1", "hooks.limits.max_processes = -2", `hooks.limits.cgroup = rel/dir`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := inTempDir(t)
			opts := Options{}
			if tc.file != "" {
				opts.File = writeFile(t, filepath.Join(dir, "af.yaml"), tc.file)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := Load(opts)
			require.Error(t, err)
			for _, want := range tc.wantErr {
				assert.Contains(t, err.Error(), want)
			}
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}

// TestMetricsListen: off by default; an address without host is loopback.
func TestMetricsListen(t *testing.T) {
	assert.Empty(t, Default().Metrics.Listen, "no endpoint unless configured")
	assert.Empty(t, Default().Metrics.Addr())
	inTempDir(t)
	for listen, addr := range map[string]string{":9464": "127.0.0.1:9464", "0.0.0.0:9464": "0.0.0.0:9464", "[::1]:0": "[::1]:0", "metrics.internal:9464": "metrics.internal:9464"} {
		t.Setenv("ARCHIVEFLOW_METRICS_LISTEN", listen)
		cfg, err := Load(Options{})
		require.NoError(t, err, listen)
		assert.Equal(t, addr, cfg.Metrics.Addr(), listen)
	}
}

func TestMissingExplicitFile(t *testing.T) {
	inTempDir(t)
	_, err := Load(Options{File: "/nonexistent/af.yaml"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/af.yaml")
}

func TestPolicyFor(t *testing.T) {
	r := Default().Retry
	r.Plugins = map[string]RetryPolicy{"wget": {MaximumAttempts: 7}}
	assert.Equal(t, 7, r.PolicyFor("wget").MaximumAttempts)
	assert.Equal(t, r.InitialInterval, r.PolicyFor("wget").InitialInterval, "zero fields inherit")
	assert.Equal(t, 3, r.PolicyFor("title").MaximumAttempts)
}

func TestRedactURL(t *testing.T) {
	assert.Equal(t, "redis://:xxxxx@h:6379/0", RedactURL("redis://:secret@h:6379/0"))
	assert.Equal(t, "redis://h:6379", RedactURL("redis://h:6379"))
}

func TestHookLimits(t *testing.T) {
	inTempDir(t)
	d := Default()
	assert.Equal(t, HookLimits{}, d.Hooks.Limits, "no limit unless configured")
	n, err := d.Hooks.Limits.MaxMemoryBytes()
	require.NoError(t, err)
	assert.Zero(t, n)

	t.Setenv("ARCHIVEFLOW_HOOKS_LIMITS_MAX_MEMORY", "512MiB")
	t.Setenv("ARCHIVEFLOW_HOOKS_LIMITS_MAX_PROCESSES", "200")
	t.Setenv("ARCHIVEFLOW_HOOKS_LIMITS_CGROUP", "none")
	cfg, err := Load(Options{})
	require.NoError(t, err)
	n, err = cfg.Hooks.Limits.MaxMemoryBytes()
	require.NoError(t, err)
	assert.Equal(t, int64(512<<20), n)
	assert.Equal(t, 200, cfg.Hooks.Limits.MaxProcesses)
	assert.Equal(t, "none", cfg.Hooks.Limits.Cgroup)
}
