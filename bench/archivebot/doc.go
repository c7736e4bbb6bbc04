// Package archivebotbench measures how soon a running job obeys ArchiveBot's
// bot (see settings_bench_test.go; results in docs/benchmarks.md).
package archivebotbench
