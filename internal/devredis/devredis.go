// Package devredis owns starting a Redis server on this machine, for the
// embedded dev stack (`starter dev`) and, through internal/testredis, for
// tests: a real redis-server child process when one is configured or found
// on PATH, otherwise an in-process miniredis server listening on TCP. Which
// of the two runs is always said in the log and available from
// Server.Kind, because miniredis is a stand-in: it keeps nothing across
// restarts of the process. A server can be taken down as an outage would
// (Shutdown) and brought back on the same address with its data (Restart).
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

// Bounds of a real server's start and stop.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultStopTimeout  = 10 * time.Second
)

// Options configures Start. The zero value runs in ModeAuto on a free
// loopback port in a temporary directory, without persistence.
type Options struct {
	// Mode: "" or ModeAuto, ModeReal, ModeEmbedded.
	Mode Mode
	// ServerPath is the redis-server executable. "" = $ARCHIVEFLOW_REDIS_SERVER,
	// then redis-server on PATH.
	ServerPath string
	// DataDir is where a real redis-server keeps its log and the dataset
	// Shutdown saves; it is created if missing. "" = a temporary directory,
	// removed by Stop. The embedded server ignores it.
	DataDir string
	// Persist keeps every write in an append-only file under DataDir, so
	// jobs survive a restart of the stack (`starter dev`). It needs DataDir.
	Persist bool
	// Port to listen on (127.0.0.1). 0 picks a free port.
	Port int
	// StartTimeout bounds how long the server may take to answer PING
	// (0 = DefaultStartTimeout).
	StartTimeout time.Duration
	// Log receives what runs and why. nil discards.
	Log *zap.Logger
}

// Server is a running Redis server.
type Server struct {
	kind Kind
	addr string
	log  *zap.Logger

	// real server: bin, dir, port and persist relaunch it on the same
	// address; proc is nil while it is shut down.
	bin, dir string
	tempDir  bool
	port     int
	persist  bool
	timeout  time.Duration
	mu       sync.Mutex
	proc     *process

	// embedded server
	mini *miniredis.Miniredis

	stopOnce sync.Once
	stopErr  error
}

// process is one launched redis-server and the channel closed when it exits.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
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
	bin, err := FindServer(opts.ServerPath)
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
	if o.Persist && o.DataDir == "" {
		return errors.New("redis persist: needs a data dir")
	}
	return nil
}

