package logging

import (
	"os"
	"path/filepath"
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

func TestNewFileAppendsWithoutColour(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev.log")
	for _, msg := range []string{"first run", "second run"} {
		l, err := NewFile(path, "info", "console")
		require.NoError(t, err)
		l.Info(msg, Ident("abc"))
		l.Debug("not at info")
		require.NoError(t, l.Sync())
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(data)
	assert.Contains(t, text, "INFO")
	assert.Contains(t, text, "first run")
	assert.Contains(t, text, "second run", "a second logger appends")
	assert.NotContains(t, text, "\x1b[", "no colour codes in a file")
	assert.NotContains(t, text, "not at info")

	_, err = NewFile(path, "loud", "console")
	assert.ErrorContains(t, err, `log level "loud"`)
}
