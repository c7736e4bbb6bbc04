// Package purgebench measures that purging finished jobs gives Redis its
// memory back (issue 13 scope 4): INFO used_memory and DBSIZE before a
// thousand jobs (logs, results, every tenth a crawl frontier), after them,
// and after their retention and a purge, against a real redis-server.
//
//	go test -run '^$' -bench PurgeMemory -benchtime 1x ./bench/purge/
//
// Results are recorded in docs/benchmarks.md.
package purgebench
