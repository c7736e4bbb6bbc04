package devserver_test

import (
	"context"
	"fmt"
	"log"

	"go.temporal.io/sdk/client"

	"github.com/archiveflow/archiveflow/internal/devserver"
)

// A dev server on a persistent data dir, and an SDK client for it.
func ExampleStart() {
	srv, err := devserver.Start(context.Background(), devserver.Options{DataDir: "/var/tmp/archiveflow-temporal"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()

	c, err := client.Dial(client.Options{HostPort: srv.HostPort(), Namespace: srv.Namespace()})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("Temporal at", srv.HostPort(), "- Web UI at", srv.UIURL())
}
