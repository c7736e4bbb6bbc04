// Package throughput owns the throughput benchmark of DESIGN.md §7: a batch
// of snapshots of 20 no-op hooks (10 steps × 2) submitted at once to 1, 2
// and 4 separate `workers` processes on the embedded stack, reporting hooks/s,
// snapshots/s and where the CPU went (Temporal server, workers, hooks, Redis).
// It links the Temporal server, so it builds only with `-tags dev`:
//
//	go test -tags dev -run '^$' -bench Throughput -benchtime 1x -timeout 60m ./bench/throughput/
//	go test -tags dev -run '^$' -bench Throughput -benchtime 1x ./bench/throughput/ -snapshots 50
package throughput
