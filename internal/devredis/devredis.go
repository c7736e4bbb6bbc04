// Package devredis owns the Redis server of the embedded dev stack
// (`starter dev`): a real redis-server child process when one is configured
// or found on PATH, persisting under the stack's data directory, otherwise
// an in-process miniredis server listening on TCP. Which of the two runs is
// always said in the log and available from Server.Kind, because miniredis
// is a stand-in: it keeps nothing across restarts.
package devredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// EnvServer names a redis-server executable to use instead of PATH's.
const EnvServer = "ARCHIVEFLOW_REDIS_SERVER"

// Kind says which server runs.
type Kind string

// Server kinds.
const (
	// KindReal is a redis-server child process.
	KindReal Kind = "redis-server"
	// KindEmbedded is an in-process miniredis server (no persistence).
	KindEmbedded Kind = "embedded"
)

// Mode chooses between the server kinds.
type Mode string

// Modes.
const (
	// ModeAuto runs a real redis-server when one is configured or on PATH,
	// else the embedded server.
	ModeAuto Mode = "auto"
	// ModeReal requires a real redis-server.
	ModeReal Mode = "real"
	// ModeEmbedded always runs the embedded server.
	ModeEmbedded Mode = "embedded"
)

// Defaults.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultStopTimeout  = 10 * time.Second
)

// Options configures Start. The zero value runs in ModeAuto on a free
// loopback port without persistence.
type Options struct {
	// Mode: "" or ModeAuto, ModeReal, ModeEmbedded.
	Mode Mode
	// ServerPath is the redis-server executable. "" = $ARCHIVEFLOW_REDIS_SERVER,
	// then redis-server on PATH.
	ServerPath string
	// DataDir, when set, is where a real redis-server keeps its
	// append-only file and log, so jobs survive a restart of the stack.
	// It is created if missing. The embedded server ignores it.
	DataDir string
	// Port to listen on (127.0.0.1). 0 picks a free port.
	Port int
	// StartTimeout bounds how long the server may take to answer PING.
	StartTimeout time.Duration
	// Log receives what runs and why. nil discards.
	Log *zap.Logger
}

// Server is a running dev Redis server.
type Server struct {
	kind Kind
	addr string
	log  *zap.Logger

	// real server
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logPath string

	// embedded server
	mini *miniredis.Miniredis

	stopOnce sync.Once
	stopErr  error
}

// Start starts the server chosen by opts and returns once it answers PING.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("devredis")
	mode := opts.Mode
	if mode == "" {
		mode = ModeAuto
	}
	if mode == ModeEmbedded {
		return startEmbedded(opts, log, "embedded mode requested")
	}
	bin, err := findServer(opts.ServerPath)
	if err != nil {
		if mode == ModeReal {
			return nil, fmt.Errorf("start redis: %w (install redis-server, set %s, or use the embedded server)", err, EnvServer)
		}
		return startEmbedded(opts, log, err.Error())
	}
	return startReal(ctx, opts, log, bin)
}

func (o Options) validate() error {
	switch o.Mode {
	case "", ModeAuto, ModeReal, ModeEmbedded:
	default:
		return fmt.Errorf("redis mode %q: must be auto, real or embedded", o.Mode)
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("redis port %d: must be 0 (pick a free port) or 1-65535", o.Port)
	}
	if o.StartTimeout < 0 {
		return fmt.Errorf("redis start timeout %s: must be >= 0", o.StartTimeout)
	}
	return nil
}

// findServer resolves the redis-server executable: explicit path, then
// $ARCHIVEFLOW_REDIS_SERVER, then PATH.
func findServer(explicit string) (string, error) {
	if explicit == "" {
		explicit = os.Getenv(EnvServer)
	}
	if explicit != "" {
		p, err := exec.LookPath(explicit)
		if err != nil {
			return "", fmt.Errorf("redis-server %q: not an executable: %w", explicit, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redis-server not found on PATH")
	}
	return p, nil
}

func startEmbedded(opts Options, log *zap.Logger, why string) (*Server, error) {
	m := miniredis.NewMiniRedis()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.Port))
	if err := m.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("start embedded redis on %s: %w", addr, err)
	}
	s := &Server{kind: KindEmbedded, addr: m.Addr(), mini: m, log: log}
	log.Warn("using the EMBEDDED in-process Redis (miniredis): nothing persists across restarts; install redis-server for a real one",
		zap.String("reason", why), zap.String("url", s.URL()))
	return s, nil
}

