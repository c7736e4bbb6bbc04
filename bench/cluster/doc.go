// Package cluster owns the throughput benchmark of the production topology:
// the same batch as bench/throughput (snapshots of 20 no-op hooks, 10
// steps × 2, submitted at once) run on the cluster of internal/cluster —
// the real Temporal server binary on PostgreSQL, separate `workers`
// processes, jobs submitted with the `starter` binary — with 1 and 2
// worker processes, reporting hooks/s and where the CPU went (Temporal
// server, PostgreSQL, workers, hooks, Redis). Its figures sit next to the
// embedded server's in docs/benchmarks.md. It needs the `cluster` tag:
//
//	go test -tags cluster -run '^$' -bench ClusterThroughput -benchtime 1x -timeout 60m ./bench/cluster/
package cluster
