package logging

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"

	"github.com/archiveflow/archiveflow/config"
)

func TestNew(t *testing.T) {
	l, err := New(config.Log{Level: "warn", Format: "json"})
	require.NoError(t, err)
	assert.False(t, l.Core().Enabled(zapcore.InfoLevel))
	assert.True(t, l.Core().Enabled(zapcore.WarnLevel))

	_, err = New(config.Log{Level: "loud", Format: "json"})
	assert.ErrorContains(t, err, `log level "loud"`)
	_, err = New(config.Log{Level: "info", Format: "xml"})
	assert.ErrorContains(t, err, `log format "xml": must be console or json`)
}
