//go:build cluster && race

package cluster

// raceBuild: the test binary runs with -race, so Build builds the suite's
// binaries with -race too (see Build).
const raceBuild = true
