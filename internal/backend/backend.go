// Package backend owns connecting a process to archiveflow's two backends
// from configuration: the Temporal client, and the Redis client with the
// Redis layout store on top. Workers, the starter and the dev stack use it so
// every process maps configuration to connections the same way.
package backend

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/metrics"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/tclient"
)

// Backend holds a process's connections.
type Backend struct {
	Temporal client.Client
	Redis    *redis.Client
	Store    *rkeys.Store
}

// Open connects to Redis and Temporal. The caller closes the Backend.
func Open(ctx context.Context, cfg *config.Config, log *zap.Logger) (*Backend, error) {
	rdb, store, err := OpenRedis(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	tc, err := tclient.Dial(ctx, cfg.Temporal, log)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &Backend{Temporal: tc, Redis: rdb, Store: store}, nil
}

// OpenRedis connects to Redis and builds the layout store.
func OpenRedis(ctx context.Context, cfg *config.Config, log *zap.Logger) (*redis.Client, *rkeys.Store, error) {
	rdb, err := rkeys.Connect(ctx, RedisConn(cfg.Redis))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to Redis: %w", err)
	}
	rdb.AddHook(metrics.RedisHook()) // archiveflow_redis_errors_total
	store, err := rkeys.NewStore(rdb, StoreOptions(cfg), log)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("redis layout: %w", err)
	}
	return rdb, store, nil
}

// Close closes both connections.
func (b *Backend) Close() {
	if b.Temporal != nil {
		b.Temporal.Close()
	}
	if b.Redis != nil {
		_ = b.Redis.Close()
	}
}

// RedisConn maps configuration to connection options.
func RedisConn(c config.Redis) rkeys.ConnOptions {
	o := rkeys.ConnOptions{
		URL:             c.URL,
		Password:        c.Password,
		DB:              0, // the URL's /db path, when present, wins
		DialTimeout:     c.DialTimeout,
		ReadTimeout:     c.ReadTimeout,
		WriteTimeout:    c.WriteTimeout,
		MaxRetries:      c.MaxRetries,
		MinRetryBackoff: c.MinBackoff,
		MaxRetryBackoff: c.MaxBackoff,
	}
	if c.TLS.Enabled || c.TLS.CAFile != "" || c.TLS.CertFile != "" || c.TLS.ServerName != "" || c.TLS.InsecureSkipVerify {
		o.TLS = &rkeys.TLSOptions{
			CAFile:             c.TLS.CAFile,
			CertFile:           c.TLS.CertFile,
			KeyFile:            c.TLS.KeyFile,
			ServerName:         c.TLS.ServerName,
			InsecureSkipVerify: c.TLS.InsecureSkipVerify,
		}
	}
	return o
}

// StoreOptions maps configuration to the Redis layout's options.
func StoreOptions(cfg *config.Config) rkeys.Options {
	c := cfg.Redis
	return rkeys.Options{
		Namespace: c.Namespace,
		LogCap:    c.LogCap,
		PacketCap: c.PacketCap,
		Retention: rkeys.Retention{
			Completed: c.RetainCompleted,
			Aborted:   c.RetainAborted,
			Failed:    c.RetainFailed,
		},
		EventsTTL:           c.EventsTTL,
		AllPageEvents:       c.PageEvents == "all",
		PipelineTTL:         cfg.Worker.PipelineTTL,
		LogBatchWindow:      c.LogBatchWindow,
		OwnResponseCounters: rkeys.Bool(c.ResponseCounters),
	}
}
