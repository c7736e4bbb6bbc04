//go:build dev

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/archiveflow/archiveflow/internal/devserver"
)

// Temporal is the Temporal server a stack connects to: an in-process
// devserver.Server or a ServerProcess.
type Temporal interface {
	HostPort() string
	Namespace() string
}

// ServerProcess is the embedded Temporal dev server in a process of its
// own (internal/devserver/devtemporal), built without -race: a test
// binary built with -race runs its server there instead of instrumenting
// it (seven times the CPU, docs/benchmarks.md §41).
type ServerProcess struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	exited    chan struct{}
	waitErr   error
	hostPort  string
	namespace string
}

// serverStopTimeout bounds Stop's wait for the server process to end
// before it is killed.
const serverStopTimeout = 30 * time.Second

// StartServerProcess builds devtemporal (once per test binary,
// BuildCommand) and starts it; it returns once the server serves. ctx
// bounds the start.
func StartServerProcess(ctx context.Context) (*ServerProcess, error) {
	bin, err := buildCommand("github.com/archiveflow/archiveflow/internal/devserver/devtemporal")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("devtemporal: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("devtemporal: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devtemporal: %w", err)
	}
	p := &ServerProcess{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadBytes('\n')
		var r devserver.Ready
		if err == nil {
			err = json.Unmarshal(line, &r)
		}
		p.hostPort, p.namespace = r.HostPort, r.Namespace
		ready <- err
		_, _ = io.Copy(io.Discard, stdout)
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil && p.hostPort == "" {
		err = errors.New("its ready line names no host_port")
	}
	if err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("devtemporal: not ready: %w", err)
	}
	return p, nil
}

// HostPort is the server's frontend address.
func (p *ServerProcess) HostPort() string { return p.hostPort }

// Namespace is the server's namespace.
func (p *ServerProcess) Namespace() string { return p.namespace }

// Stop closes the server's stdin, which stops it, and waits for it to
// end; after serverStopTimeout it kills it.
func (p *ServerProcess) Stop() error {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(serverStopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("devtemporal: did not stop within %s: killed", serverStopTimeout)
	}
	if p.waitErr != nil {
		return fmt.Errorf("devtemporal: %w", p.waitErr)
	}
	return nil
}
