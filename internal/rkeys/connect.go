package rkeys

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// TLSOptions configure TLS beyond what a rediss:// URL implies.
type TLSOptions struct {
	CAFile             string // PEM bundle of trusted CAs (default: system pool)
	CertFile, KeyFile  string // client certificate for mutual TLS
	ServerName         string // overrides the host name checked in the certificate
	InsecureSkipVerify bool   // never in production
}

// ConnOptions configure the Redis connection.
type ConnOptions struct {
	// URL is redis://[user:password@]host:port[/db] or rediss:// for TLS.
	URL string
	// Password, when set, overrides the URL's password (keeps secrets out
	// of URLs in config files).
	Password string
	// DB, when >= 0 and the URL has no /db path, selects the database.
	DB  int
	TLS *TLSOptions
	// Timeouts (defaults: dial 5 s, read/write 3 s).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// MaxRetries per command (default 3) with exponential backoff between
	// MinRetryBackoff and MaxRetryBackoff (defaults 8 ms, 512 ms).
	MaxRetries                       int
	MinRetryBackoff, MaxRetryBackoff time.Duration
	// PoolSize (default: go-redis default, 10 per CPU).
	PoolSize int
}

// Connect builds a client from o and checks it with PING. Errors name the
// server with the password redacted.
func Connect(ctx context.Context, o ConnOptions) (*redis.Client, error) {
	opts, err := clientOptions(o)
	if err != nil {
		return nil, err
	}
	c := redis.NewClient(opts)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("connect to redis %s (db %d): %w", Redact(o.URL), opts.DB, scrub(err, o))
	}
	return c, nil
}

// clientOptions turns ConnOptions into go-redis options.
func clientOptions(o ConnOptions) (*redis.Options, error) {
	if strings.TrimSpace(o.URL) == "" {
		return nil, errors.New("redis url: must not be empty (e.g. redis://localhost:6379/0)")
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("redis url %s: not a valid URL", Redact(o.URL))
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("redis url %s: scheme %q must be redis or rediss", Redact(o.URL), u.Scheme)
	}
	opts, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("redis url %s: %w", Redact(o.URL), scrub(err, o))
	}
	if o.Password != "" {
		opts.Password = o.Password
	}
	if o.DB > 0 && (u.Path == "" || u.Path == "/") && u.Query().Get("db") == "" {
		opts.DB = o.DB
	}
	if o.DB < 0 {
		return nil, fmt.Errorf("redis db %d: must be >= 0", o.DB)
	}
	if o.TLS != nil {
		if opts.TLSConfig == nil {
			opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
		}
		if err := applyTLS(opts.TLSConfig, *o.TLS); err != nil {
			return nil, err
		}
	}
	opts.DialTimeout = orDefault(o.DialTimeout, 5*time.Second)
	opts.ReadTimeout = orDefault(o.ReadTimeout, 3*time.Second)
	opts.WriteTimeout = orDefault(o.WriteTimeout, 3*time.Second)
	switch {
	case o.MaxRetries < 0:
		opts.MaxRetries = -1
	case o.MaxRetries == 0:
		opts.MaxRetries = 3
	default:
		opts.MaxRetries = o.MaxRetries
	}
	opts.MinRetryBackoff = orDefault(o.MinRetryBackoff, 8*time.Millisecond)
	opts.MaxRetryBackoff = orDefault(o.MaxRetryBackoff, 512*time.Millisecond)
	if opts.MaxRetryBackoff < opts.MinRetryBackoff {
		return nil, fmt.Errorf("redis max retry backoff %s: must be >= min retry backoff %s", opts.MaxRetryBackoff, opts.MinRetryBackoff)
	}
	if o.PoolSize < 0 {
		return nil, fmt.Errorf("redis pool size %d: must be >= 0", o.PoolSize)
	}
	if o.PoolSize > 0 {
		opts.PoolSize = o.PoolSize
	}
	return opts, nil
}

func applyTLS(cfg *tls.Config, t TLSOptions) error {
	if t.ServerName != "" {
		cfg.ServerName = t.ServerName
	}
	cfg.InsecureSkipVerify = t.InsecureSkipVerify //nolint:gosec // explicit operator choice
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return fmt.Errorf("redis tls ca file %q: %w", t.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("redis tls ca file %q: contains no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("redis tls client certificate: cert file %q and key file %q must be set together", t.CertFile, t.KeyFile)
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return fmt.Errorf("redis tls client certificate %q: %w", t.CertFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Redact returns raw with any password replaced by "xxxxx"; an unparsable
// URL is replaced entirely so a secret can never leak through it.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable redis url>"
	}
	return u.Redacted()
}

// scrub removes the configured passwords from an error message.
func scrub(err error, o ConnOptions) error {
	msg := err.Error()
	secrets := []string{o.Password}
	if u, perr := url.Parse(o.URL); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
	}
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return errors.New(msg)
}
