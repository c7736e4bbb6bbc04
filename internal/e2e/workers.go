//go:build dev

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/archiveflow/archiveflow/config"
)

// BuildWorkers builds the workers binary into a temporary directory of tb
// and returns its path.
func BuildWorkers(tb testing.TB) string {
	tb.Helper()
	return BuildCommand(tb, "github.com/archiveflow/archiveflow/workers")
}

// BuildCommand builds the main package pkg into a temporary directory of
// tb and returns the binary's path.
func BuildCommand(tb testing.TB, pkg string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		tb.Fatalf("go build %s: %v: %s", pkg, err, out)
	}
	return bin
}

// StartWorker runs one workers process for cfg's pools, configured through
// ARCHIVEFLOW_* env vars, with its own archive dir (archives are per host);
// extraEnv entries come last and win. It stops the process (SIGTERM, wait)
// when tb ends and prints its log if tb failed.
func StartWorker(tb testing.TB, bin string, cfg *config.Config, name string, extraEnv ...string) *exec.Cmd {
	tb.Helper()
	return StartWorkerArgs(tb, bin, cfg, name, nil, extraEnv...)
}

// StartWorkerArgs is StartWorker with the workers command's flags args
// (e.g. --tag T).
func StartWorkerArgs(tb testing.TB, bin string, cfg *config.Config, name string, args []string, extraEnv ...string) *exec.Cmd {
	tb.Helper()
	pools, err := json.Marshal(cfg.Pools)
	if err != nil {
		tb.Fatalf("encode pools: %v", err)
	}
	logFile, err := os.Create(filepath.Join(tb.TempDir(), name+".log"))
	if err != nil {
		tb.Fatalf("create worker log: %v", err)
	}
	cmd := exec.Command(bin, append([]string{"--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(),
		"ARCHIVEFLOW_TEMPORAL_HOST_PORT="+cfg.Temporal.HostPort,
		"ARCHIVEFLOW_TEMPORAL_NAMESPACE="+cfg.Temporal.Namespace,
		"ARCHIVEFLOW_REDIS_URL="+cfg.Redis.URL,
		"ARCHIVEFLOW_POOLS="+string(pools),
		"ARCHIVEFLOW_JOB_TASK_QUEUE="+cfg.Job.TaskQueue,
		"ARCHIVEFLOW_PLUGINS_DIRS="+strings.Join(cfg.Plugins.Dirs, ","),
		"ARCHIVEFLOW_PLUGINS_BUILTIN="+strconv.FormatBool(cfg.Plugins.Builtin),
		"ARCHIVEFLOW_ARCHIVE_DIR="+filepath.Join(tb.TempDir(), name),
		"ARCHIVEFLOW_HOOKS_TIMEOUT="+cfg.Hooks.Timeout.String(),
		"ARCHIVEFLOW_HOOKS_GRACE="+cfg.Hooks.Grace.String(),
		"ARCHIVEFLOW_HOOKS_HEARTBEAT_INTERVAL="+cfg.Hooks.HeartbeatInterval.String(),
		"ARCHIVEFLOW_HOOKS_HEARTBEAT_TIMEOUT="+cfg.Hooks.HeartbeatTimeout.String(),
		"ARCHIVEFLOW_WORKER_DRAIN_TIMEOUT=1s",
		"ARCHIVEFLOW_WORKER_NICKNAME="+name,
		"ARCHIVEFLOW_HOOKS_PASS_ENV="+strings.Join(cfg.Hooks.PassEnv, ","),
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start worker %s: %v", name, err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logFile.Close()
		if tb.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			tb.Logf("%s log:\n%s", name, b)
		}
	})
	return cmd
}