func startReal(ctx context.Context, opts Options, log *zap.Logger, bin string) (*Server, error) {
	dir := opts.DataDir
	persist := dir != ""
	if !persist {
		tmp, err := os.MkdirTemp("", "archiveflow-redis-")
		if err != nil {
			return nil, fmt.Errorf("start redis-server: temp dir: %w", err)
		}
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start redis-server: data dir %s: %w", dir, err)
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = DefaultStartTimeout
	}
	// A free port picked here may be taken before redis binds it: retry
	// with a fresh one unless the caller fixed the port.
	attempts := 1
	if opts.Port == 0 {
		attempts = 5
	}
	var lastErr error
	for i := 0; i < attempts; i++ {
		port := opts.Port
		if port == 0 {
			p, err := freePort()
			if err != nil {
				return nil, fmt.Errorf("start redis-server: pick a free port: %w", err)
			}
			port = p
		}
		s, err := launch(ctx, bin, dir, port, persist, timeout, log)
		if err == nil {
			log.Info("using a real redis-server",
				zap.String("binary", bin), zap.String("url", s.URL()), zap.Int("pid", s.cmd.Process.Pid),
				zap.String("dir", dir), zap.Bool("persistent", persist))
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("start redis-server %s: %w", bin, lastErr)
}

func launch(ctx context.Context, bin, dir string, port int, persist bool, timeout time.Duration, log *zap.Logger) (*Server, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logPath := filepath.Join(dir, "redis.log")
	appendOnly := "no"
	if persist {
		appendOnly = "yes"
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", appendOnly,
		"--logfile", logPath,
		"--daemonize", "no",
	)
	cmd.SysProcAttr = childAttrs()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	s := &Server{kind: KindReal, addr: addr, cmd: cmd, exited: make(chan struct{}), logPath: logPath, log: log}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx, timeout); err != nil {
		_ = cmd.Process.Kill()
		<-s.exited
		return nil, fmt.Errorf("%w; server log: %s", err, tail(logPath, 2000))
	}
	return s, nil
}

// waitReady polls PING until it answers, the process exits, ctx ends or
// timeout passes.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		lastErr = c.Ping(pctx).Err()
		pcancel()
		if lastErr == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redis-server on %s exited before answering PING: %v", s.addr, s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("redis-server on %s did not answer PING within %s: %v", s.addr, timeout, lastErr)
		case <-tick.C:
		}
	}
}

// Kind says which server runs.
func (s *Server) Kind() Kind { return s.kind }

// Real reports whether a real redis-server runs.
func (s *Server) Real() bool { return s.kind == KindReal }

// Addr is host:port.
func (s *Server) Addr() string { return s.addr }

// URL is redis://host:port/0.
func (s *Server) URL() string { return "redis://" + s.addr + "/0" }

// Exited is closed when a real redis-server exits (never for the embedded
// server, which lives as long as the process).
func (s *Server) Exited() <-chan struct{} {
	if s.kind == KindEmbedded {
		return nil
	}
	return s.exited
}

// Stop shuts the server down: SIGTERM to redis-server (it flushes its
// append-only file), SIGKILL after DefaultStopTimeout. Idempotent.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *Server) stop() error {
	if s.kind == KindEmbedded {
		s.mini.Close()
		s.log.Info("embedded redis stopped", zap.String("addr", s.addr))
		return nil
	}
	select {
	case <-s.exited:
		return fmt.Errorf("redis-server on %s had already exited: %v", s.addr, s.waitErr)
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop redis-server pid %d: %w", s.cmd.Process.Pid, err)
	}
	timer := time.NewTimer(DefaultStopTimeout)
	defer timer.Stop()
	select {
	case <-s.exited:
		s.log.Info("redis-server stopped", zap.String("addr", s.addr))
		return nil
	case <-timer.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("stop redis-server pid %d: no exit within %s of SIGTERM; killed", s.cmd.Process.Pid, DefaultStopTimeout)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n bytes of the file at path, trimmed.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return strings.TrimSpace(string(data))
}
