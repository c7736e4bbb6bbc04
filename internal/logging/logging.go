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
	zc, err := newConfig(level, format)
	if err != nil {
		return nil, err
	}
	zc.EncoderConfig.EncodeLevel = levelEncoder(format, true)
	return zc.Build()
}

// NewFile returns a logger appending to the file at path (created if
// missing; its directory must exist) at level in format, without colour
// codes. Its own errors go to the same file.
func NewFile(path, level, format string) (*zap.Logger, error) {
	zc, err := newConfig(level, format)
	if err != nil {
		return nil, err
	}
	zc.EncoderConfig.EncodeLevel = levelEncoder(format, false)
	zc.OutputPaths, zc.ErrorOutputPaths = []string{path}, []string{path}
	l, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("log file %s: %w", path, err)
	}
	return l, nil
}

func newConfig(level, format string) (zap.Config, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return zap.Config{}, fmt.Errorf("log level %q: %w", level, err)
	}
	var zc zap.Config
	switch format {
	case "json":
		zc = zap.NewProductionConfig()
	case "console", "":
		zc = zap.NewDevelopmentConfig()
		zc.DisableStacktrace = true
	default:
		return zap.Config{}, fmt.Errorf("log format %q: must be console or json", format)
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Development = false
	return zc, nil
}

// levelEncoder is the level encoder of format; console logs on a
// terminal get coloured levels.
func levelEncoder(format string, colour bool) zapcore.LevelEncoder {
	switch {
	case format == "json":
		return zapcore.LowercaseLevelEncoder
	case colour:
		return zapcore.CapitalColorLevelEncoder
	default:
		return zapcore.CapitalLevelEncoder
	}
}

// Ident is the job ident field.
func Ident(ident string) zap.Field { return zap.String("ident", ident) }

// Hook is the hook file name field.
func Hook(name string) zap.Field { return zap.String("hook", name) }

// Attempt is the hook attempt number field (1-based).
func Attempt(n int) zap.Field { return zap.Int("attempt", n) }
