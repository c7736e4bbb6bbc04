// Package logging builds archiveflow's zap loggers from configuration and
// names the structured fields every component uses (ident, hook, attempt), so
// logs from the worker, the activities and the CLI can be filtered the same way.
package logging

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/archiveflow/archiveflow/config"
)

// New returns a logger writing to stderr at the configured level and format.
func New(c config.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", c.Level, err)
	}
	var zc zap.Config
	switch c.Format {
	case "json":
		zc = zap.NewProductionConfig()
	case "console", "":
		zc = zap.NewDevelopmentConfig()
		zc.DisableStacktrace = true
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	default:
		return nil, fmt.Errorf("log format %q: must be console or json", c.Format)
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.Development = false
	return zc.Build()
}

// Ident is the job ident field.
func Ident(ident string) zap.Field { return zap.String("ident", ident) }

// Hook is the hook file name field.
func Hook(name string) zap.Field { return zap.String("hook", name) }

// Attempt is the activity attempt number field.
func Attempt(n int32) zap.Field { return zap.Int32("attempt", n) }
