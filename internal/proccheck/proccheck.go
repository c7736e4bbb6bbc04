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
}

// Below lists the live (not zombie) hook processes whose working
// directory is root or below it.
func Below(root string) []Proc {
	entries, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		cwd, err := os.Readlink(filepath.Join(dir, "cwd"))
		if err != nil {
			continue
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if cwd != root && !strings.HasPrefix(cwd, root+"/") {
			continue
		}
		if zombie(dir) || !hasMarker(dir) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		out = append(out, Proc{PID: pid, Dir: cwd, Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
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

func hasMarker(procDir string) bool {
	env, err := os.ReadFile(filepath.Join(procDir, "environ"))
	if err != nil {
		return false
	}
	for _, v := range strings.Split(string(env), "\x00") {
		if strings.HasPrefix(v, marker) {
			return true
		}
	}
	return false
}
