// Package frontierbench holds the crawl frontier's Redis memory benchmark
// (DESIGN.md §7: at most 300 bytes of Redis memory per discovered URL):
// a generated 100,000-URL site crawled through internal/frontier against a
// real redis-server, its keys measured with MEMORY USAGE and INFO.
//
//	go test -run '^$' -bench FrontierMemory -benchtime 1x -timeout 30m ./bench/frontier/
//
// Results are recorded in docs/benchmarks.md.
package frontierbench
