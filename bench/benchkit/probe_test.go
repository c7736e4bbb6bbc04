package benchkit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestProbeMeasuresItsOwnWork: the probe's CPU time is that of its work
// (hashing 64 MiB takes well over a millisecond on any machine), not 0.
func TestProbeMeasuresItsOwnWork(t *testing.T) {
	d := Probe()
	assert.Greater(t, d.Milliseconds(), int64(1))
	assert.Less(t, d.Seconds(), 30.0)
}