// FindServer resolves the redis-server executable: explicit path, then
// $ARCHIVEFLOW_REDIS_SERVER, then PATH.
func FindServer(explicit string) (string, error) {
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
	s := &Server{kind: KindReal, log: log, bin: bin, dir: opts.DataDir, persist: opts.Persist, timeout: opts.StartTimeout}
	if s.timeout == 0 {
		s.timeout = DefaultStartTimeout
	}
	if s.dir == "" {
		tmp, err := os.MkdirTemp("", "archiveflow-redis-")
		if err != nil {
			return nil, fmt.Errorf("start redis-server: temp dir: %w", err)
		}
		s.dir, s.tempDir = tmp, true
	} else if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("start redis-server: data dir %s: %w", s.dir, err)
	}
	// A free port picked here may be taken before redis binds it: retry
	// with a fresh one unless the caller fixed the port.
	attempts := 1
	if opts.Port == 0 {
		attempts = 5
	}
	var lastErr error
	for i := 0; i < attempts; i++ {
		s.port = opts.Port
		if s.port == 0 {
			p, err := freePort()
			if err != nil {
				lastErr = fmt.Errorf("pick a free port: %w", err)
				break
			}
			s.port = p
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		p, err := s.launch(ctx)
		if err == nil {
			s.proc = p
			log.Info("using a real redis-server",
				zap.String("binary", bin), zap.String("url", s.URL()), zap.Int("pid", p.cmd.Process.Pid),
				zap.String("dir", s.dir), zap.Bool("persistent", s.persist))
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if s.tempDir {
		_ = os.RemoveAll(s.dir)
	}
	return nil, fmt.Errorf("start redis-server %s: %w", bin, lastErr)
}

// launch starts redis-server on s's port and dir and waits for PING.
// Without Persist the dataset is saved only by Shutdown (dump.rdb in dir),
// which the next launch loads.
func (s *Server) launch(ctx context.Context) (*process, error) {
	logPath := filepath.Join(s.dir, "redis.log")
	appendOnly := "no"
	if s.persist {
		appendOnly = "yes"
	}
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", appendOnly,
		"--logfile", logPath,
		"--daemonize", "no",
	)
	cmd.SysProcAttr = childAttrs()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := waitReady(ctx, s.addr, p, s.timeout); err != nil {
		p.kill()
		return nil, fmt.Errorf("%w; server log: %s", err, tail(logPath, 2000))
	}
	return p, nil
}

// waitReady polls PING until it answers, the process exits, ctx ends or
// timeout passes.
func waitReady(ctx context.Context, addr string, p *process, timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
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
		case <-p.exited:
			return fmt.Errorf("redis-server on %s exited before answering PING: %v", addr, p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("redis-server on %s did not answer PING within %s: %v", addr, timeout, lastErr)
		case <-tick.C:
		}
	}
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Kind says which server runs.
func (s *Server) Kind() Kind { return s.kind }

// Real reports whether a real redis-server runs.
func (s *Server) Real() bool { return s.kind == KindReal }

// Addr is host:port.
func (s *Server) Addr() string { return s.addr }

// URL is redis://host:port/0.
func (s *Server) URL() string { return "redis://" + s.addr + "/0" }

// Embedded is the in-process server (its clock can be moved), nil for a
// real one.
func (s *Server) Embedded() *miniredis.Miniredis { return s.mini }

// Shutdown takes the server down as an outage would, keeping its data:
// a real server saves its dataset (SHUTDOWN SAVE) and exits, so its port
// refuses connections until Restart. Shutting down a server that is not
// running is an error.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.kind == KindEmbedded {
		s.mini.Close()
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("shut down redis-server on %s: it is not running", s.addr)
	}
	p := s.proc
	c := redis.NewClient(&redis.Options{Addr: s.addr, DialTimeout: 5 * time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// SHUTDOWN never replies on success: the connection just closes.
	err := c.ShutdownSave(ctx).Err()
	select {
	case <-p.exited:
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("shut down redis-server on %s: no exit after SHUTDOWN SAVE (%v)", s.addr, err)
	}
	s.proc = nil
	return nil
}

// Restart starts a server Shutdown took down again, on the same address
// with the data it saved, and returns once it answers PING.
func (s *Server) Restart(ctx context.Context) error {
	if s.kind == KindEmbedded {
		if err := s.mini.Restart(); err != nil {
			return fmt.Errorf("restart embedded redis on %s: %w", s.addr, err)
		}
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return fmt.Errorf("restart redis-server on %s: it is already running", s.addr)
	}
	p, err := s.launch(ctx)
	if err != nil {
		return fmt.Errorf("restart redis-server on %s: %w", s.addr, err)
	}
	s.proc = p
	return nil
}

// Stop shuts the server down for good: SIGTERM to redis-server (it
// flushes its append-only file), SIGKILL after DefaultStopTimeout, and the
// temporary directory removed. Idempotent.
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
	if s.tempDir {
		defer os.RemoveAll(s.dir)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return nil // shut down and not restarted
	}
	s.proc = nil
	select {
	case <-p.exited:
		return fmt.Errorf("redis-server on %s had already exited: %v", s.addr, p.waitErr)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop redis-server pid %d: %w", p.cmd.Process.Pid, err)
	}
	timer := time.NewTimer(DefaultStopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		s.log.Info("redis-server stopped", zap.String("addr", s.addr))
		return nil
	case <-timer.C:
		p.kill()
		return fmt.Errorf("stop redis-server pid %d: no exit within %s of SIGTERM; killed", p.cmd.Process.Pid, DefaultStopTimeout)
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
