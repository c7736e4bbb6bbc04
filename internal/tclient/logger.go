package tclient

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

// Logger adapts zap to the Temporal SDK's structured logger interface.
type Logger struct{ z *zap.SugaredLogger }

var _ log.Logger = (*Logger)(nil)
var _ log.WithLogger = (*Logger)(nil)

// NewLogger wraps z for the Temporal SDK.
func NewLogger(z *zap.Logger) *Logger {
	return &Logger{z: z.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

// Debug logs at debug level with key/value pairs.
func (l *Logger) Debug(msg string, kv ...any) { l.z.Debugw(msg, fixKeys(kv)...) }

// Info logs at info level with key/value pairs.
func (l *Logger) Info(msg string, kv ...any) { l.z.Infow(msg, fixKeys(kv)...) }

// Warn logs at warn level with key/value pairs.
func (l *Logger) Warn(msg string, kv ...any) { l.z.Warnw(msg, fixKeys(kv)...) }

// Error logs at error level with key/value pairs.
func (l *Logger) Error(msg string, kv ...any) { l.z.Errorw(msg, fixKeys(kv)...) }

// With returns a logger with the key/value pairs attached.
func (l *Logger) With(kv ...any) log.Logger { return &Logger{z: l.z.With(fixKeys(kv)...)} }

// fixKeys makes sure every key is a string, as zap's sugared logger requires.
func fixKeys(kv []any) []any {
	out := make([]any, 0, len(kv)+1)
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		if i+1 < len(kv) {
			out = append(out, key, kv[i+1])
		} else {
			out = append(out, "extra", key)
		}
	}
	return out
}
