package procs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// A process found once keeps counting as a leftover until its /proc entry
// says it is gone, even when the scans no longer find it: an exiting
// process loses its environment (the marker) before it becomes a zombie.
func TestSurvivorsKeepsEarlierFoundProcessesUntilGone(t *testing.T) {
	t.Parallel()
	cmd, pf := leftover(t) // no marker: the scans cannot find it
	r := &reaper{markerOnly: true, marker: []byte(MarkerEnv + "=77777777777777777777777777777777"), log: zaptest.NewLogger(t)}
	found := map[int]procRef{pf.Proc.PID: pf.Proc}

	assert.Equal(t, []procRef{pf.Proc}, r.survivors(found))

	require.NoError(t, cmd.Process.Kill())
	_, _ = cmd.Process.Wait()
	assert.Empty(t, r.survivors(found))
	assert.Len(t, found, 1)
}
