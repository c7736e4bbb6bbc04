// Package tclient owns the Temporal client connection built from
// configuration: host, namespace, TLS, API key, the zap-backed SDK logger,
// the interceptor counting failed calls (internal/metrics) and the time a
// heartbeat call may take (HeartbeatCallTimeout).
// Workers, the starter and integration tests dial Temporal through it.
package tclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/metrics"
)

// Dial connects to Temporal as configured and checks the connection.
func Dial(ctx context.Context, c config.Temporal, log *zap.Logger) (client.Client, error) {
	opts, err := Options(c, log)
	if err != nil {
		return nil, err
	}
	cl, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w", c.HostPort, c.Namespace, err)
	}
	return cl, nil
}

// Options builds client options from configuration.
func Options(c config.Temporal, log *zap.Logger) (client.Options, error) {
	opts := client.Options{
		HostPort:  c.HostPort,
		Namespace: c.Namespace,
		Logger:    NewLogger(log.WithOptions(zap.IncreaseLevel(zap.WarnLevel))),
		// Failed calls are counted (archiveflow_temporal_errors_total);
		// heartbeat calls get HeartbeatCallTimeout.
		ConnectionOptions: client.ConnectionOptions{
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(metrics.TemporalInterceptor, heartbeatCalls(HeartbeatCallTimeout))},
		},
	}
	switch c.Compression {
	case "none":
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	case "gzip":
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionGzip{}
	default:
		return client.Options{}, fmt.Errorf("temporal.compression %q: must be none or gzip", c.Compression)
	}
	if c.TLS.Enabled || c.TLS.CAFile != "" || c.TLS.CertFile != "" {
		tc, err := TLSConfig(c.TLS)
		if err != nil {
			return client.Options{}, fmt.Errorf("temporal.tls: %w", err)
		}
		opts.ConnectionOptions.TLS = tc
	}
	if c.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(c.APIKey)
	}
	return opts, nil
}

// TLSConfig builds a client TLS configuration from files.
func TLSConfig(t config.TLS) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // operator's explicit choice
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificates found", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
