//go:build dev || cluster

package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/api/adminservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/archiveflow/archiveflow/internal/composefile"
	"github.com/archiveflow/archiveflow/internal/freeport"
	"github.com/archiveflow/archiveflow/internal/nssetup"
	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// namespaceRetention is the retention temporal-setup creates the namespace
// with (`temporal operator namespace create --retention 7d`).
const namespaceRetention = 7 * 24 * time.Hour

// SetupSchema creates Temporal's databases and schemas in pg by running
// docker-compose's temporal-schema service: its entrypoint and command,
// with its environment pointed at pg and temporal-sql-tool from bins.
func SetupSchema(ctx context.Context, p *types.Project, pg *Postgres, bins Binaries, logDir string) error {
	s, ok := p.Services[composefile.ServiceSchema]
	if !ok {
		return fmt.Errorf("schema: docker-compose.yml has no service %s", composefile.ServiceSchema)
	}
	argv := append(append([]string{}, s.Entrypoint...), s.Command...)
	if len(argv) == 0 {
		return fmt.Errorf("schema: service %s has no entrypoint or command", composefile.ServiceSchema)
	}
	vars := []string{"PATH=" + bins.Dir + string(os.PathListSeparator) + os.Getenv("PATH")}
	for k, v := range s.Environment {
		if v != nil {
			vars = append(vars, k+"="+*v)
		}
	}
	sort.Strings(vars[1:])
	vars = append(vars, "SQL_HOST="+pg.Host, "SQL_PORT="+strconv.Itoa(pg.Port))
	proc, err := start(procSpec{name: "temporal-schema", bin: argv[0], args: argv[1:],
		env: vars, dir: logDir, log: logPath(logDir, "temporal-schema")})
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	select {
	case <-proc.Exited():
	case <-ctx.Done():
		proc.Kill()
		return fmt.Errorf("schema: %w", ctx.Err())
	}
	if proc.waitErr != nil {
		return fmt.Errorf("schema: service %s's script: %w\n%s", composefile.ServiceSchema, proc.waitErr, proc.Tail(30))
	}
	return nil
}

// TemporalOptions configures a Temporal server process.
type TemporalOptions struct {
	// Bin is the temporal-server binary.
	Bin string
	// Env is the temporal service's environment in docker-compose.yml
	// and DynamicConfig its dynamic config; the process gets them with
	// addresses and ports moved to loopback (see StartTemporal).
	Env           map[string]string
	DynamicConfig composefile.DynamicConfig
	// Postgres is where its databases are.
	Postgres *Postgres
	// Namespace is created with the search attributes of searchattr.All.
	Namespace string
	// Dir holds its working directory and log.
	Dir string
	// Name tells several servers of one cluster apart ("temporal", "temporal-2").
	Name string
}

// Temporal is a Temporal server process: frontend, history, matching and
// worker services in one process, as the temporalio/server image runs.
type Temporal struct {
	opts  TemporalOptions
	ports map[string]int
	proc  atomic.Pointer[Proc]
}

// portVars are the server's listening ports the embedded config template
// reads from the environment (its defaults would collide with a
// developer's Temporal and with other tests).
var portVars = []string{
	"FRONTEND_GRPC_PORT", "FRONTEND_HTTP_PORT", "FRONTEND_MEMBERSHIP_PORT",
	"HISTORY_GRPC_PORT", "HISTORY_MEMBERSHIP_PORT",
	"MATCHING_GRPC_PORT", "MATCHING_MEMBERSHIP_PORT",
	"WORKER_GRPC_PORT", "WORKER_MEMBERSHIP_PORT",
}

// pickPorts picks a free port for each of portVars. Temporal keeps the
// membership ports in a PostgreSQL smallint: they must be below 32768.
func pickPorts() (map[string]int, error) {
	ports := map[string]int{}
	taken := map[int]bool{}
	for _, v := range portVars {
		for {
			var p int
			var err error
			if strings.HasSuffix(v, "_MEMBERSHIP_PORT") {
				p, err = freeport.PortIn("127.0.0.1", 20000, 32767)
			} else {
				p, err = freeport.Port("127.0.0.1")
			}
			if err != nil {
				return nil, err
			}
			if !taken[p] {
				taken[p] = true
				ports[v] = p
				break
			}
		}
	}
	return ports, nil
}

