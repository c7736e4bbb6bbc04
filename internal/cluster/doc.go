// Package cluster owns the cluster suite: archiveflow's production topology
// run for real on one machine, without Docker. It starts PostgreSQL from
// the distribution's binaries (a throwaway cluster on loopback), creates
// Temporal's schemas with the SQL schema tool and starts the real Temporal
// server binary (all services, PostgreSQL persistence and SQL visibility),
// both built from go.temporal.io/server at go.mod's version and configured
// by docker-compose.yml's own settings (internal/composefile), registers
// the namespace and search attributes as the compose setup service does, and
// runs a real redis-server, separate `workers` processes and the `starter`
// CLI exactly as an operator would. The tests drive it through the CLI and
// check Redis counters exactly while worker processes and the Temporal
// server are killed.
//
// Everything but this comment builds only with the `dev` tag (the suite is
// part of the README's test command, `go test -race -tags dev ./...`) or
// the `cluster` tag (the suite alone). The suite builds its binaries
// without -race (after `go build ./...` only a few packages are left to
// compile; see Build) and needs /usr/lib/postgresql/NN/bin, redis-server
// and chromium. Without PostgreSQL it skips, saying why, unless
// ARCHIVEFLOW_REQUIRE_POSTGRES=1 (CI) makes that a failure. Alone:
//
//	go test -tags cluster -timeout 20m ./internal/cluster/
package cluster
