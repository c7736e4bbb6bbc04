package devserver

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// withMinLevel returns log restricted to entries at or above min, which
// may change at run time. Unlike zap.IncreaseLevel it also accepts a
// logger that is already stricter than min (it then stays as strict).
func withMinLevel(log *zap.Logger, min zap.AtomicLevel) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return &minLevelCore{Core: c, min: min}
	}))
}

// minLevelCore drops entries below a dynamic minimum level.
type minLevelCore struct {
	zapcore.Core
	min zap.AtomicLevel
}

func (c *minLevelCore) Enabled(l zapcore.Level) bool {
	return c.min.Enabled(l) && c.Core.Enabled(l)
}

func (c *minLevelCore) With(fields []zapcore.Field) zapcore.Core {
	return &minLevelCore{Core: c.Core.With(fields), min: c.min}
}

func (c *minLevelCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.min.Enabled(e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}
