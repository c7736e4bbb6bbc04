// Package redisbench holds the Redis layout benchmarks (see
// redis_bench_test.go and docs/redis-layout.md for the recorded numbers).
package redisbench
