// Package devserver owns the embedded Temporal development server: a
// complete single-host Temporal cluster (frontend, history, matching and
// worker services) running inside the calling process on SQLite, with the
// Temporal Web UI, the archiveflow namespace and its custom search
// attributes registered, and dynamic config tuned for low latency.
//
// It exists for the `starter dev` command and for integration tests
// (devtemporal runs it in a process of its own for race-enabled test
// binaries). It
// links the whole Temporal server (~200 MB of binary, minutes of cold
// build), so production binaries (workers, starter commands other than
// dev) must never import it.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/archiveflow/archiveflow/internal/freeport"
	"github.com/archiveflow/archiveflow/internal/nssetup"
	"github.com/archiveflow/archiveflow/internal/searchattr"
	"github.com/archiveflow/archiveflow/internal/webui"
)

// DefaultStartTimeout bounds Start when its context has no deadline.
const DefaultStartTimeout = 2 * time.Minute

// ErrDataDirInUse is returned (wrapped) by Start when another server,
// in this process or another, already runs on the same DataDir.
var ErrDataDirInUse = errors.New("data dir is already in use by a running dev server")

// Server is a running embedded Temporal dev server. Its methods are safe
// for concurrent use.
type Server struct {
	opts        resolved
	hostPort    string
	log         *zap.Logger
	serverLevel zap.AtomicLevel // minimum level of the Temporal server's lines

	temporal temporal.Server
	ui       *webui.Server // nil without UI
	conn     *grpc.ClientConn
	lock     *dirLock // nil for in-memory

	stopOnce sync.Once
	stopErr  error
}

// Start starts a dev server and returns once its frontend serves the
// namespace with every search attribute of searchattr.All registered and,
// unless disabled, the Web UI answers. ctx bounds the start-up only (at
// most DefaultStartTimeout when it has no deadline); the server runs
// until Stop. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Server, error) {
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	begin := time.Now()

	s := &Server{
		opts:        r,
		log:         r.log.With(zap.String("component", "devserver")),
		serverLevel: zap.NewAtomicLevelAt(r.serverLevel),
	}
	if err := s.start(ctx); err != nil {
		if stopErr := s.Stop(); stopErr != nil {
			s.log.Warn("clean up after failed start", zap.Error(stopErr))
		}
		return nil, fmt.Errorf("start temporal dev server: %w", err)
	}
	s.log.Info("temporal dev server started",
		zap.String("host_port", s.hostPort),
		zap.String("ui", s.UIURL()),
		zap.String("namespace", r.namespace),
		zap.String("data_dir", r.dataDir),
		zap.Duration("took", time.Since(begin)))
	return s, nil
}

// start brings the parts up in order; Stop tears down whatever exists.
func (s *Server) start(ctx context.Context) error {
	r := s.opts
	if r.dataDir != "" {
		if err := os.MkdirAll(r.dataDir, 0o755); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
		lock, err := lockDataDir(filepath.Join(r.dataDir, lockFileName))
		if err != nil {
			return fmt.Errorf("data dir %s: %w", r.dataDir, err)
		}
		s.lock = lock
	}

	// A fixed UI port that is taken fails now, before Temporal starts.
	if r.uiPort > 0 {
		if err := freeport.CheckFree("web UI", r.bindIP, r.uiPort); err != nil {
			return err
		}
	}

	sql, err := sqlConfig(r.dataDir)
	if err != nil {
		return err
	}
	if err := prepareDatabase(sql, r.namespace); err != nil {
		return err
	}

	p, err := allocatePorts(r.bindIP, r.frontendPort)
	if err != nil {
		return err
	}
	s.hostPort = net.JoinHostPort(r.dialIP, strconv.Itoa(p.frontend))

	srv, err := temporal.NewServer(serverOptions(r, s.serverLevel, serverConfig(r, p, sql), staticHosts(r.dialIP, p))...)
	if err != nil {
		return fmt.Errorf("build temporal server: %w", err)
	}
	s.temporal = srv // so Stop also cleans up services a failed Start left running
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start temporal services: %w", err)
	}

	conn, err := grpc.NewClient(s.hostPort, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial frontend %s: %w", s.hostPort, err)
	}
	s.conn = conn
	ops := operatorservice.NewOperatorServiceClient(conn)
	if err := nssetup.SearchAttributes(ctx, ops, r.namespace, searchattr.All, s.log); err != nil {
		return err
	}

	if r.uiPort != NoUI {
		ui, err := webui.Start(ctx, webui.Options{
			Host: r.bindIP, DialHost: r.dialIP, Port: r.uiPort,
			TemporalAddr: s.hostPort, Namespace: r.namespace,
		})
		if err != nil {
			return err
		}
		s.ui = ui
	}
	return nil
}

// serverOptions wires config, static membership, logging, dynamic config
// and (no-op) authorization into the Temporal server.
func serverOptions(r resolved, level zap.AtomicLevel, c *config.Config, hosts map[primitives.ServiceName]static.Hosts) []temporal.ServerOption {
	serverLog := withMinLevel(r.log, level).With(zap.String("component", "temporal"))
	dyn := make(dynamicconfig.StaticClient, len(r.dynamic))
	for k, v := range r.dynamic {
		dyn[dynamicconfig.MakeKey(k)] = v
	}
	return []temporal.ServerOption{
		temporal.WithConfig(c),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(tlog.NewZapLogger(serverLog)),
		temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper {
			return authorization.NewNoopClaimMapper()
		}),
		temporal.WithDynamicConfigClient(dyn),
	}
}

// HostPort is the frontend address for SDK clients and workers, e.g.
// "127.0.0.1:7233".
func (s *Server) HostPort() string { return s.hostPort }

// UIURL is the Web UI's base URL, e.g. "http://127.0.0.1:8233", or ""
// when the UI is disabled.
func (s *Server) UIURL() string {
	if s.ui == nil {
		return ""
	}
	return s.ui.URL()
}

// Namespace is the namespace created at start.
func (s *Server) Namespace() string { return s.opts.namespace }

// DataDir is the absolute data dir, or "" for an in-memory server.
func (s *Server) DataDir() string { return s.opts.dataDir }

// Stop stops the Web UI and the Temporal services and releases the data
// dir. It is idempotent: later calls return the first call's result.
//
// Temporal's SQLite plugin never closes its pooled connections, so the
// process keeps the database open after Stop (an in-memory database keeps
// its memory until the process exits). A later Start on the same DataDir
// in the same process reuses that connection, which is harmless; the data
// dir lock is released, so another process may take the directory over.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *Server) stop() error {
	begin := time.Now()
	// Shutting down, the server's internal workers warn about every poll
	// the closing frontend cuts off; only errors are worth showing now.
	if s.serverLevel.Level() < zapcore.ErrorLevel {
		s.serverLevel.SetLevel(zapcore.ErrorLevel)
	}
	var errs []error
	if s.ui != nil {
		if err := s.ui.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.conn != nil {
		if err := s.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close frontend connection: %w", err))
		}
	}
	if s.temporal != nil {
		if err := s.temporal.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop temporal services: %w", err))
		}
	}
	if s.lock != nil {
		if err := s.lock.unlock(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop temporal dev server: %w", err)
	}
	if s.temporal != nil {
		s.log.Info("temporal dev server stopped", zap.String("host_port", s.hostPort), zap.Duration("took", time.Since(begin)))
	}
	return nil
}
