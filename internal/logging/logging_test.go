package logging

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestNew(t *testing.T) {
	l, err := New("warn", "json")
	require.NoError(t, err)
	assert.False(t, l.Core().Enabled(zapcore.InfoLevel))
	assert.True(t, l.Core().Enabled(zapcore.WarnLevel))

	_, err = New("loud", "json")
	assert.ErrorContains(t, err, `log level "loud"`)
	_, err = New("info", "xml")
	assert.ErrorContains(t, err, `log format "xml": must be console or json`)
}

func TestFields(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	zap.New(core).Info("x", Ident("abc"), Hook("title/on_Snapshot__50_title.sh"), Attempt(2))
	assert.Equal(t, map[string]any{"ident": "abc", "hook": "title/on_Snapshot__50_title.sh", "attempt": int64(2)},
		logs.All()[0].ContextMap())
}
