//go:build cluster && !race

package cluster

// raceBuild: the test binary runs without -race, so Build builds the
// suite's binaries without it (see Build).
const raceBuild = false
