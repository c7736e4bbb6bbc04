// Package testredis owns the Redis server used by tests: it starts a real
// redis-server on a free loopback port for the duration of one test (or
// benchmark) and, when none is installed and CI does not demand one, falls
// back to an in-process miniredis so unit tests still run on a bare machine.
package testredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Environment variables understood by Start.
const (
	// EnvServer names the redis-server executable to use instead of PATH.
	EnvServer = "ARCHIVEFLOW_REDIS_SERVER"
	// EnvRequire set to 1 makes a missing redis-server a test failure
	// instead of a fallback to miniredis (CI sets it).
	EnvRequire = "ARCHIVEFLOW_REQUIRE_REDIS"
)

// startTimeout bounds how long a redis-server may take to answer PING.
const startTimeout = 30 * time.Second

// Server is one Redis server private to a test.
type Server struct {
	// Addr is host:port of the server.
	Addr string
	// URL is redis://Addr/0.
	URL string

	real bool
	mini *miniredis.Miniredis

	mu      sync.Mutex
	clients []*redis.Client

	// proc is the running redis-server (nil while stopped or on
	// miniredis); bin, dir and port relaunch it on the same address.
	procMu sync.Mutex
	proc   *process
	bin    string
	dir    string
	port   int
}

// process is one launched redis-server and the channel closed when it exits.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// Start starts a Redis server for tb and stops it in tb.Cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := findServer()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			tb.Fatalf("testredis: %v; %s=1 requires a real Redis: apt-get install redis-server (or set %s)", err, EnvRequire, EnvServer)
		}
		tb.Logf("testredis: %v; falling back to in-process miniredis (set %s=1 to require a real redis-server)", err, EnvRequire)
		return startMini(tb)
	}
	return startReal(tb, bin)
}

// Real reports whether the server is a real redis-server (not miniredis).
func (s *Server) Real() bool { return s.real }

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
	if s.mini != nil {
		s.mini.FastForward(d)
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

func findServer() (string, error) {
	if p := os.Getenv(EnvServer); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%q: %w", EnvServer, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found on PATH: %w", err)
	}
	return p, nil
}

func startMini(tb testing.TB) *Server {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		tb.Fatalf("testredis: start miniredis: %v", err)
	}
	s := &Server{Addr: m.Addr(), URL: "redis://" + m.Addr() + "/0", mini: m}
	tb.Cleanup(func() {
		s.closeClients()
		m.Close()
	})
	return s
}

func startReal(tb testing.TB, bin string) *Server {
	tb.Helper()
	dir := tb.TempDir()
	// A port picked by the kernel may be taken again before redis binds
	// it; retry a few times with a fresh port.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("testredis: pick a free port: %v", err)
		}
		s, err := launch(tb, bin, dir, port)
		if err == nil {
			return s
		}
		lastErr = err
	}
	tb.Fatalf("testredis: start %s: %v", bin, lastErr)
	return nil
}

func launch(tb testing.TB, bin, dir string, port int) (*Server, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{Addr: addr, URL: "redis://" + addr + "/0", real: true, bin: bin, dir: dir, port: port}
	p, err := s.spawn()
	if err != nil {
		return nil, err
	}
	s.proc = p
	tb.Cleanup(func() {
		s.closeClients()
		s.procMu.Lock()
		defer s.procMu.Unlock()
		if s.proc != nil {
			s.proc.kill()
			s.proc = nil
		}
	})
	return s, nil
}

// spawn starts redis-server on s's port and dir and waits for PING. The
// database is persisted only by Stop (SHUTDOWN SAVE) into dir/dump.rdb,
// which the next spawn loads.
func (s *Server) spawn() (*process, error) {
	logPath := filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.port))
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--logfile", logPath,
		"--daemonize", "no",
	)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := waitReady(s.Addr, p.exited, &p.waitErr); err != nil {
		p.kill()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w; server log: %s", err, strings.TrimSpace(string(log)))
	}
	return p, nil
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Stop takes the server down as an outage would, keeping its data: the
// real server saves its dataset (SHUTDOWN SAVE) and exits, so its port
// refuses connections until Restart. Clients made by Client stay open and
// reconnect after Restart. Stopping a stopped server is an error.
func (s *Server) Stop() error {
	if s.mini != nil {
		s.mini.Close()
		return nil
	}
	s.procMu.Lock()
	defer s.procMu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("testredis: stop %s: server is not running", s.Addr)
	}
	p := s.proc
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: 5 * time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// SHUTDOWN never replies on success: the connection just closes.
	err := c.ShutdownSave(ctx).Err()
	select {
	case <-p.exited:
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("testredis: stop %s: redis-server did not exit after SHUTDOWN SAVE (%v)", s.Addr, err)
	}
	s.proc = nil
	return nil
}

// Restart starts a stopped server again on the same address with the data
// Stop saved, and returns once it answers PING.
func (s *Server) Restart() error {
	if s.mini != nil {
		if err := s.mini.Restart(); err != nil {
			return fmt.Errorf("testredis: restart miniredis on %s: %w", s.Addr, err)
		}
		return nil
	}
	s.procMu.Lock()
	defer s.procMu.Unlock()
	if s.proc != nil {
		return fmt.Errorf("testredis: restart %s: server is already running", s.Addr)
	}
	p, err := s.spawn()
	if err != nil {
		return fmt.Errorf("testredis: restart %s: %w", s.Addr, err)
	}
	s.proc = p
	return nil
}

// waitReady polls PING until it answers, the process exits or the deadline passes.
func waitReady(addr string, exited <-chan struct{}, waitErr *error) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited before answering PING: %v", *waitErr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		lastErr = c.Ping(ctx).Err()
		cancel()
		if lastErr == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer PING within %s: %v", addr, startTimeout, lastErr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
