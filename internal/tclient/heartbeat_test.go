package tclient

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const heartbeat = workflowservice.WorkflowService_RecordActivityTaskHeartbeat_FullMethodName

// call is what the server side of one call saw.
type call struct {
	ctx      context.Context
	deadline time.Time
	// endedWithCaller: the call's context ended when its caller's did.
	endedWithCaller bool
}

// invoked runs heartbeatCalls(timeout) on method, called with a context
// of callerTimeout that is cancelled while the call is in flight, as the
// SDK's is when its throttle interval ends. answers are the server's
// answers to the call's tries, the last one repeated.
func invoked(t *testing.T, method string, timeout, callerTimeout time.Duration, answers ...error) (call, context.Context, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callerTimeout)
	t.Cleanup(cancel)
	var got call
	tries := 0
	err := heartbeatCalls(timeout)(ctx, method, nil, nil, nil, func(c context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		got.ctx = c
		got.deadline, _ = c.Deadline()
		cancel()
		got.endedWithCaller = c.Err() != nil
		tries++
		if len(answers) == 0 {
			return nil
		}
		return answers[min(tries, len(answers))-1]
	})
	return got, ctx, tries, err
}

func TestHeartbeatCallsOutliveTheSDKsThrottleDeadline(t *testing.T) {
	for _, method := range []string{heartbeat, workflowservice.WorkflowService_RecordActivityTaskHeartbeatById_FullMethodName} {
		// The SDK's call context: the 1 s throttle's deadline.
		got, _, _, err := invoked(t, method, HeartbeatCallTimeout, time.Second)
		require.NoError(t, err)
		assert.Greater(t, time.Until(got.deadline), HeartbeatCallTimeout-time.Second, "%s gets HeartbeatCallTimeout", method)
		assert.False(t, got.endedWithCaller, "%s does not end with its caller's context", method)
	}

	// A longer deadline of the caller's is kept, and so is its context.
	got, ctx, _, err := invoked(t, heartbeat, HeartbeatCallTimeout, time.Minute)
	require.NoError(t, err)
	want, _ := ctx.Deadline()
	assert.Equal(t, want, got.deadline)
	assert.True(t, got.endedWithCaller)
}

func TestHeartbeatCallsRetryAnUnavailableServerWithinTheirTime(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "shard moving")
	_, _, tries, err := invoked(t, heartbeat, HeartbeatCallTimeout, time.Second, unavailable, unavailable, nil)
	require.NoError(t, err, "the third try is answered")
	assert.Equal(t, 3, tries)

	// Still unavailable when the time is up: the server's last answer.
	_, _, tries, err = invoked(t, heartbeat, 400*time.Millisecond, 100*time.Millisecond, unavailable)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.GreaterOrEqual(t, tries, 2)

	// Any other answer is the call's answer at once.
	notFound := status.Error(codes.NotFound, "activity not found")
	_, _, tries, err = invoked(t, heartbeat, HeartbeatCallTimeout, time.Second, notFound, nil)
	assert.Equal(t, codes.NotFound, status.Code(err))
	assert.Equal(t, 1, tries)
}

func TestOtherCallsKeepTheirContext(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "down")
	got, ctx, tries, err := invoked(t, workflowservice.WorkflowService_StartWorkflowExecution_FullMethodName, HeartbeatCallTimeout, time.Second, unavailable, nil)
	assert.Equal(t, ctx, got.ctx)
	assert.True(t, got.endedWithCaller)
	assert.Equal(t, codes.Unavailable, status.Code(err), "not retried here (the SDK's own retries)")
	assert.Equal(t, 1, tries)
}
