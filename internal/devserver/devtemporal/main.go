// Command devtemporal runs the embedded Temporal dev server (package
// devserver, in memory, no Web UI) in a process of its own, for test
// binaries built with -race: in theirs, the server's code is instrumented
// too and costs about seven times the CPU (docs/benchmarks.md §41), though
// it shares no memory with the code under test, only gRPC on loopback.
//
// Once the server serves, it prints one JSON line on stdout
// (devserver.Ready: {"host_port":"127.0.0.1:PORT","namespace":"default"}),
// and it serves until
// its stdin closes (the test binary ended, however it ended) or it gets
// SIGTERM or SIGINT; then it stops the server and exits 0. It exits 1 with
// the reason on stderr when the server cannot start.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/devserver"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "devtemporal: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI, Log: zap.NewNop()})
	if err != nil {
		return err
	}
	line, err := json.Marshal(devserver.Ready{HostPort: srv.HostPort(), Namespace: srv.Namespace()})
	if err == nil {
		_, err = fmt.Printf("%s\n", line)
	}
	if err != nil {
		_ = srv.Stop()
		return fmt.Errorf("print the ready line: %w", err)
	}
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-ctx.Done():
	case <-stdinClosed:
	}
	return srv.Stop()
}
