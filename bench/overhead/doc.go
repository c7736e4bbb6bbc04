// Package overhead owns the orchestration-overhead benchmark of DESIGN.md
// §7: a snapshot of 20 hooks over 10 steps (2 per step) on the embedded
// stack (in-process Temporal dev server, real Redis, in-process worker
// pools) against the same hooks run by a shell loop that starts each step's
// hooks in parallel and waits (the physical floor), paired in the same run.
// It links the Temporal server, so it builds only with `-tags dev`:
//
//	go test -tags dev,bench -run '^$' -bench Overhead -benchtime 20x ./bench/overhead/
package overhead
