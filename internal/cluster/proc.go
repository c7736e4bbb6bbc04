//go:build dev || cluster

package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Proc is one process the suite started: its output goes to a log file,
// and Wait may be called from any goroutine once.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// Log is the file holding the process's stdout and stderr.
	Log string

	exited  chan struct{}
	waitErr error
}

// procSpec says how to start a Proc.
type procSpec struct {
	name string
	bin  string
	args []string
	env  []string // the whole environment
	dir  string   // working directory
	log  string   // log file (appended to)
	cred *syscall.Credential
}

// start starts the process and a goroutine reaping it.
func start(s procSpec) (*Proc, error) {
	f, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: log file: %w", s.name, err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env, cmd.Dir = s.env, s.dir
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a signal to the test's group (Ctrl-C) does
	// not reach it, the suite stops it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", s.name, s.bin, err)
	}
	p := &Proc{Name: s.name, Cmd: cmd, Log: s.log, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = f.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to be reaped.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop sends SIGTERM and waits up to grace for the exit, then SIGKILL. It
// returns the exit error of a process that did not stop cleanly.
func (p *Proc) Stop(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		var exit *exec.ExitError
		if errors.As(p.waitErr, &exit) && exit.ExitCode() == -1 {
			return nil // died of the SIGTERM itself
		}
		return p.waitErr
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s did not exit within %s of SIGTERM: killed", p.Name, grace)
	}
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	return tailFile(p.Log, n)
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 500 {
			lines[i] = l[:500] + "…" // Temporal's stack traces
		}
	}
	return strings.Join(lines, "\n")
}

// cleanEnv is the environment of the suite's processes: this process's,
// without archiveflow's own settings (a developer's ARCHIVEFLOW_CONFIG must
// not leak in), plus vars, which come last and win.
func cleanEnv(vars ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ARCHIVEFLOW_") {
			env = append(env, kv)
		}
	}
	return append(env, vars...)
}

// logPath is where a process of the suite logs in dir.
func logPath(dir, name string) string { return filepath.Join(dir, name+".log") }
