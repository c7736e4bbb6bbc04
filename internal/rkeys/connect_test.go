package rkeys

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/testredis"
)

func TestConnectPingsServer(t *testing.T) {
	srv := testredis.Start(t)
	ctx := ctxT(t)
	c, err := Connect(ctx, ConnOptions{URL: "redis://" + srv.Addr, DB: 3})
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, 3, c.Options().DB, "DB applies when the URL names none")
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())

	c2, err := Connect(ctx, ConnOptions{URL: "redis://" + srv.Addr + "/2", DB: 3})
	require.NoError(t, err)
	defer c2.Close()
	assert.Equal(t, 2, c2.Options().DB, "the URL's db wins")
}

func TestConnectErrorsNeverShowPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Connect(ctx, ConnOptions{URL: "redis://user:s3cret-pw@127.0.0.1:1/0", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret-pw")
	assert.Contains(t, err.Error(), "redis://user:xxxxx@127.0.0.1:1/0")
	_, err = Connect(ctx, ConnOptions{URL: "redis://127.0.0.1:1/0", Password: "other-secret", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "other-secret")
}

func TestClientOptions(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("nope"), 0o600))
	tests := []struct {
		name string
		o    ConnOptions
		want string
	}{
		{"empty", ConnOptions{}, "must not be empty"},
		{"scheme", ConnOptions{URL: "http://h:1"}, `scheme "http" must be redis or rediss`},
		{"bad db", ConnOptions{URL: "redis://h:1/x"}, "redis url redis://h:1/x"},
		{"negative db", ConnOptions{URL: "redis://h:1", DB: -1}, "redis db -1"},
		{"ca missing", ConnOptions{URL: "rediss://h:1", TLS: &TLSOptions{CAFile: filepath.Join(dir, "missing.pem")}}, "tls ca file"},
		{"ca not pem", ConnOptions{URL: "rediss://h:1", TLS: &TLSOptions{CAFile: notPEM}}, "contains no PEM certificate"},
		{"cert without key", ConnOptions{URL: "rediss://h:1", TLS: &TLSOptions{CertFile: "c.pem"}}, "must be set together"},
		{"backoff", ConnOptions{URL: "redis://h:1", MinRetryBackoff: time.Second, MaxRetryBackoff: time.Millisecond}, "max retry backoff"},
		{"pool", ConnOptions{URL: "redis://h:1", PoolSize: -2}, "pool size -2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := clientOptions(tc.o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	o, err := clientOptions(ConnOptions{URL: "rediss://:pw@cache.example:6380/4", Password: "override",
		TLS: &TLSOptions{ServerName: "redis.internal"}, ReadTimeout: time.Second, MaxRetries: 7})
	require.NoError(t, err)
	require.NotNil(t, o.TLSConfig, "rediss:// enables TLS")
	assert.Equal(t, "redis.internal", o.TLSConfig.ServerName)
	assert.Equal(t, "override", o.Password)
	assert.Equal(t, 4, o.DB)
	assert.Equal(t, time.Second, o.ReadTimeout)
	assert.Equal(t, 5*time.Second, o.DialTimeout)
	assert.Equal(t, 7, o.MaxRetries)
	o, err = clientOptions(ConnOptions{URL: "redis://h:1"})
	require.NoError(t, err)
	assert.Nil(t, o.TLSConfig)
	assert.Equal(t, 3, o.MaxRetries)
}

func TestRedact(t *testing.T) {
	assert.Equal(t, "redis://u:xxxxx@h:1/0", Redact("redis://u:pw@h:1/0"))
	assert.Equal(t, "redis://h:1", Redact("redis://h:1"))
	assert.False(t, strings.Contains(Redact("redis://u:p w%zz@h"), "p w"))
}
