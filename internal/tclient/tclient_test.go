package tclient

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/archiveflow/archiveflow/config"
)

func TestOptions(t *testing.T) {
	c := config.Default().Temporal
	c.APIKey = "k"
	opts, err := Options(c, zap.NewNop())
	require.NoError(t, err)
	assert.Equal(t, c.HostPort, opts.HostPort)
	assert.Equal(t, "default", opts.Namespace)
	assert.NotNil(t, opts.Credentials)
	assert.Nil(t, opts.ConnectionOptions.TLS)
	assert.Equal(t, &client.GrpcCompressionNone{}, opts.ConnectionOptions.GrpcCompression, "the default")

	c.Compression = "gzip"
	opts, err = Options(c, zap.NewNop())
	require.NoError(t, err)
	assert.Equal(t, &client.GrpcCompressionGzip{}, opts.ConnectionOptions.GrpcCompression)
	c.Compression = "zstd"
	_, err = Options(c, zap.NewNop())
	assert.ErrorContains(t, err, `temporal.compression "zstd": must be none or gzip`)
}

func TestTLSErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a cert"), 0o600))
	c := config.Default().Temporal
	c.TLS = config.TLS{Enabled: true, CAFile: bad}
	_, err := Options(c, zap.NewNop())
	assert.ErrorContains(t, err, "temporal.tls: ca_file "+bad+": no PEM certificates found")

	c.TLS = config.TLS{Enabled: true, CAFile: filepath.Join(dir, "missing.pem")}
	_, err = Options(c, zap.NewNop())
	assert.ErrorContains(t, err, "read ca_file")

	c.TLS = config.TLS{Enabled: true, ServerName: "temporal.example"}
	opts, err := Options(c, zap.NewNop())
	require.NoError(t, err)
	assert.Equal(t, "temporal.example", opts.ConnectionOptions.TLS.ServerName)
}

func TestLoggerKeys(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	l := NewLogger(zap.New(core))
	l.With("Namespace", "default").Info("hello", "WorkflowID", "abc", 7, "seven", "dangling")
	require.Equal(t, 1, logs.Len())
	ctx := logs.All()[0].ContextMap()
	assert.Equal(t, "default", ctx["Namespace"])
	assert.Equal(t, "abc", ctx["WorkflowID"])
	assert.Equal(t, "seven", ctx["7"])
	assert.Equal(t, "dangling", ctx["extra"])
}