// StartTemporal starts `temporal-server start` the way the temporalio/server
// image does — no config file, the server's embedded config template
// filled from the environment — with the compose service's environment,
// except: PostgreSQL and every listener are on loopback with free ports,
// and the dynamic config file lies under Dir at the path the container
// would mount it. It returns once the namespace exists with archiveflow's
// search attributes and answers visibility queries.
func StartTemporal(ctx context.Context, o TemporalOptions) (*Temporal, error) {
	var err error
	if o.Name == "" {
		o.Name = "temporal"
	}
	t := &Temporal{opts: o}
	if t.ports, err = pickPorts(); err != nil {
		return nil, err
	}
	if err := t.writeDynamicConfig(); err != nil {
		return nil, err
	}
	if err := t.Start(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// dynamicConfigFile is where the dynamic config lies on this machine: under
// Dir, at its path inside the container.
func (t *Temporal) dynamicConfigFile() string {
	return filepath.Join(t.opts.Dir, "root", filepath.FromSlash(t.opts.DynamicConfig.Path))
}

func (t *Temporal) writeDynamicConfig() error {
	f := t.dynamicConfigFile()
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return fmt.Errorf("dynamic config: %w", err)
	}
	if err := os.WriteFile(f, t.opts.DynamicConfig.Content, 0o644); err != nil {
		return fmt.Errorf("dynamic config: %w", err)
	}
	return nil
}

// env is the server process's whole environment.
func (t *Temporal) env() []string {
	vars := map[string]string{}
	for k, v := range t.opts.Env {
		vars[k] = v
	}
	vars["POSTGRES_SEEDS"] = t.opts.Postgres.Host
	vars["DB_PORT"] = strconv.Itoa(t.opts.Postgres.Port)
	vars["BIND_ON_IP"] = "127.0.0.1"
	vars["DYNAMIC_CONFIG_FILE_PATH"] = t.dynamicConfigFile()
	for k, p := range t.ports {
		vars[k] = strconv.Itoa(p)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.opts.Dir}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// Start starts the server process (again, after Kill or Stop, on the same
// ports and databases) and waits until it serves the namespace.
func (t *Temporal) Start(ctx context.Context) error {
	if p := t.proc.Load(); p != nil && p.Running() {
		return fmt.Errorf("%s: already running (pid %d)", t.opts.Name, p.Pid())
	}
	wd := filepath.Join(t.opts.Dir, "root", "etc", "temporal")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return fmt.Errorf("%s: %w", t.opts.Name, err)
	}
	p, err := start(procSpec{name: t.opts.Name, bin: t.opts.Bin, args: []string{"start"},
		env: t.env(), dir: wd, log: logPath(t.opts.Dir, t.opts.Name)})
	if err != nil {
		return err
	}
	t.proc.Store(p)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-p.Exited():
			cancel(fmt.Errorf("%s exited: %v", t.opts.Name, p.waitErr))
		case <-ctx.Done():
		}
	}()
	if err := t.prepare(ctx); err != nil {
		if c := context.Cause(ctx); c != nil {
			err = c
		}
		_ = p.Stop(10 * time.Second)
		return fmt.Errorf("start %s on %s: %w\n%s", t.opts.Name, t.HostPort(), err, p.Tail(30))
	}
	return nil
}

// prepare creates the namespace and registers the search attributes, as
// temporal-setup does, then waits until visibility answers in it (a
// namespace is usable by every service only once their caches have it).
func (t *Temporal) prepare(ctx context.Context) error {
	conn, err := grpc.NewClient(t.HostPort(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	wf := workflowservice.NewWorkflowServiceClient(conn)
	log := zap.NewNop()
	if err := nssetup.Namespace(ctx, wf, t.opts.Namespace, namespaceRetention, log); err != nil {
		return err
	}
	if err := nssetup.SearchAttributes(ctx, operatorservice.NewOperatorServiceClient(conn), t.opts.Namespace, searchattr.All, log); err != nil {
		return err
	}
	query := fmt.Sprintf("%s = 'readiness-probe'", searchattr.NameIdent)
	for {
		_, err := wf.ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: t.opts.Namespace, Query: query})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Rings asks the server's admin service how many hosts each service's
// membership ring has (e.g. "history": 2 when two server processes form one
// cluster).
func (t *Temporal) Rings(ctx context.Context) (map[string]int, error) {
	rings := map[string]int{}
	err := t.admin(func(c adminservice.AdminServiceClient) error {
		resp, err := c.DescribeCluster(ctx, &adminservice.DescribeClusterRequest{})
		if err != nil {
			return fmt.Errorf("describe cluster at %s: %w", t.HostPort(), err)
		}
		for _, r := range resp.GetMembershipInfo().GetRings() {
			rings[r.GetRole()] = int(r.GetMemberCount())
		}
		return nil
	})
	return rings, err
}

// HistoryHost is the address of the history service that owns the shard
// of a workflow (its latest run).
func (t *Temporal) HistoryHost(ctx context.Context, namespace, workflowID string) (string, error) {
	var addr string
	err := t.admin(func(c adminservice.AdminServiceClient) error {
		resp, err := c.DescribeMutableState(ctx, &adminservice.DescribeMutableStateRequest{
			Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID}})
		if err != nil {
			return fmt.Errorf("describe mutable state of %s: %w", workflowID, err)
		}
		addr = resp.GetHistoryAddr()
		return nil
	})
	return addr, err
}

// HistoryAddr is this process's history service address.
func (t *Temporal) HistoryAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.ports["HISTORY_GRPC_PORT"]))
}

// admin calls f with an admin service client of the server.
func (t *Temporal) admin(f func(adminservice.AdminServiceClient) error) error {
	conn, err := grpc.NewClient(t.HostPort(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	return f(adminservice.NewAdminServiceClient(conn))
}

// HostPort is the frontend's gRPC address.
func (t *Temporal) HostPort() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.ports["FRONTEND_GRPC_PORT"]))
}

// Proc is the current server process (nil before Start).
func (t *Temporal) Proc() *Proc { return t.proc.Load() }

// Kill kills the server process with SIGKILL: nothing is flushed, as when
// its host dies.
func (t *Temporal) Kill() {
	if p := t.proc.Load(); p != nil {
		p.Kill()
	}
}

// Stop stops the server process with SIGTERM (graceful shutdown).
func (t *Temporal) Stop() error {
	if p := t.proc.Load(); p != nil {
		return p.Stop(time.Minute)
	}
	return nil
}

// Log is the path of the server's log.
func (t *Temporal) Log() string { return logPath(t.opts.Dir, t.opts.Name) }

// String describes the server for a test log.
func (t *Temporal) String() string {
	return fmt.Sprintf("%s: frontend %s, PostgreSQL %s, dynamic config %s, log %s",
		t.opts.Name, t.HostPort(), t.opts.Postgres.Addr(), t.dynamicConfigFile(), t.Log())
}
