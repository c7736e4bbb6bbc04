// Package proccheck owns the check a test binary makes that no hook
// process outlives it: every hook process carries the runner's
// ARCHIVEFLOW_ATTEMPT_ID marker and works in a directory under the
// binary's temporary directory, so a process with both, still alive once
// the tests are done, was left behind by them. It is for tests only.
package proccheck

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/archiveflow/archiveflow/internal/procs"
)

// marker starts the variable every hook process's environment holds.
const marker = procs.MarkerEnv + "="

// grace is how long hook processes get to end after the tests: a seal's
// or teardown's SIGTERM may still be on its way.
const grace = 15 * time.Second

// Main runs m with TMPDIR set to a directory of its own (every t.TempDir,
// so every snapshot and crawl directory, is below it), then waits up to
// grace for hook processes working below it to end. Any still alive are
// listed on w, killed, and fail the run: the exit code to pass to os.Exit.
func Main(m *testing.M, w io.Writer) int {
	root, err := os.MkdirTemp("", "proccheck-")
	if err != nil {
		fmt.Fprintf(w, "proccheck: %v\n", err)
		return 1
	}
	defer os.RemoveAll(root)
	if err := os.Setenv("TMPDIR", root); err != nil {
		fmt.Fprintf(w, "proccheck: %v\n", err)
		return 1
	}
	code := m.Run()
	deadline := time.Now().Add(grace)
	left := Below(root)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		left = Below(root)
	}
	if len(left) == 0 {
		return code
	}
	fmt.Fprintf(w, "FAIL: %d hook process(es) outlived the tests (left behind; killed now):\n", len(left))
	for _, p := range left {
		fmt.Fprintf(w, "  pid %d: %s (cwd %s)\n", p.PID, p.Cmdline, p.Dir)
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	return 1
}

// Proc is one live hook process.
type Proc struct {
	PID     int
	Dir     string // its working directory
	Cmdline string
	Env     []string // its environment, KEY=VALUE
}

// Below lists the live hook processes whose working directory is root
// or below it.
func Below(root string) []Proc {
	var out []Proc
	for _, p := range Hooks() {
		if p.Dir == root || strings.HasPrefix(p.Dir, root+"/") {
			out = append(out, p)
		}
	}
	return out
}

// WithEnv lists the live hook processes whose environment holds kv
// (KEY=VALUE).
func WithEnv(kv string) []Proc {
	var out []Proc
	for _, p := range Hooks() {
		if slices.Contains(p.Env, kv) {
			out = append(out, p)
		}
	}
	return out
}

// Hooks lists the live (not zombie) hook processes of this machine: those
// whose environment carries the runner's marker.
func Hooks() []Proc {
	entries, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		env, ok := hookEnv(dir)
		if !ok || zombie(dir) {
			continue
		}
		cwd, err := os.Readlink(filepath.Join(dir, "cwd"))
		if err != nil {
			continue // gone, or not ours to read
		}
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		out = append(out, Proc{PID: pid, Dir: strings.TrimSuffix(cwd, " (deleted)"), Env: env,
			Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
	}
	return out
}

func zombie(procDir string) bool {
	stat, err := os.ReadFile(filepath.Join(procDir, "stat"))
	if err != nil {
		return true // gone
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// hookEnv returns a process's environment when it carries the marker.
func hookEnv(procDir string) ([]string, bool) {
	data, err := os.ReadFile(filepath.Join(procDir, "environ"))
	if err != nil {
		return nil, false
	}
	env := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	for _, v := range env {
		if strings.HasPrefix(v, marker) {
			return env, true
		}
	}
	return nil, false
}
