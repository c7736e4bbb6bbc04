package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRedisWritesRetryPastStartToClose guards the fix found by fault drill
// 3 (docs/reliability.md): the SDK defaults a local activity's
// ScheduleToCloseTimeout to its StartToCloseTimeout, which would cap all
// retries of a Redis write at 30 s and drop the write during a longer
// outage.
func TestRedisWritesRetryPastStartToClose(t *testing.T) {
	o := redisOptions()
	assert.GreaterOrEqual(t, o.ScheduleToCloseTimeout, 365*24*time.Hour, "Redis writes retry (practically) without limit")
	assert.Greater(t, o.ScheduleToCloseTimeout, o.StartToCloseTimeout)
	assert.Zero(t, o.RetryPolicy.MaximumAttempts, "no attempt limit")
}
