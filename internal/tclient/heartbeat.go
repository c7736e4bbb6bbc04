package tclient

import (
	"context"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// HeartbeatCallTimeout is how long a worker's activity heartbeat call may
// take, retries included: the SDK's own timeout for every other call.
//
// The SDK bounds a heartbeat call by the worker's heartbeat throttle
// (pools.WorkerOptions sets it to 1 s, so a cancellation reaches a hook
// within a second) and, when the call fails or runs out of time, cancels
// the activity as if the server had timed it out. A server that answered
// one heartbeat in 1.5 s, or was unavailable for 2 s (a busy history
// shard, a shard moving to another process, a frontend restarting),
// would so kill a healthy hook mid-run and cost its job an attempt. A
// server that really lost the attempt says so in its answer (NotFound),
// and that still cancels the hook.
const HeartbeatCallTimeout = 10 * time.Second

// heartbeatMethods are the calls heartbeatCalls applies to.
var heartbeatMethods = map[string]bool{
	workflowservice.WorkflowService_RecordActivityTaskHeartbeat_FullMethodName:     true,
	workflowservice.WorkflowService_RecordActivityTaskHeartbeatById_FullMethodName: true,
}

// heartbeatCalls gives heartbeat calls timeout from the time they start,
// in place of a shorter deadline from the SDK, and retries them within it
// while the server is Unavailable; other calls pass unchanged. The call no
// longer ends with its caller's context: the SDK cancels that context
// when its throttle interval ends.
func heartbeatCalls(timeout time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !heartbeatMethods[method] {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < timeout {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
		}
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if status.Code(err) != codes.Unavailable {
				return err
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
}
