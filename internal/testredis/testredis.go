// Package testredis owns the test policy for Redis: one server private to
// a test (or benchmark), started by internal/devredis (the one launcher)
// on a free loopback port and stopped at cleanup; a real redis-server when
// one is installed, else an in-process miniredis so unit tests still run on
// a bare machine, unless CI demands a real one (ARCHIVEFLOW_REQUIRE_REDIS);
// and the faults a test puts between a client and it (CutScripts: Redis
// gone between two script calls).
package testredis

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/devredis"
)

// Environment variables understood by Start.
const (
	// EnvServer names the redis-server executable to use instead of PATH.
	EnvServer = devredis.EnvServer
	// EnvRequire set to 1 makes a missing redis-server a test failure
	// instead of a fallback to miniredis (CI sets it).
	EnvRequire = "ARCHIVEFLOW_REQUIRE_REDIS"
)

// Server is one Redis server private to a test.
type Server struct {
	// Addr is host:port of the server.
	Addr string
	// URL is redis://Addr/0.
	URL string

	srv *devredis.Server

	mu      sync.Mutex
	clients []*redis.Client
}

// Start starts a Redis server for tb and stops it in tb.Cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	mode := devredis.ModeReal
	if _, err := devredis.FindServer(""); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			tb.Fatalf("testredis: %v; %s=1 requires a real Redis: apt-get install redis-server (or set %s)", err, EnvRequire, EnvServer)
		}
		tb.Logf("testredis: %v; falling back to in-process miniredis (set %s=1 to require a real redis-server)", err, EnvRequire)
		mode = devredis.ModeEmbedded
	}
	ctx, cancel := context.WithTimeout(context.Background(), devredis.DefaultStartTimeout)
	defer cancel()
	srv, err := devredis.Start(ctx, devredis.Options{Mode: mode, DataDir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("testredis: %v", err)
	}
	s := &Server{Addr: srv.Addr(), URL: srv.URL(), srv: srv}
	tb.Cleanup(func() {
		s.closeClients()
		_ = srv.Stop()
	})
	return s
}

// Real reports whether the server is a real redis-server (not miniredis).
func (s *Server) Real() bool { return s.srv.Real() }

// Client returns a new client connected to the server, closed at cleanup.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: 5 * time.Second})
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	return c
}

// FastForward advances expiry time: on a real server it waits for d to
// pass; on miniredis it moves the clock without waiting.
func (s *Server) FastForward(d time.Duration) {
	if m := s.srv.Embedded(); m != nil {
		m.FastForward(d)
		return
	}
	time.Sleep(d)
}

func (s *Server) closeClients() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.clients {
		_ = c.Close()
	}
	s.clients = nil
}

// Stop takes the server down as an outage would, keeping its data (see
// devredis.Server.Shutdown). Clients made by Client stay open and
// reconnect after Restart. Stopping a stopped server is an error.
func (s *Server) Stop() error {
	if err := s.srv.Shutdown(context.Background()); err != nil {
		return fmt.Errorf("testredis: stop: %w", err)
	}
	return nil
}

// Restart starts a stopped server again on the same address with the data
// Stop saved, and returns once it answers PING.
func (s *Server) Restart() error {
	if err := s.srv.Restart(context.Background()); err != nil {
		return fmt.Errorf("testredis: %w", err)
	}
	return nil
}
