// Command starter is the archiveflow CLI: it submits URLs as Temporal
// snapshot workflows and inspects and steers jobs through Temporal and the
// Redis layout (status, list, abort, set, ignore, logs, pipelines). Built
// with `-tags dev` it also runs the whole embedded stack (`starter dev`):
// an in-process Temporal dev server with its Web UI, Redis and every worker
// pool. Run `starter help` for the commands and their exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if code, handled := dispatchHook(os.Args); handled {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newApp(os.Stdin, os.Stdout, os.Stderr).run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
