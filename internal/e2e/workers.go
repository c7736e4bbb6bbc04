//go:build dev

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/archiveflow/archiveflow/config"
)

// BuildWorkers builds the workers binary (BuildCommand) and returns its
// path.
func BuildWorkers(tb testing.TB) string {
	tb.Helper()
	return BuildCommand(tb, "github.com/archiveflow/archiveflow/workers")
}

// builds are the binaries BuildCommand built in this process, by build
// flags and package, in one temporary directory (RemoveBuilds).
var builds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]*build
}

type build struct {
	n    int // its directory's name
	once sync.Once
	path string
	err  error
}

// BuildCommand builds the main package pkg with the go build flags (e.g.
// "-tags", "dev"; never -race: a binary the tests start is as shipped) and
// returns the binary's path. Each package and flags is built once per
// process, on first use, and shared by every test: a link costs seconds of
// CPU. The binaries are in one temporary directory, which the test
// binary's TestMain removes after the tests (RemoveBuilds).
func BuildCommand(tb testing.TB, pkg string, flags ...string) string {
	tb.Helper()
	bin, err := buildCommand(pkg, flags...)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// buildCommand is BuildCommand without a test.
func buildCommand(pkg string, flags ...string) (string, error) {
	key := strings.Join(append(slices.Clone(flags), pkg), " ")
	builds.mu.Lock()
	if builds.bins == nil {
		builds.bins = map[string]*build{}
	}
	b := builds.bins[key]
	if b == nil {
		b = &build{n: len(builds.bins)}
		builds.bins[key] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() { b.path, b.err = goBuild(pkg, flags, b.n) })
	return b.path, b.err
}

// goBuild builds pkg into the builds' directory as its n-th binary.
func goBuild(pkg string, flags []string, n int) (string, error) {
	builds.mu.Lock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "e2e-builds-")
		if err != nil {
			builds.mu.Unlock()
			return "", fmt.Errorf("go build %s: %w", pkg, err)
		}
		builds.dir = dir
	}
	bin := filepath.Join(builds.dir, strconv.Itoa(n), filepath.Base(pkg))
	builds.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	args := append(append([]string{"build"}, flags...), "-o", bin, pkg)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// RemoveBuilds removes the binaries BuildCommand built (for a TestMain,
// after the tests).
func RemoveBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
		builds.dir, builds.bins = "", nil
	}
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
