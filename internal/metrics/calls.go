package metrics

import (
	"context"
	"errors"
	"net"
	"path"
	"strings"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

var (
	redisErrors = counterVec("redis_errors_total",
		"Failed Redis calls of this process, by command (lower case; dial for a failed connection) and kind: reply (Redis answered with an error) or io (no answer: network, timeout, cancelled). A missing key (redis.Nil), a script not yet cached (NOSCRIPT, retried with EVAL) and the connection handshake's HELLO and CLIENT (an older server's refusal is ignored) are not counted.",
		"command", "kind")
	temporalErrors = counterVec("temporal_errors_total",
		"Failed Temporal gRPC calls of this process (client and worker), by RPC method and gRPC code.",
		"method", "code")
)

// RedisHook counts failed Redis calls; add it to every client
// (redis.Client.AddHook).
func RedisHook() redis.Hook { return redisHook{} }

type redisHook struct{}

func (redisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			redisErrors.WithLabelValues("dial", "io").Inc()
		}
		return c, err
	}
}

func (redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		countRedis(cmd.Name(), err)
		return err
	}
}

func (redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			countRedis(cmd.Name(), cmd.Err())
		}
		return err
	}
}

// countRedis counts a command that failed with err. The connection
// handshake's HELLO and CLIENT, whose refusal by an older server go-redis
// ignores, are not counted.
func countRedis(name string, err error) {
	if err == nil || errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "NOSCRIPT") || name == "hello" || name == "client" {
		return
	}
	kind := "io"
	var reply redis.Error
	if errors.As(err, &reply) {
		kind = "reply"
	}
	redisErrors.WithLabelValues(strings.ToLower(name), kind).Inc()
}

// TemporalInterceptor counts failed Temporal calls; the Temporal client's
// connection chains it (tclient.Options).
func TemporalInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		temporalErrors.WithLabelValues(path.Base(method), status.Code(err).String()).Inc()
	}
	return err
}
