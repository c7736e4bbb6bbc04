// Package memory owns the worker-memory benchmark of DESIGN.md §7: the RSS
// of a separate `workers` process while one hook prints 1 GiB (to stdout,
// and to stderr, which is streamed into the Redis job log) and while 50
// background hooks run at once. It links the Temporal server, so it builds
// only with `-tags dev`:
//
//	go test -tags dev,bench -run '^$' -bench Memory -benchtime 1x ./bench/memory/
package memory
