// Package throughput owns the throughput benchmark of DESIGN.md §7: a batch
// of snapshots of 20 no-op hooks (10 steps × 2) submitted at once to 1, 2
// and 4 separate worker processes on the embedded stack, and, on the same
// server with as many processes, the same number of bare snapshots: a
// trivial workflow of the same shape (benchworker's BareSnapshot: no Redis,
// no hook processes), the platform's ceiling. It reports hooks/s of both
// and their ratio, and per hook: history events, workflow tasks, CPU of the
// Temporal server, the workers, the hook processes and Redis, and Redis
// round trips. It links the Temporal server, so it builds only with
// `-tags dev`:
//
//	go test -tags dev,bench -run '^$' -bench Throughput -benchtime 1x -timeout 60m ./bench/throughput/
//	go test -tags dev,bench -run '^$' -bench Throughput -benchtime 1x ./bench/throughput/ -snapshots 50
//	go test -tags dev,bench -run '^$' -bench 'Throughput/workers=1$' -benchtime 1x ./bench/throughput/ -snapshots 50 -only archiveflow -cpuprofile /tmp/af.cpu
//
// -workerprofile PATH writes each worker process's CPU profile to
// PATH.NAME; -attrdelay D runs archiveflow with job.step_attribute_delay D
// (to size the search-attribute upserts).
package throughput
