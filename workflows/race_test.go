//go:build race

package workflows_test

// raceEnabled: the race detector slows the test suite's workflow
// environment about fivefold; the long crawl tests crawl less under it.
const raceEnabled = true
