// Package logging builds archiveflow's zap loggers from the configured level
// and format and names the structured fields every component uses (ident,
// hook, attempt), so logs from the worker, the activities and the CLI can be
// filtered the same way. It depends on nothing of archiveflow's, so every
// package may use its fields.
package logging

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger writing to stderr at level (config log.level) in
// format (config log.format: console or json).
func New(level, format string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	var zc zap.Config
	switch format {
	case "json":
		zc = zap.NewProductionConfig()
	case "console", "":
		zc = zap.NewDevelopmentConfig()
		zc.DisableStacktrace = true
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	default:
		return nil, fmt.Errorf("log format %q: must be console or json", format)
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Development = false
	return zc.Build()
}

// Ident is the job ident field.
func Ident(ident string) zap.Field { return zap.String("ident", ident) }

// Hook is the hook file name field.
func Hook(name string) zap.Field { return zap.String("hook", name) }

// Attempt is the hook attempt number field (1-based).
func Attempt(n int) zap.Field { return zap.Int("attempt", n) }
