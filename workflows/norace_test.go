//go:build !race

package workflows_test

const raceEnabled = false
