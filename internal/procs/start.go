package procs

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// startBusyWait bounds how long start keeps retrying a hook file that the
// kernel reports busy (ETXTBSY). The state lasts only as long as some
// process holds the file open for writing: an installer still copying the
// plugin, or — in a process that writes executables and forks at the same
// time — a child forked elsewhere that inherited the writer's descriptor
// for the instant before its own exec closes it.
const startBusyWait = 2 * time.Second

// onBusy, when set (by tests), is called each time exec reported the hook
// file busy, before start waits and tries again.
var onBusy func()

// start starts cmd, retrying for up to startBusyWait while exec fails with
// ETXTBSY. A Cmd cannot be started twice, so each retry starts a fresh copy;
// the output files are *os.File and stay open across attempts. It returns
// the Cmd that was started.
func start(ctx context.Context, cmd *exec.Cmd) (*exec.Cmd, error) {
	deadline := time.Now().Add(startBusyWait)
	backoff := 5 * time.Millisecond
	for {
		err := cmd.Start()
		if err == nil || !errors.Is(err, syscall.ETXTBSY) {
			return cmd, err
		}
		if onBusy != nil {
			onBusy()
		}
		if time.Now().Add(backoff).After(deadline) {
			return cmd, fmt.Errorf("%w (the file was still open for writing after %s)", err, startBusyWait)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return cmd, fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
		backoff = min(2*backoff, 200*time.Millisecond)
		cmd = fresh(cmd)
	}
}

// fresh returns an unstarted copy of cmd.
func fresh(cmd *exec.Cmd) *exec.Cmd {
	return &exec.Cmd{
		Path:        cmd.Path,
		Args:        cmd.Args,
		Env:         cmd.Env,
		Dir:         cmd.Dir,
		Stdout:      cmd.Stdout,
		Stderr:      cmd.Stderr,
		SysProcAttr: cmd.SysProcAttr,
	}
}
