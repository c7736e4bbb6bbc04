// Package e2e owns the end-to-end harness and tests: a real in-process
// Temporal server (internal/devserver), a real Redis (internal/testredis) and
// real worker pools (internal/pools) running real hook executables, so the
// integration tests and benchmarks exercise archiveflow as it runs in
// production. Everything that links the Temporal server builds only with
// `-tags dev`: go test -race -tags dev ./internal/e2e/
package e2e
